"""The fixtures that drive a task item. Override any of them in your own conftest.py.

``weirdml_run`` runs the feedback loop from the pieces below it: the task, its data, the
(model, run) case, the model client, the sandbox and the record store. Replacing
``weirdml_model`` plugs in your own client; replacing ``weirdml_sandbox`` your own sandbox.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from pytest_weirdml import models
from pytest_weirdml.config import Settings
from pytest_weirdml.errors import DataUnavailable, HarnessError, SandboxError, TaskError
from pytest_weirdml.items import task_of
from pytest_weirdml.loop import LoopSettings, run_task
from pytest_weirdml.records import IterationRecord, RecordStore, RunRecord
from pytest_weirdml.sandbox import Limits, Sandbox
from pytest_weirdml.sandbox.scale import open_session_sandbox
from pytest_weirdml.tasks import TaskData, TaskSpec, build_data

SETTINGS_KEY = pytest.StashKey[Settings]()


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
def weirdml_model(weirdml_case: Case, weirdml_settings: Settings) -> Iterator[models.Model]:
    model = models.resolve(weirdml_case.model, weirdml_settings.catalog, cache=weirdml_settings.cache_dir)
    yield model
    model.close()


@pytest.fixture(scope="session")
def weirdml_sandbox(weirdml_settings: Settings) -> Iterator[Sandbox]:
    try:
        sandbox = open_session_sandbox(weirdml_settings)
    except SandboxError as exc:
        pytest.fail(f"SandboxError: {exc}", pytrace=False)
    yield sandbox
    sandbox.close()


@pytest.fixture
def weirdml_data(weirdml_task: TaskSpec, weirdml_settings: Settings) -> TaskData:
    try:
        return build_data(weirdml_task, weirdml_settings.data_cache)
    except DataUnavailable as exc:
        pytest.skip(f"{weirdml_task.name}: data unavailable: {exc}")
    except TaskError as exc:
        pytest.fail(f"broken task: {exc}", pytrace=False)


@pytest.fixture(scope="session")
def weirdml_store(weirdml_settings: Settings) -> RecordStore:
    return RecordStore(weirdml_settings.session_dir)


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
    weirdml_store: RecordStore,
    weirdml_settings: Settings,
) -> RunRecord:
    """Run the feedback loop for this item; every finished iteration is recorded at once."""
    item = request.node
    hook = request.config.hook

    def on_iteration(record: IterationRecord) -> None:
        weirdml_store.append(record)
        hook.pytest_weirdml_iteration(item=item, record=record)

    # The GPU and the cores are leased per execution by the sandbox (sandbox/scale.py).
    settings = LoopSettings(
        iterations=weirdml_settings.iterations,
        time_limit_s=weirdml_settings.time_limit_s,
        limits=Limits(memory_bytes=weirdml_settings.memory_bytes),
        session=weirdml_settings.session,
    )
    try:
        run = run_task(
            weirdml_task,
            weirdml_data,
            weirdml_model,
            weirdml_sandbox,
            run=weirdml_case.run,
            settings=settings,
            on_iteration=on_iteration,
            finished=(
                weirdml_store.finished(weirdml_task.name, weirdml_model.name, weirdml_case.run)
                if weirdml_settings.resume
                else ()
            ),
        )
    except HarnessError as exc:
        pytest.fail(f"{type(exc).__name__}: {exc} (not the model's fault; the run is not scored)", pytrace=False)
    transcript = weirdml_store.write_transcript(run)
    summary = run.summary()
    # JUnit XML writes str(value): a JSON string stays readable (and parseable) there, where a
    # dict would show as its Python repr. The flat properties are for JUnit dashboards.
    item.user_properties.append(("weirdml", json.dumps(summary)))
    item.user_properties.extend((f"weirdml_{key}", summary[key]) for key in ("task", "model", "run", "score"))
    item.add_report_section("call", "weirdml", f"run score {run.score:.4f}; transcript: {transcript}")
    hook.pytest_weirdml_run(item=item, record=run)
    return run
