"""Command-line options, their ini equivalents, and the typed settings they become."""

from __future__ import annotations

import argparse
import math
import os
import re
import secrets
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import pytest

from pytest_weirdml import budget, models
from pytest_weirdml.isolation import local_refusal
from pytest_weirdml.models import Catalog
from pytest_weirdml.models.queue import DEFAULT_TIMEOUT_S as DEFAULT_ANSWER_TIMEOUT_S
from pytest_weirdml.protocol import PROTOCOLS, PUBLISHED
from pytest_weirdml.sandbox import RESULTS_CAP_BYTES, leases, size_text
from pytest_weirdml.sandbox.choose import sandbox_names
from pytest_weirdml.session import RECORDS_FILE, SessionDir


def _positive_int(flag: str, *, allow_zero: bool = False):  # type: ignore[no-untyped-def]
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{flag} must be a whole number, got {text!r}") from None
        if value < (0 if allow_zero else 1):
            raise argparse.ArgumentTypeError(f"{flag} must be at least {0 if allow_zero else 1}, got {value}")
        return value

    return parse


MAX_TIME_LIMIT_S = 24 * 3600.0


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--weirdml-time-limit must be seconds, got {text!r}") from None
    # nan and inf parse as floats, and neither is a limit: nan never fires, inf overflows timers.
    if not 1.0 <= value <= MAX_TIME_LIMIT_S:
        raise argparse.ArgumentTypeError(
            f"--weirdml-time-limit must be seconds between 1 and {MAX_TIME_LIMIT_S:.0f}, got {text!r}"
        )
    return value


def _answer_timeout(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    # nan never fires and inf is no timeout: a finite wait is what catches a dead answerer.
    if not 0.0 < value <= 30 * 86400:
        raise argparse.ArgumentTypeError(
            f"--weirdml-answer-timeout must be seconds, above 0 and at most 30 days, got {text!r}"
        )
    return value


def _gpus(text: str) -> tuple[str, ...]:
    try:
        return leases.parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


RANDOM_SEED = "random"


def _data_seed(text: str) -> int | str:
    """``N`` (a whole number from 0 to 2**32 - 1) or ``random``."""
    text = text.strip().lower()
    if text == RANDOM_SEED:
        return RANDOM_SEED
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--weirdml-data-seed must be a whole number or 'random', got {text!r}"
        ) from None
    if not 0 <= value < 2**32:
        raise argparse.ArgumentTypeError(f"--weirdml-data-seed must be between 0 and {2**32 - 1}, got {value}")
    return value


def draw_data_seed(choice: int | str | None) -> int | None:
    """The seed a session builds its data from: ``random`` is drawn here, once (on the controller)."""
    if choice == RANDOM_SEED:
        return secrets.randbelow(2**31)
    return choice if isinstance(choice, int) else None


def _margin(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0.0 <= value < 1.0:
        raise argparse.ArgumentTypeError(
            f"--weirdml-regression-margin must be an accuracy difference in [0, 1), got {text!r}"
        )
    return value


def _usd(text: str) -> float:
    try:
        value = float(text.strip().lstrip("$"))
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(
            f"--weirdml-max-cost must be US dollars above 0, such as 25 or 2.50, got {text!r}"
        )
    return value


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"--weirdml-fail-under must be an accuracy in [0, 1], got {text!r}")
    return value


_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?\s*$", re.IGNORECASE)


def _bytes(text: str) -> int | None:
    """``8G``, ``512M``, ``1024`` (bytes) -> bytes; None when it is not a size."""
    match = _SIZE.match(text)
    if not match:
        return None
    number, unit = match.groups()
    return int(float(number) * 1024 ** " kmgt".index(unit.lower() or " "))


def _size(flag: str, low: int, high: int):  # type: ignore[no-untyped-def]
    def parse(text: str) -> int:
        value = _bytes(text)
        if value is None:
            raise argparse.ArgumentTypeError(f"{flag} must be a size such as 8G or 512M, got {text!r}")
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(
                f"{flag} must be between {size_text(low)} and {size_text(high)}, got {text!r}"
            )
        return value

    return parse


# A Python that imports numpy needs about this much; beyond the top, nothing is a limit.
parse_size = _size("--weirdml-memory", 64 << 20, 64 << 40)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("weirdml", "WeirdML benchmark")
    group.addoption(
        "--weirdml-model",
        action="append",
        dest="weirdml_models",
        default=[],
        metavar="NAME[,NAME]",
        help="model(s) to benchmark, comma-separated or repeated: reference, baseline, replay:PATH, "
        "queue:DIR (an outside program answers request files in DIR), human (a person answers), "
        "an alias from the models config (claude, gpt, gemini, ...) or PROVIDER:MODEL-ID with PROVIDER "
        "one of anthropic, openai, google, openai-compatible. Default: none (task items are skipped).",
    )
    group.addoption(
        "--weirdml-runs",
        dest="weirdml_runs",
        type=_positive_int("--weirdml-runs"),
        default=None,
        metavar="N",
        help="independent runs per model and task (default: 5, or ini weirdml_runs).",
    )
    group.addoption(
        "--weirdml-iterations",
        dest="weirdml_iterations",
        type=_positive_int("--weirdml-iterations"),
        default=None,
        metavar="N",
        help="submissions per run, overriding each task's (default: the task's, 5).",
    )
    group.addoption(
        "--weirdml-time-limit",
        dest="weirdml_time_limit",
        type=_seconds,
        default=None,
        metavar="SECONDS",
        help="wall-clock limit per script, overriding each task's (default: the task's, 120).",
    )
    group.addoption(
        "--weirdml-sandbox",
        dest="weirdml_sandbox",
        default=None,
        metavar="NAME",
        help="where scripts run: docker = a container from the sandbox image; local = bubblewrap, or a "
        "plain subprocess with a warning when bubblewrap is missing (offline models only, unless "
        "--weirdml-allow-unisolated); auto = docker when a daemon and the image are there, else local with "
        "a warning (default: local, or ini weirdml_sandbox).",
    )
    group.addoption(
        "--weirdml-allow-unisolated",
        dest="weirdml_allow_unisolated",
        action="store_true",
        default=False,
        help="let a provider model's scripts run as plain subprocesses where bubblewrap is missing or "
        "refused (they can read your files, the API keys in the harness's environment and the hidden "
        "answers, and reach the network); every record then says isolation: none (default: refused).",
    )
    group.addoption(
        "--weirdml-protocol",
        dest="weirdml_protocol",
        choices=PROTOCOLS,
        default=None,
        help="what the model is told: published = exactly the information of the published benchmark "
        "(several iterations, never how many; feedback is the output and the accuracy); informed = also "
        "the number of submissions, how many are left, the best accuracy so far and each run time "
        "(default: published, or ini weirdml_protocol).",
    )
    group.addoption(
        "--weirdml-build-image",
        dest="weirdml_build_image",
        action="store_true",
        default=False,
        help="build the docker sandbox's image before the session unless it is built already; the same "
        "as `weirdml image build` (default: off).",
    )
    group.addoption(
        "--weirdml-gpus",
        dest="weirdml_gpus",
        type=_gpus,
        default=None,
        metavar="auto|none|0,1,...",
        help="GPUs for the scripts: each script holds a free one while it runs, so -n may exceed their "
        "number; auto = every GPU nvidia-smi lists, none = CPU only (default: auto).",
    )
    # Scale-out: how executions share this host's hardware, or run on a Ray cluster.
    group.addoption(
        "--weirdml-cores-per-script",
        dest="weirdml_cores_per_script",
        type=_positive_int("--weirdml-cores-per-script"),
        default=None,
        metavar="N",
        help="CPU cores pinned to each script on a host without GPUs; at most cores/N scripts run at "
        "once (default: the cores split between the xdist workers; 1 per script on a Ray CPU cluster).",
    )
    group.addoption(
        "--weirdml-ray",
        dest="weirdml_ray",
        default=None,
        metavar="auto|ADDRESS",
        help="run every script as a Ray task on a Ray cluster (one GPU each, or a CPU share) while model "
        "calls stay here: auto = the cluster `ray start` made on this machine or $RAY_ADDRESS, or "
        "HOST:PORT (default: off, or ini weirdml_ray).",
    )
    group.addoption(
        "--weirdml-python",
        dest="weirdml_python",
        default=None,
        metavar="PATH",
        help="interpreter that runs scripts in the local sandbox instead of the sandbox's own environment; "
        "it must have the packages of `weirdml image requirements`, and scripts can import whatever else "
        "it has (default: the environment of `python -m pytest_weirdml.sandbox.venv build`, built on first use).",
    )
    group.addoption(
        "--weirdml-memory",
        dest="weirdml_memory",
        type=parse_size,
        default=None,
        metavar="SIZE",
        help="memory cap per script, e.g. 8G, between 64M and 64T (default: 8G).",
    )
    group.addoption(
        "--weirdml-results-cap",
        dest="weirdml_results_cap",
        type=_size("--weirdml-results-cap", 64 << 10, 16 << 30),
        default=None,
        metavar="SIZE",
        help="most a script may write to results/, the one host directory it can write; a write past it "
        "fails (default: 64M).",
    )
    group.addoption(
        "--weirdml-fail-under",
        dest="weirdml_fail_under",
        type=_fraction,
        default=None,
        metavar="ACC",
        help="fail a run whose score (best accuracy) is under ACC (default: never fail on score).",
    )
    group.addoption(
        "--weirdml-reports",
        dest="weirdml_reports",
        default=None,
        metavar="DIR",
        help="where each session writes its records, transcripts and summary (default: reports/ under "
        "the directory pytest was started in, or ini weirdml_reports relative to the rootdir).",
    )
    group.addoption(
        "--weirdml-resume",
        dest="weirdml_resume",
        default=None,
        metavar="SESSION_DIR",
        help="continue a killed or interrupted session in its own directory: finished iterations "
        "are read back from its records.jsonl, not run again (default: a new session).",
    )
    group.addoption(
        "--weirdml-data-cache",
        dest="weirdml_data_cache",
        default=None,
        metavar="DIR",
        help="where built task data is cached; hidden answers live here, outside every sandbox "
        "(default: $XDG_CACHE_HOME/pytest-weirdml/data, or ini weirdml_data_cache).",
    )
    group.addoption(
        "--weirdml-data-seed",
        dest="weirdml_data_seed",
        type=_data_seed,
        default=None,
        metavar="N|random",
        help="build every task's data from this seed instead of the task's own: fresh samples, subsets, "
        "crops and games that no model can have seen; random draws one and records it (default: each "
        "task's seed, or ini weirdml_data_seed).",
    )
    group.addoption(
        "--weirdml-baseline",
        dest="weirdml_baseline",
        default=None,
        metavar="PATH",
        help="compare this session with a baseline (a file written by --weirdml-save-baseline, or a finished "
        "session directory under reports/) and exit 1 when a model's score on a task, or overall, dropped: when "
        "the 95%% bootstrap interval of the difference lies below -margin (default: no comparison).",
    )
    group.addoption(
        "--weirdml-save-baseline",
        dest="weirdml_save_baseline",
        default=None,
        metavar="PATH",
        help="write this session's scores and conditions to PATH as a baseline file, after comparing with "
        "--weirdml-baseline when both are given (a rolling baseline) (default: none).",
    )
    group.addoption(
        "--weirdml-regression-margin",
        dest="weirdml_regression_margin",
        type=_margin,
        default=None,
        metavar="ACC",
        help="a drop counts as a regression only when its whole interval lies below -ACC (default: 0.0, or "
        "ini weirdml_regression_margin).",
    )
    group.addoption(
        "--weirdml-baseline-force",
        dest="weirdml_baseline_force",
        action="store_true",
        default=False,
        help="compare with the baseline even where it was made under other conditions (data, protocol, "
        "submissions, time limit); the differences are listed with the comparison (default: refuse).",
    )
    group.addoption(
        "--weirdml-bootstrap",
        dest="weirdml_bootstrap",
        type=_positive_int("--weirdml-bootstrap"),
        default=10_000,
        metavar="N",
        help="bootstrap resamples for the confidence intervals (default: 10000).",
    )
    group.addoption(
        "--weirdml-base-url",
        dest="weirdml_base_url",
        default=None,
        metavar="URL",
        help="server of every API model in the session, e.g. http://127.0.0.1:8000/v1 for "
        "openai-compatible:MODEL (default: base_url from the models config, else the provider's).",
    )
    group.addoption(
        "--weirdml-max-output-tokens",
        dest="weirdml_max_output_tokens",
        type=_positive_int("--weirdml-max-output-tokens"),
        default=None,
        metavar="N",
        help="output cap of every API model's answers, in tokens (default: max_output_tokens from the models "
        "config: 64000 anthropic, 128000 openai, 65536 google; openai-compatible: the server's own limit, else 8192).",
    )
    group.addoption(
        "--weirdml-max-cost",
        dest="weirdml_max_cost",
        type=_usd,
        default=None,
        metavar="USD",
        help="a budget guard: start no new run once the session's API spending reaches USD (runs in flight "
        "finish; the summary lists the items not run); every model needs its prices in the models config "
        "(default: no cap).",
    )
    group.addoption(
        "--weirdml-cache",
        dest="weirdml_cache",
        action="store_true",
        default=False,
        help="store API answers on disk keyed by (model, settings, conversation, run) and replay them "
        "on a re-run instead of calling the API (default: off).",
    )
    group.addoption(
        "--weirdml-cache-dir",
        dest="weirdml_cache_dir",
        default=None,
        metavar="DIR",
        help="where --weirdml-cache keeps answers (default: $XDG_CACHE_HOME/pytest-weirdml/responses).",
    )
    group.addoption(
        "--weirdml-leaderboard",
        dest="weirdml_leaderboard",
        default=None,
        metavar="PATH",
        help="a published WeirdML results CSV (leaderboard.csv) whose rows the HTML report draws beside "
        "this session's models (default: none).",
    )
    group.addoption(
        "--weirdml-answer-timeout",
        dest="weirdml_answer_timeout",
        type=_answer_timeout,
        default=DEFAULT_ANSWER_TIMEOUT_S,
        metavar="SECONDS",
        help="how long the human and queue:DIR models wait for each answer before the run ends in an "
        f"infrastructure error (default: {DEFAULT_ANSWER_TIMEOUT_S:.0f}, eight hours).",
    )
    parser.addini("weirdml_runs", "default for --weirdml-runs", default="5")
    parser.addini("weirdml_sandbox", "default for --weirdml-sandbox", default="local")
    parser.addini("weirdml_protocol", "default for --weirdml-protocol", default=PUBLISHED)
    parser.addini("weirdml_reports", "default for --weirdml-reports (relative to the rootdir)", default="")
    parser.addini("weirdml_data_cache", "default for --weirdml-data-cache", default="")
    parser.addini("weirdml_data_seed", "default for --weirdml-data-seed (N or random)", default="")
    parser.addini("weirdml_regression_margin", "default for --weirdml-regression-margin", default="0.0")
    parser.addini("weirdml_ray", "default for --weirdml-ray (empty: off)", default="")


@dataclass(frozen=True)
class Settings:
    models: tuple[str, ...]
    runs: int
    iterations: int | None
    time_limit_s: float | None
    sandbox: str
    python: str | None
    memory_bytes: int
    fail_under: float | None
    reports_dir: Path
    data_cache: Path
    session: str
    bootstrap: int
    resume: bool = False
    leaderboard: Path | None = None
    catalog: Catalog = field(default_factory=Catalog)
    cache_dir: Path | None = None
    gpus: tuple[str, ...] = ()
    # One line per chosen model that its provider is retiring (said once, by the controller).
    model_notes: tuple[str, ...] = ()
    cap_notes: tuple[str, ...] = ()
    protocol: str = PUBLISHED
    # None: every task's own seed. A session run with ``random`` holds the seed that was drawn.
    data_seed: int | None = None
    baseline: Path | None = None
    save_baseline: Path | None = None
    regression_margin: float = 0.0
    baseline_force: bool = False
    allow_unisolated: bool = False
    results_bytes: int = RESULTS_CAP_BYTES
    cores_per_script: int | None = None
    ray: str | None = None
    max_cost: float | None = None
    answer_timeout_s: float = DEFAULT_ANSWER_TIMEOUT_S

    @property
    def session_dir(self) -> Path:
        return self.reports_dir / self.session


def _models(raw: list[str], catalog: Catalog) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """The chosen model names, a note for each one its provider is retiring, and one for each
    whose output cap is a fallback."""
    names = tuple(dict.fromkeys(name.strip() for chunk in raw for name in chunk.split(",") if name.strip()))
    notes = []
    caps = []
    for name in names:
        try:
            # Building the client checks its SDK and API key: a missing one stops the session here.
            model = models.resolve(name, catalog)
        except ValueError as exc:
            raise pytest.UsageError(f"--weirdml-model: {exc}") from None
        note = model.deprecation()
        model.close()
        if note:
            notes.append(note)
        if model.cap_note:
            caps.append(model.cap_note)
    return names, tuple(notes), tuple(caps)


def _leaderboard(text: str | None) -> Path | None:
    if not text:
        return None
    path = Path(text).expanduser().resolve()
    if not path.is_file():
        raise pytest.UsageError(f"--weirdml-leaderboard: {path} not found; pass the published leaderboard.csv")
    return path


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
    config: pytest.Config, session: str, session_dir: Path | None = None, data_seed: int | None = None
) -> Settings:
    """The session's settings; on an xdist worker ``session_dir`` and ``data_seed`` are the controller's
    (its directory and its drawn seed)."""
    opt = config.option
    runs = opt.weirdml_runs
    if runs is None:
        runs = _positive_int("ini weirdml_runs")(config.getini("weirdml_runs"))
    flag = "--weirdml-sandbox" if opt.weirdml_sandbox else "ini weirdml_sandbox"
    sandbox = opt.weirdml_sandbox or config.getini("weirdml_sandbox")
    if sandbox not in sandbox_names():
        raise pytest.UsageError(f"{flag}: unknown sandbox {sandbox!r}; choose one of {', '.join(sandbox_names())}")
    reports = _reports_dir(config)
    protocol = opt.weirdml_protocol or config.getini("weirdml_protocol")
    if protocol not in PROTOCOLS:
        raise pytest.UsageError(f"ini weirdml_protocol: unknown protocol {protocol!r}; choose one of {PROTOCOLS}")
    resume = False
    if opt.weirdml_resume:
        previous = Path(opt.weirdml_resume).expanduser().resolve()
        if not (previous / RECORDS_FILE).is_file():
            raise pytest.UsageError(
                f"--weirdml-resume: {previous} holds no {RECORDS_FILE}; pass a session directory under reports/"
            )
        try:
            # A records file is untrusted: a bad line stops the session here, naming it.
            SessionDir(previous).read()
        except (OSError, ValueError) as exc:
            raise pytest.UsageError(f"--weirdml-resume: {exc}") from None
        reports, session, resume = previous.parent, previous.name, True
    if session_dir is not None:
        reports, session = session_dir.parent, session_dir.name
    cache_text = opt.weirdml_data_cache or config.getini("weirdml_data_cache")
    if cache_text:
        cache = Path(cache_text).expanduser()
    else:
        cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pytest-weirdml" / "data"
    try:
        catalog = Catalog.load(
            config.rootpath, base_url=opt.weirdml_base_url, max_output_tokens=opt.weirdml_max_output_tokens
        )
    except ValueError as exc:
        raise pytest.UsageError(f"models config: {exc}") from None
    responses: Path | None = None
    if opt.weirdml_cache:
        default = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pytest-weirdml" / "responses"
        responses = Path(opt.weirdml_cache_dir).expanduser() if opt.weirdml_cache_dir else default
    names, notes, caps = _models(opt.weirdml_models, catalog)
    ray = (opt.weirdml_ray or config.getini("weirdml_ray") or "").strip() or None
    if sandbox == "local" and not ray and not opt.weirdml_allow_unisolated:
        refusal = local_refusal(names)
        if refusal is not None:
            raise pytest.UsageError(refusal)
    if opt.weirdml_max_cost is not None:
        try:
            budget.check_prices(names, catalog, opt.weirdml_max_cost)
        except ValueError as exc:
            raise pytest.UsageError(str(exc)) from None
    return Settings(
        models=names,
        model_notes=notes,
        cap_notes=caps,
        runs=runs,
        iterations=opt.weirdml_iterations,
        time_limit_s=opt.weirdml_time_limit,
        sandbox=sandbox,
        python=opt.weirdml_python,
        memory_bytes=opt.weirdml_memory or (8 << 30),
        results_bytes=opt.weirdml_results_cap or RESULTS_CAP_BYTES,
        fail_under=opt.weirdml_fail_under,
        reports_dir=reports.resolve(),
        data_cache=cache.resolve(),
        session=session,
        resume=resume,
        bootstrap=opt.weirdml_bootstrap,
        leaderboard=_leaderboard(opt.weirdml_leaderboard),
        catalog=catalog,
        cache_dir=responses.resolve() if responses else None,
        gpus=opt.weirdml_gpus if opt.weirdml_gpus is not None else leases.detect(),
        protocol=protocol,
        data_seed=data_seed if data_seed is not None else draw_data_seed(_seed_choice(config)),
        baseline=_user_path(config, opt.weirdml_baseline),
        save_baseline=_user_path(config, opt.weirdml_save_baseline),
        regression_margin=_regression_margin(config),
        baseline_force=opt.weirdml_baseline_force,
        allow_unisolated=opt.weirdml_allow_unisolated,
        cores_per_script=opt.weirdml_cores_per_script,
        ray=ray,
        max_cost=opt.weirdml_max_cost,
        answer_timeout_s=opt.weirdml_answer_timeout,
    )


def _user_path(config: pytest.Config, text: str | None) -> Path | None:
    """A path given on the command line, relative to where pytest was started."""
    return (config.invocation_params.dir / Path(text).expanduser()).resolve() if text else None


def _regression_margin(config: pytest.Config) -> float:
    if config.option.weirdml_regression_margin is not None:
        return float(config.option.weirdml_regression_margin)
    try:
        return _margin(config.getini("weirdml_regression_margin"))
    except argparse.ArgumentTypeError as exc:
        raise pytest.UsageError(f"ini weirdml_regression_margin: {exc}") from None


def _seed_choice(config: pytest.Config) -> int | str | None:
    if config.option.weirdml_data_seed is not None:
        return config.option.weirdml_data_seed
    text = config.getini("weirdml_data_seed")
    if not text:
        return None
    try:
        return _data_seed(text)
    except argparse.ArgumentTypeError as exc:
        raise pytest.UsageError(f"ini weirdml_data_seed: {exc}") from None
