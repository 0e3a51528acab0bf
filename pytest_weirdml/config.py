"""The plugin's options (defined in ``options``), their ini equivalents, and the typed settings
they become: one frozen part per consumer (the sandbox, the loop, the gate, the report), so each
gets only what it reads.

The settings are made in every process (the controller and each xdist worker) without side
effects: no model client is built and no GPU is listed here; the plugin builds the model pool
once per process, and the controller lists the GPUs once and hands them to its workers.
"""

from __future__ import annotations

import argparse
import os
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TypeVar

import pytest

from pytest_weirdml import budget, option_types, options
from pytest_weirdml.isolation import local_refusal
from pytest_weirdml.loop import LoopSettings
from pytest_weirdml.models import Catalog
from pytest_weirdml.models.pool import ModelPool
from pytest_weirdml.models.queue import DEFAULT_TIMEOUT_S as DEFAULT_ANSWER_TIMEOUT_S
from pytest_weirdml.protocol import PROTOCOLS, PUBLISHED
from pytest_weirdml.sandbox import RESULTS_CAP_BYTES, Limits, leases
from pytest_weirdml.sandbox.choose import sandbox_names
from pytest_weirdml.sandbox.scale import SandboxSettings
from pytest_weirdml.session import RECORDS_FILE, SessionDir


def draw_data_seed(choice: int | str | None) -> int | None:
    """The seed a session builds its data from: ``random`` is drawn here, once (on the controller)."""
    if choice == option_types.RANDOM_SEED:
        return secrets.randbelow(2**31)
    return choice if isinstance(choice, int) else None


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("weirdml", "WeirdML benchmark")
    for add_options in options.PLUGIN_GROUPS:
        add_options(group.addoption, options.PLUGIN)
    parser.addini("weirdml_runs", "default for --weirdml-runs", default="5")
    parser.addini("weirdml_sandbox", "default for --weirdml-sandbox", default="local")
    parser.addini("weirdml_protocol", "default for --weirdml-protocol", default=PUBLISHED)
    parser.addini("weirdml_reports", "default for --weirdml-reports (relative to the rootdir)", default="")
    parser.addini("weirdml_data_cache", "default for --weirdml-data-cache", default="")
    parser.addini("weirdml_data_seed", "default for --weirdml-data-seed (N or random)", default="")
    parser.addini("weirdml_regression_margin", "default for --weirdml-regression-margin", default="0.0")
    parser.addini("weirdml_ray", "default for --weirdml-ray (empty: off)", default="")


@dataclass(frozen=True)
class GateSettings:
    """The gate's part: the baseline to compare with, how, and where to save this session's."""

    baseline: Path | None = None
    save_baseline: Path | None = None
    regression_margin: float = 0.0
    baseline_force: bool = False


@dataclass(frozen=True)
class ReportSettings:
    """The report's part: the intervals' resamples and the published rows drawn beside ours."""

    bootstrap: int = 10_000
    leaderboard: Path | None = None


@dataclass(frozen=True)
class Settings:
    """The session's settings: what it runs (models, runs, data), where it writes, and one part
    per consumer (``sandbox``, ``loop``, ``gate``, ``report``)."""

    models: tuple[str, ...]
    runs: int
    reports_dir: Path
    data_cache: Path
    session: str
    sandbox: SandboxSettings
    loop: LoopSettings
    gate: GateSettings = field(default_factory=GateSettings)
    report: ReportSettings = field(default_factory=ReportSettings)
    fail_under: float | None = None
    resume: bool = False
    catalog: Catalog = field(default_factory=Catalog)
    cache_dir: Path | None = None
    # None: every task's own seed. A session run with ``random`` holds the seed that was drawn.
    data_seed: int | None = None
    # --weirdml-max-cost: no new run starts once the session's spending reaches it (None: no cap).
    max_cost: float | None = None
    # How long the human and queue:DIR models wait for each answer (the model pool's part).
    answer_timeout_s: float = DEFAULT_ANSWER_TIMEOUT_S

    @property
    def session_dir(self) -> Path:
        return self.reports_dir / self.session

    @property
    def protocol(self) -> str:
        return self.loop.protocol


T = TypeVar("T")
SETTINGS_KEY = pytest.StashKey[Settings]()
# The process's model clients, built once in pytest_configure and closed in pytest_unconfigure.
MODEL_POOL_KEY = pytest.StashKey[ModelPool]()


def model_names(raw: list[str]) -> tuple[str, ...]:
    """The chosen model names, comma-separated or repeated, each once, in the order given."""
    return tuple(dict.fromkeys(name.strip() for chunk in raw for name in chunk.split(",") if name.strip()))


def new_session_name() -> str:
    return datetime.now().strftime("%Y%m%d-%H%M%S-") + f"{os.getpid()}"


def _reports_dir(config: pytest.Config) -> Path:
    """``--weirdml-reports`` (relative to where pytest started), else ini ``weirdml_reports``
    (relative to the rootdir, where the ini file is), else ``reports/`` where pytest started:
    running the installed tasks (``pytest "$(weirdml tasks-path)"``) reports to the user's
    directory, not into the package."""
    if config.option.weirdml_reports:
        return config.invocation_params.dir / Path(config.option.weirdml_reports).expanduser()
    if config.getini("weirdml_reports"):
        return config.rootpath / Path(config.getini("weirdml_reports")).expanduser()
    return config.invocation_params.dir / "reports"


def settings_from(
    config: pytest.Config,
    session: str,
    session_dir: Path | None = None,
    data_seed: int | None = None,
    gpus: tuple[str, ...] | None = None,
) -> Settings:
    """The session's settings; on an xdist worker ``session_dir``, ``data_seed`` and ``gpus`` are the
    controller's (its directory, its drawn seed and the GPUs it listed)."""
    opt = config.option
    runs = opt.weirdml_runs
    if runs is None:
        runs = _ini(config, "weirdml_runs", option_types.whole("ini weirdml_runs"))
    reports, session, resume = _session_place(config, session, session_dir)
    loop = LoopSettings(
        iterations=opt.weirdml_iterations,
        time_limit_s=opt.weirdml_time_limit,
        limits=Limits(
            memory_bytes=opt.weirdml_memory or (8 << 30), results_bytes=opt.weirdml_results_cap or RESULTS_CAP_BYTES
        ),
        session=session,
        protocol=_protocol(config),
    )
    sandbox = SandboxSettings(
        backend=_sandbox_name(config),
        session_dir=(reports / session).resolve(),
        python=opt.weirdml_python,
        gpus=gpus if gpus is not None else opt.weirdml_gpus if opt.weirdml_gpus is not None else leases.detect(),
        cores_per_script=opt.weirdml_cores_per_script,
        ray=(opt.weirdml_ray or config.getini("weirdml_ray") or "").strip() or None,
        models=model_names(opt.weirdml_models),
        allow_unisolated=opt.weirdml_allow_unisolated,
    )
    gate = GateSettings(
        baseline=_user_path(config, opt.weirdml_baseline),
        save_baseline=_user_path(config, opt.weirdml_save_baseline),
        regression_margin=_regression_margin(config),
        baseline_force=opt.weirdml_baseline_force,
    )
    return Settings(
        models=sandbox.models,
        runs=runs,
        reports_dir=reports.resolve(),
        data_cache=_data_cache(config).resolve(),
        session=session,
        sandbox=sandbox,
        loop=loop,
        gate=gate,
        report=ReportSettings(bootstrap=opt.weirdml_bootstrap, leaderboard=opt.weirdml_leaderboard),
        fail_under=opt.weirdml_fail_under,
        resume=resume,
        catalog=_catalog(config),
        cache_dir=_response_cache(config),
        data_seed=data_seed if data_seed is not None else draw_data_seed(_seed_choice(config)),
        max_cost=opt.weirdml_max_cost,
        answer_timeout_s=opt.weirdml_answer_timeout,
    )


def check_session(settings: Settings) -> None:
    """What the controller refuses before any work, as usage errors naming the fix: a provider
    model's scripts in a local sandbox that cannot isolate them (unless
    ``--weirdml-allow-unisolated``), and a cost cap over a model without prices."""
    box = settings.sandbox
    if box.backend == "local" and not box.ray and not box.allow_unisolated:
        refusal = local_refusal(settings.models)
        if refusal is not None:
            raise pytest.UsageError(refusal)
    if settings.max_cost is not None:
        try:
            budget.check_prices(settings.models, settings.catalog, settings.max_cost)
        except ValueError as exc:
            raise pytest.UsageError(str(exc)) from None


def _session_place(config: pytest.Config, session: str, session_dir: Path | None) -> tuple[Path, str, bool]:
    """(reports directory, session name, resumed): a new session, the one to resume, or the
    controller's (on a worker)."""
    reports, resume = _reports_dir(config), False
    if config.option.weirdml_resume:
        previous = Path(config.option.weirdml_resume).expanduser().resolve()
        if not (previous / RECORDS_FILE).is_file():
            raise pytest.UsageError(
                f"--weirdml-resume: {previous} holds no {RECORDS_FILE}; pass a session directory under reports/"
            )
        if session_dir is None:  # the controller reads it first; its workers read it as it says
            try:
                # A records file is untrusted: a bad line, a link or another session's records
                # stop the session here, naming them.
                SessionDir(previous).check_resumable()
            except (OSError, ValueError) as exc:
                raise pytest.UsageError(f"--weirdml-resume: {exc}") from None
        reports, session, resume = previous.parent, previous.name, True
    if session_dir is not None:
        reports, session = session_dir.parent, session_dir.name
    return reports, session, resume


def _sandbox_name(config: pytest.Config) -> str:
    flag = "--weirdml-sandbox" if config.option.weirdml_sandbox else "ini weirdml_sandbox"
    sandbox = config.option.weirdml_sandbox or config.getini("weirdml_sandbox")
    if sandbox not in sandbox_names():
        raise pytest.UsageError(f"{flag}: unknown sandbox {sandbox!r}; choose one of {', '.join(sandbox_names())}")
    return str(sandbox)


def _protocol(config: pytest.Config) -> str:
    protocol = config.option.weirdml_protocol or config.getini("weirdml_protocol")
    if protocol not in PROTOCOLS:
        raise pytest.UsageError(f"ini weirdml_protocol: unknown protocol {protocol!r}; choose one of {PROTOCOLS}")
    return str(protocol)


def _cache_home() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pytest-weirdml"


def _data_cache(config: pytest.Config) -> Path:
    text = config.option.weirdml_data_cache or config.getini("weirdml_data_cache")
    return Path(text).expanduser() if text else _cache_home() / "data"


def _response_cache(config: pytest.Config) -> Path | None:
    opt = config.option
    if not opt.weirdml_cache:
        return None
    return (
        Path(opt.weirdml_cache_dir).expanduser() if opt.weirdml_cache_dir else _cache_home() / "responses"
    ).resolve()


def _catalog(config: pytest.Config) -> Catalog:
    opt = config.option
    try:
        return Catalog.load(
            config.rootpath, base_url=opt.weirdml_base_url, max_output_tokens=opt.weirdml_max_output_tokens
        )
    except ValueError as exc:
        raise pytest.UsageError(f"models config: {exc}") from None


def _user_path(config: pytest.Config, text: str | None) -> Path | None:
    """A path given on the command line, relative to where pytest was started."""
    return (config.invocation_params.dir / Path(text).expanduser()).resolve() if text else None


def _ini(config: pytest.Config, name: str, parse: Callable[[str], T]) -> T:
    """An ini value through the validator of its option; a usage error naming the ini key."""
    try:
        return parse(config.getini(name))
    except argparse.ArgumentTypeError as exc:
        raise pytest.UsageError(f"ini {name}: {exc}") from None


def _regression_margin(config: pytest.Config) -> float:
    if config.option.weirdml_regression_margin is not None:
        return float(config.option.weirdml_regression_margin)
    return _ini(config, "weirdml_regression_margin", option_types.margin("--weirdml-regression-margin"))


def _seed_choice(config: pytest.Config) -> int | str | None:
    if config.option.weirdml_data_seed is not None:
        return config.option.weirdml_data_seed
    if not config.getini("weirdml_data_seed"):
        return None
    return _ini(config, "weirdml_data_seed", option_types.data_seed("--weirdml-data-seed"))
