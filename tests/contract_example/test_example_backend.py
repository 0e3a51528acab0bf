"""The shipped sandbox contract, run against a backend registered from this directory's conftest:
the one line below is all a plugin's backend needs."""

from __future__ import annotations

from pytest_weirdml.sandbox import BACKENDS, Sandbox
from pytest_weirdml.sandbox.contract import *  # noqa: F403

WEIRDML_CONTRACT_BACKENDS = ["example"]


def test_the_cases_run_on_the_registered_backend(sandbox: Sandbox) -> None:
    factory = BACKENDS.get("example")
    assert factory is not None and isinstance(sandbox, factory) and sandbox.name == "example"
    assert "example" in BACKENDS.names()
