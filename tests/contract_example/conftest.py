"""A backend from outside the package, registered the way a plugin's conftest.py would: it runs
each script through the local sandbox and counts them. Registered for this directory's tests
only, so no other session sees the name."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_weirdml.sandbox import BACKENDS, Environment, ExecResult, Limits, Sandbox
from pytest_weirdml.sandbox.local import LocalSandbox


class ExampleSandbox(Sandbox):
    name = "example"
    runs = 0

    def __init__(self, *, python: str | None = None) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.inner = LocalSandbox(python=python)
        self.isolated = self.inner.isolated
        self.cgroups = self.inner.cgroups

    def run(self, code: str, data_dir: Path, limits: Limits, gpu: str | None = None) -> ExecResult:
        ExampleSandbox.runs += 1
        return self.inner.run(code, data_dir, limits, gpu=gpu)

    def environment(self) -> Environment:
        return self.inner.environment()

    def close(self) -> None:
        self.inner.close()


@pytest.fixture(scope="module", autouse=True)
def example_backend() -> Iterator[None]:
    BACKENDS.add("example", ExampleSandbox)
    yield
    BACKENDS.discard("example")
