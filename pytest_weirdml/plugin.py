"""pytest-weirdml's hooks: options, collection of task directories, parametrization, the session
header, recording harness errors, and the xdist glue."""

from __future__ import annotations

import sys
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

from pytest_weirdml import config as config_mod
from pytest_weirdml import fixtures, hookspecs, terminal
from pytest_weirdml.activity import Board
from pytest_weirdml.budget import CostCap
from pytest_weirdml.collector import ResultsCollector
from pytest_weirdml.config import MODEL_POOL_KEY, SETTINGS_KEY, Settings
from pytest_weirdml.errors import SandboxError
from pytest_weirdml.fixtures import BOARD_KEY, cases
from pytest_weirdml.gate import BaselineCheck, load_baseline
from pytest_weirdml.interrupt import interrupt_on_sigterm
from pytest_weirdml.items import MARKER, collect_task
from pytest_weirdml.models.pool import ModelPool
from pytest_weirdml.tasks import TASK_FILE

SESSION_INPUT = "weirdml_session"
SESSION_DIR_INPUT = "weirdml_session_dir"
SEED_INPUT = "weirdml_data_seed"
GPUS_INPUT = "weirdml_gpus"
# Where each worker's board of runs in flight is written (activity.Board), for the controller.
BOARDS_INPUT = "weirdml_boards"


class ModelDeprecatedWarning(UserWarning):
    """A chosen model is being retired by its provider (said once per session)."""


class OutputCapWarning(UserWarning):
    """A chosen model's output cap is a fallback: its server states no limit (said once per session)."""


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(hookspecs)


def pytest_addoption(parser: pytest.Parser) -> None:
    config_mod.pytest_addoption(parser)


def pytest_configure(config: pytest.Config) -> None:
    # SIGTERM (timeout, CI runners, container stops) ends the session as Ctrl-C does.
    interrupt_on_sigterm(config)
    workerinput = getattr(config, "workerinput", None)
    if workerinput:
        settings = config_mod.settings_from(
            config,
            workerinput[SESSION_INPUT],
            session_dir=Path(workerinput[SESSION_DIR_INPUT]),
            data_seed=workerinput[SEED_INPUT],
            gpus=tuple(workerinput[GPUS_INPUT]),
        )
    else:
        settings = config_mod.settings_from(config, config_mod.new_session_name())
    config.stash[SETTINGS_KEY] = settings
    pool = config.stash[MODEL_POOL_KEY] = _model_pool(settings)
    if workerinput is None:
        try:
            config_mod.check_session(settings)
        except pytest.UsageError:
            pool.close()
            raise
    if workerinput and workerinput.get(BOARDS_INPUT):
        config.stash[BOARD_KEY] = Board(Path(workerinput[BOARDS_INPUT]) / f"{workerinput['workerid']}.json")
    else:
        config.stash[BOARD_KEY] = Board()
    if settings.max_cost is not None:
        config.pluginmanager.register(CostCap(settings.session_dir, settings.max_cost), "weirdml-cost-cap")
    config.addinivalue_line("markers", f"{MARKER}: an item collected from a WeirdML task directory")
    config.pluginmanager.register(fixtures, "weirdml-fixtures")
    config.pluginmanager.register(BrokenTasks(), "weirdml-broken-tasks")
    baseline = load_baseline(settings.gate)
    if baseline is not None:
        config.pluginmanager.register(BaselineCheck(settings, pool, baseline), "weirdml-baseline-check")
    if workerinput is None:
        config.pluginmanager.register(ResultsCollector(settings, baseline), "weirdml-results")
        for name in settings.models:
            model = pool.get(name)
            note = model.deprecation()
            if note:
                config.issue_config_time_warning(ModelDeprecatedWarning(note), stacklevel=2)
            if model.cap_note:
                config.issue_config_time_warning(OutputCapWarning(model.cap_note), stacklevel=2)
        if config.option.weirdml_build_image:
            _build_image()


def _model_pool(settings: Settings) -> ModelPool:
    """The process's model clients, every chosen one built now: a missing SDK or API key stops the
    session before any work."""
    pool = ModelPool(settings.catalog, cache=settings.cache_dir, answer_timeout_s=settings.answer_timeout_s)
    for name in settings.models:
        try:
            pool.get(name)
        except ValueError as exc:
            pool.close()
            raise pytest.UsageError(f"--weirdml-model: {exc}") from None
    return pool


def pytest_unconfigure(config: pytest.Config) -> None:
    pool = config.stash.get(MODEL_POOL_KEY, None)
    if pool is not None:
        pool.close()
        del config.stash[MODEL_POOL_KEY]


def _build_image() -> None:
    """``--weirdml-build-image``: build (or find) the image; a failure stops the session."""
    from pytest_weirdml.sandbox import image
    from pytest_weirdml.sandbox.docker import connect

    try:
        tag = image.build(connect())
    except SandboxError as exc:
        raise pytest.UsageError(f"--weirdml-build-image: {exc}") from None
    sys.stderr.write(f"weirdml: sandbox image {tag} is ready\n")


def pytest_report_header(config: pytest.Config) -> list[str]:
    workers = getattr(config.option, "numprocesses", None)
    return terminal.header_lines(
        config.stash[SETTINGS_KEY], workers if isinstance(workers, int) and workers else 1, config.stash[MODEL_POOL_KEY]
    )


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


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    """A task item whose setup failed (the model, the sandbox or the data broke) ended its run in
    a harness error: say so in the records, in the process that ran it."""
    report = yield
    if call.when == "setup" and report.failed and call.excinfo is not None:
        exc = call.excinfo.value
        message = getattr(exc, "msg", None) or f"{type(exc).__name__}: {exc}"
        fixtures.record_harness_error(item, str(message))
    return report


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item) -> None:
    """The item's run is no longer in flight (in the process that ran it)."""
    board = item.config.stash.get(BOARD_KEY, None)
    if board is not None:
        board.clear(item.nodeid)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """xdist: every worker writes into the controller's session directory."""
    settings = node.config.stash[SETTINGS_KEY]
    node.workerinput[SESSION_INPUT] = settings.session
    node.workerinput[SESSION_DIR_INPUT] = str(settings.session_dir)
    # A drawn (random) seed is drawn once, on the controller: every worker builds the same data.
    node.workerinput[SEED_INPUT] = settings.data_seed
    # The GPUs are listed once, on the controller (nvidia-smi), not by every worker.
    node.workerinput[GPUS_INPUT] = list(settings.sandbox.gpus)
    collector = node.config.pluginmanager.get_plugin("weirdml-results")
    if collector is not None:
        node.workerinput[BOARDS_INPUT] = str(collector.boards_dir())
