"""The fixtures that drive a task item. Override any of them in your own conftest.py.

``weirdml_run`` runs the feedback loop from the pieces below it: the task, its data, the
(model, run) case, the model client (taken from the process's model pool, built once per model),
the sandbox and the session directory (``weirdml_store``, where the run's plan, every iteration
and the end of the run are recorded). Replacing ``weirdml_model`` plugs in your own client;
replacing ``weirdml_sandbox`` your own sandbox.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from pytest_weirdml import models
from pytest_weirdml.activity import Board
from pytest_weirdml.config import MODEL_POOL_KEY, SETTINGS_KEY, Settings
from pytest_weirdml.errors import DataUnavailable, HarnessError, SandboxError, TaskError
from pytest_weirdml.items import task_of
from pytest_weirdml.loop import run_task
from pytest_weirdml.records import IterationRecord, RunRecord, RunStart
from pytest_weirdml.redact import redact
from pytest_weirdml.report.transcript import write_transcript
from pytest_weirdml.sandbox import Sandbox
from pytest_weirdml.sandbox.scale import open_session_sandbox
from pytest_weirdml.session import SessionDir
from pytest_weirdml.tasks import TaskData, TaskSpec, build_data

__all__ = ["BOARD_KEY", "MODEL_NAME_KEY", "SETTINGS_KEY", "Case", "cases"]
# What this process's runs in flight are doing (the status line's source).
BOARD_KEY = pytest.StashKey[Board]()
# The model name an item's iterations are recorded under (a conftest's own client names itself).
MODEL_NAME_KEY = pytest.StashKey[str]()


@dataclass(frozen=True)
class Case:
    """One item's place on the benchmark's axes."""

    model: str
    run: int

    @property
    def id(self) -> str:
        return f"{models.label(self.model)}-{self.run}"


def cases(settings: Settings) -> list[Case]:
    return [Case(model, run) for model in settings.models for run in range(settings.runs)]


@pytest.fixture(scope="session")
def weirdml_settings(pytestconfig: pytest.Config) -> Settings:
    return pytestconfig.stash[SETTINGS_KEY]


@pytest.fixture
def weirdml_task(request: pytest.FixtureRequest) -> TaskSpec:
    spec = task_of(request.node)
    if spec is None:
        raise pytest.UsageError("weirdml_task is only available to items collected from a task.toml")
    return spec


@pytest.fixture
def weirdml_case() -> Case:
    """Parametrized by the plugin from --weirdml-model and --weirdml-runs."""
    pytest.skip("no model chosen: pass --weirdml-model=NAME (for example --weirdml-model=reference)")


@pytest.fixture
def weirdml_model(weirdml_case: Case, pytestconfig: pytest.Config) -> models.Model:
    """The case's client from the process's pool: built once per model and process, closed at the end."""
    return pytestconfig.stash[MODEL_POOL_KEY].get(weirdml_case.model)


@pytest.fixture(scope="session")
def weirdml_sandbox(pytestconfig: pytest.Config, weirdml_settings: Settings) -> Iterator[Sandbox]:
    capman = pytestconfig.pluginmanager.get_plugin("capturemanager")
    try:
        # Opening may build the local sandbox's environment once; its progress lines must show.
        with capman.global_and_fixture_disabled() if capman is not None else contextlib.nullcontext():
            sandbox = open_session_sandbox(weirdml_settings.sandbox)
    except SandboxError as exc:
        pytest.fail(f"SandboxError: {redact(str(exc))}", pytrace=False)
    yield sandbox
    sandbox.close()


@pytest.fixture
def weirdml_data(request: pytest.FixtureRequest, weirdml_task: TaskSpec, weirdml_settings: Settings) -> TaskData:
    board = request.config.stash.get(BOARD_KEY, None)
    item = request.node

    def announce(what: str) -> None:
        if board is not None:
            board.set(item.nodeid, item.name, what)
            board.say(what)

    try:
        return build_data(weirdml_task, weirdml_settings.data_cache, weirdml_settings.data_seed, on_build=announce)
    except DataUnavailable as exc:
        pytest.skip(f"{weirdml_task.name}: data unavailable: {exc}")
    except TaskError as exc:
        pytest.fail(f"broken task: {exc}", pytrace=False)


@pytest.fixture(scope="session")
def weirdml_store(weirdml_settings: Settings) -> SessionDir:
    return SessionDir(weirdml_settings.session_dir)


@pytest.fixture
def weirdml_threshold(weirdml_settings: Settings) -> float | None:
    return weirdml_settings.fail_under


@pytest.fixture
def weirdml_run(
    request: pytest.FixtureRequest,
    weirdml_task: TaskSpec,
    weirdml_case: Case,
    weirdml_model: models.Model,
    weirdml_sandbox: Sandbox,
    weirdml_data: TaskData,
    weirdml_store: SessionDir,
    weirdml_settings: Settings,
) -> RunRecord:
    """Run the feedback loop for this item; every finished iteration is recorded at once, and
    so is the end of the run (a harness error's end is recorded by the plugin's report hook)."""
    item = request.node
    item.stash[MODEL_NAME_KEY] = weirdml_model.name
    hook = request.config.hook

    def on_iteration(record: IterationRecord) -> None:
        weirdml_store.append(record)
        hook.pytest_weirdml_iteration(item=item, record=record)

    key = (weirdml_task.name, weirdml_model.name, weirdml_case.run)
    started: RunStart | None = None
    finished: list[IterationRecord] = []
    if weirdml_settings.resume:
        started, finished = weirdml_store.started(*key), weirdml_store.finished(*key)

    board = request.config.stash.get(BOARD_KEY, None)

    def on_phase(what: str) -> None:
        if board is not None:
            board.set(item.nodeid, item.name, what)

    # The GPU and the cores are leased per execution by the sandbox (sandbox/scale.py).
    try:
        run = run_task(
            weirdml_task,
            weirdml_data,
            weirdml_model,
            weirdml_sandbox,
            run=weirdml_case.run,
            settings=weirdml_settings.loop,
            on_start=weirdml_store.append,
            on_iteration=on_iteration,
            on_phase=on_phase,
            finished=finished,
            started=started,
        )
    except HarnessError as exc:
        message = redact(f"{type(exc).__name__}: {exc}")
        pytest.fail(f"{message} (not the model's fault; the run is not scored)", pytrace=False)
    run.session = weirdml_settings.session
    weirdml_store.end_run(run.task, run.model, run.run, session=run.session)
    transcript = write_transcript(weirdml_store.path, run)
    # Flat JUnit properties for dashboards; everything else is in the records.
    item.user_properties.extend(
        [
            ("weirdml_task", run.task),
            ("weirdml_model", run.model),
            ("weirdml_run", run.run),
            ("weirdml_score", run.score),
        ]
    )
    item.add_report_section("call", "weirdml", f"run score {run.score:.4f}; transcript: {transcript}")
    hook.pytest_weirdml_run(item=item, record=run)
    return run


def record_harness_error(item: pytest.Item, error: str) -> None:
    """A task item failed before its run could end: record that the run ended in a harness
    error, so no summary scores what it finished. Called for a failed setup of a task item."""
    callspec = getattr(item, "callspec", None)
    case = callspec.params.get("weirdml_case") if callspec is not None else None
    spec = task_of(item)
    if not isinstance(case, Case) or spec is None:
        return
    settings = item.config.stash[SETTINGS_KEY]
    name = item.stash.get(MODEL_NAME_KEY, models.label(case.model))
    SessionDir(settings.session_dir).end_run(spec.name, name, case.run, session=settings.session, error=error)
