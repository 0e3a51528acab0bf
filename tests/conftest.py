from __future__ import annotations

from pathlib import Path

import pytest
from helpers import write_tiny_task


@pytest.fixture
def tiny(pytester: pytest.Pytester) -> Path:
    return write_tiny_task(pytester.path)


@pytest.fixture
def base_args(pytester: pytest.Pytester) -> list[str]:
    """Options every in-test session gets: its own data cache and reports under pytester's dir."""
    return [
        f"--weirdml-data-cache={pytester.path / 'cache'}",
        f"--weirdml-reports={pytester.path / 'reports'}",
        # Unrelated plugins that happen to be installed only slow every in-test session down.
        *("-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-p", "no:benchmark"),
    ]
