"""The sandbox contract: the cases every backend must pass, shipped for plugins' backends too.

Each case runs a script (ordinary, hostile, or leaving odd files in results/) through a backend
and checks what comes back: an ``ExecResult`` for anything the script does, nothing left
running, limits held, isolation kept where the backend promises it, the announced packages and
no others. The cases are parametrised over the registered backends (``sandbox.BACKENDS``); a
backend registered by a plugin or a conftest.py runs them all with one line in a test module::

    from pytest_weirdml.sandbox.contract import *  # noqa: F403

Set ``WEIRDML_CONTRACT_BACKENDS = ["mine"]`` in that module to run only some backends, and
override the ``weirdml_open_backend`` fixture to open one with settings of its own. This is the
one module under ``sandbox/`` that imports pytest: it is a test suite, and nothing in the
harness imports it.
"""

from __future__ import annotations

from pytest_weirdml.sandbox.contract import _fixtures, cases_isolation, cases_results, cases_runs
from pytest_weirdml.sandbox.contract._fixtures import *  # noqa: F403
from pytest_weirdml.sandbox.contract.cases_isolation import *  # noqa: F403
from pytest_weirdml.sandbox.contract.cases_results import *  # noqa: F403
from pytest_weirdml.sandbox.contract.cases_runs import *  # noqa: F403

__all__ = [*_fixtures.__all__, *cases_runs.__all__, *cases_isolation.__all__, *cases_results.__all__]
