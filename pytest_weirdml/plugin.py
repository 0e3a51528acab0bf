"""pytest-weirdml's hooks: options, collection of task directories, parametrization, summary."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pytest_weirdml import config as config_mod
from pytest_weirdml import fixtures, hookspecs
from pytest_weirdml.fixtures import SETTINGS_KEY, cases
from pytest_weirdml.items import MARKER, collect_task
from pytest_weirdml.report.collector import ResultsCollector
from pytest_weirdml.sandbox import image
from pytest_weirdml.tasks import TASK_FILE

SESSION_INPUT = "weirdml_session"


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(hookspecs)


def pytest_addoption(parser: pytest.Parser) -> None:
    config_mod.pytest_addoption(parser)


def pytest_configure(config: pytest.Config) -> None:
    workerinput = getattr(config, "workerinput", None)
    session = workerinput[SESSION_INPUT] if workerinput else config_mod.new_session_name()
    settings = config_mod.settings_from(config, session)
    config.stash[SETTINGS_KEY] = settings
    config.addinivalue_line("markers", f"{MARKER}: an item collected from a WeirdML task directory")
    config.pluginmanager.register(fixtures, "weirdml-fixtures")
    config.pluginmanager.register(BrokenTasks(), "weirdml-broken-tasks")
    if workerinput is None:
        config.pluginmanager.register(ResultsCollector(settings), "weirdml-results")
        if config.option.weirdml_build_image:
            image.build_before_session()


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    return collect_task(file_path, parent)


class BrokenTasks:
    """A broken task directory errors alone: when broken tasks are the only collection failures,
    the other items still run (the session still exits non-zero)."""

    def __init__(self) -> None:
        self.count = 0

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed and report.nodeid.endswith(TASK_FILE):
            self.count += 1

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> None:
        if session.testsfailed and session.testsfailed == self.count:
            session.config.option.continue_on_collection_errors = True


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "weirdml_case" not in metafunc.fixturenames:
        return
    settings = metafunc.config.stash[SETTINGS_KEY]
    if settings.models:
        run_cases = cases(settings)
        metafunc.parametrize("weirdml_case", run_cases, ids=[case.id for case in run_cases])


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """xdist: every worker writes into the controller's session directory."""
    node.workerinput[SESSION_INPUT] = node.config.stash[SETTINGS_KEY].session
