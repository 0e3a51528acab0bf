from __future__ import annotations

from pathlib import Path

import pytest

from pytest_weirdml.tasks import TaskData, build_data, load_task

TASKS_DIR = Path(__file__).resolve().parents[2] / "tasks"


@pytest.fixture(scope="session")
def data_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One data cache per test session, so each task is built once from scratch."""
    return tmp_path_factory.mktemp("weirdml-data")


@pytest.fixture(scope="session")
def built(data_cache: Path):  # type: ignore[no-untyped-def]
    """``built("shapes_easy")`` -> TaskData, built once per session."""

    def build(name: str) -> TaskData:
        return build_data(load_task(TASKS_DIR / name), data_cache)

    return build
