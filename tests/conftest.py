from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

import pytest
from helpers import write_tiny_task

# The plugin's tests run sessions of their own (pytester); task sessions need none of it.
pytest_plugins = ["pytester"]

# pytester drops every module first imported inside an in-process session. The Docker SDK,
# first imported there and again later, would come back as a second copy beside the first's
# `requests` ("You can only merge into CookieJar"), so it is imported once, before any session.
with contextlib.suppress(ImportError):
    import docker  # noqa: F401

# pytester gives every in-test session a fresh HOME; the local sandbox's environment (built once,
# about 1.3 GB) and the probe cache must stay the one under the real cache directory.
os.environ.setdefault("XDG_CACHE_HOME", str(Path.home() / ".cache"))


@pytest.fixture
def tiny(pytester: pytest.Pytester) -> Path:
    return write_tiny_task(pytester.path)


@pytest.fixture
def base_args(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Options every in-test session gets: its own data cache and reports under pytester's dir.

    An in-test session is not an xdist worker even when the outer session is one, so it must not
    take the outer worker's GPU and CPU leases.
    """
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    monkeypatch.delenv("PYTEST_XDIST_WORKER_COUNT", raising=False)
    return [
        f"--weirdml-data-cache={pytester.path / 'cache'}",
        f"--weirdml-reports={pytester.path / 'reports'}",
        # Unrelated plugins that happen to be installed only slow every in-test session down.
        *("-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-p", "no:benchmark"),
    ]


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Tests marked ``xdist_group`` run on one worker: the Ray tests share one local cluster."""
    if config.getoption("dist") != "load":
        return None
    from xdist.scheduler import LoadGroupScheduling

    return LoadGroupScheduling(config, log)
