"""Collection: a ``task.toml`` becomes a module whose one test function is the task.

pytest gives fixtures only to ``pytest.Function`` items, and the loop is driven by fixtures that
users may override. So each task directory is collected as a ``pytest.Module`` whose object is
a module made on the fly, holding one function named after the task and marked with its
markers. ``pytest_generate_tests`` then parametrizes it over (model, run), which yields real
``Function`` items named ``<task>[<model>-<run>]``.
"""

from __future__ import annotations

import types
from typing import Any

import pytest

from pytest_weirdml.errors import TaskError
from pytest_weirdml.records import RunRecord
from pytest_weirdml.tasks import TASK_FILE, TaskSpec, load_task

MARKER = "weirdml"


def _check_run(weirdml_run: RunRecord, weirdml_threshold: float | None) -> None:
    """The test body: a finished run passes unless it misses the threshold the user set."""
    if weirdml_threshold is not None and weirdml_run.score < weirdml_threshold:
        pytest.fail(
            f"run score {weirdml_run.score:.4f} is under --weirdml-fail-under={weirdml_threshold:g}",
            pytrace=False,
        )


class TaskModule(pytest.Module):
    """The collector of one task directory (its ``task.toml``)."""

    spec: TaskSpec

    def _getobj(self) -> types.ModuleType:
        self.spec = load_task(self.path.parent)
        for marker in (MARKER, *self.spec.markers):
            if marker not in _registered(self.config):
                self.config.addinivalue_line("markers", f"{marker}: WeirdML task marker (from task.toml)")
        module = types.ModuleType(f"weirdml_task_{self.spec.name}")
        module.__file__ = str(self.path)
        # Pointing the function's code at task.toml makes reports and tracebacks name the task.
        code = _check_run.__code__.replace(
            co_filename=str(self.path), co_name=self.spec.name, co_qualname=self.spec.name, co_firstlineno=1
        )
        function = types.FunctionType(code, _check_run.__globals__, self.spec.name)
        function.__module__ = module.__name__
        function.__doc__ = self.spec.description
        setattr(module, self.spec.name, function)
        module.pytestmark = [getattr(pytest.mark, m) for m in (MARKER, *self.spec.markers)]  # type: ignore[attr-defined]
        return module

    def istestfunction(self, obj: object, name: str) -> bool:
        return name == self.spec.name and callable(obj)

    def istestclass(self, obj: object, name: str) -> bool:
        return False

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException]) -> Any:  # type: ignore[override]
        if isinstance(excinfo.value, TaskError):
            return f"broken task: {excinfo.value}"
        return super().repr_failure(excinfo)


def _registered(config: pytest.Config) -> set[str]:
    return {line.split(":", 1)[0].split("(", 1)[0].strip() for line in config.getini("markers")}


def collect_task(file_path: Any, parent: pytest.Collector) -> TaskModule | None:
    if file_path.name != TASK_FILE:
        return None
    return TaskModule.from_parent(parent, path=file_path)


def task_of(item: pytest.Item) -> TaskSpec | None:
    module = item.getparent(TaskModule)
    return module.spec if module is not None else None
