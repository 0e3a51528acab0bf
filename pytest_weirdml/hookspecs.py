"""Hooks pytest-weirdml offers to other plugins and conftest.py files."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pytest_weirdml.records import IterationRecord, RunRecord


def pytest_weirdml_iteration(item: pytest.Item, record: IterationRecord) -> None:
    """Called, in the process that runs ``item``, after each iteration is scored and stored."""


def pytest_weirdml_run(item: pytest.Item, record: RunRecord) -> None:
    """Called, in the process that runs ``item``, when its run has finished all iterations."""
