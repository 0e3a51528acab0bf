"""Command-line options, their ini equivalents, and the typed settings they become."""

from __future__ import annotations

import argparse
import os
import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import pytest

from pytest_weirdml import models
from pytest_weirdml.models import Catalog
from pytest_weirdml.records import RECORDS_FILE
from pytest_weirdml.sandbox import leases

SANDBOXES = ("auto", "docker", "local")


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


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--weirdml-time-limit must be seconds, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"--weirdml-time-limit must be > 0, got {value:g}")
    return value


def _gpus(text: str) -> tuple[str, ...]:
    try:
        return leases.parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"--weirdml-fail-under must be an accuracy in [0, 1], got {text!r}")
    return value


_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?\s*$", re.IGNORECASE)


def parse_size(text: str) -> int:
    """``8G``, ``512M``, ``1024`` (bytes) -> bytes."""
    match = _SIZE.match(text)
    if not match:
        raise argparse.ArgumentTypeError(f"--weirdml-memory must be a size such as 8G or 512M, got {text!r}")
    number, unit = match.groups()
    return int(float(number) * 1024 ** " kmgt".index(unit.lower() or " "))


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("weirdml", "WeirdML benchmark")
    group.addoption(
        "--weirdml-model",
        action="append",
        dest="weirdml_models",
        default=[],
        metavar="NAME[,NAME]",
        help="model(s) to benchmark, comma-separated or repeated: reference, baseline, replay:PATH, "
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
        choices=SANDBOXES,
        default=None,
        help="where scripts run: docker = a container from the sandbox image; local = bubblewrap, or a "
        "plain subprocess with a warning when bubblewrap is missing; auto = docker when a daemon and the "
        "image are there, else local with a warning (default: local, or ini weirdml_sandbox).",
    )
    group.addoption(
        "--weirdml-build-image",
        dest="weirdml_build_image",
        action="store_true",
        default=False,
        help="build the docker sandbox's image before the session unless it is built already; the same "
        "as `python -m pytest_weirdml.sandbox.image build` (default: off).",
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
        help="interpreter that runs scripts in the local sandbox; it must have the packages of "
        "sandbox_image/requirements.txt (default: the one running pytest).",
    )
    group.addoption(
        "--weirdml-memory",
        dest="weirdml_memory",
        type=parse_size,
        default=None,
        metavar="SIZE",
        help="memory cap per script, e.g. 8G (default: 8G).",
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
        help="where each session writes its records, transcripts and summary (default: reports/ "
        "under the rootdir, or ini weirdml_reports).",
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
    parser.addini("weirdml_runs", "default for --weirdml-runs", default="5")
    parser.addini("weirdml_sandbox", "default for --weirdml-sandbox", default="local")
    parser.addini("weirdml_reports", "default for --weirdml-reports (relative to the rootdir)", default="reports")
    parser.addini("weirdml_data_cache", "default for --weirdml-data-cache", default="")
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
    cores_per_script: int | None = None
    ray: str | None = None

    @property
    def session_dir(self) -> Path:
        return self.reports_dir / self.session


def _models(raw: list[str], catalog: Catalog) -> tuple[str, ...]:
    names = [name.strip() for chunk in raw for name in chunk.split(",") if name.strip()]
    for name in names:
        try:
            # Building the client checks its SDK and API key: a missing one stops the session here.
            models.resolve(name, catalog).close()
        except ValueError as exc:
            raise pytest.UsageError(f"--weirdml-model: {exc}") from None
    return tuple(dict.fromkeys(names))


def _leaderboard(text: str | None) -> Path | None:
    if not text:
        return None
    path = Path(text).expanduser().resolve()
    if not path.is_file():
        raise pytest.UsageError(f"--weirdml-leaderboard: {path} not found; pass the published leaderboard.csv")
    return path


def new_session_name() -> str:
    return datetime.now().strftime("%Y%m%d-%H%M%S-") + f"{os.getpid()}"


def settings_from(config: pytest.Config, session: str) -> Settings:
    opt = config.option
    runs = opt.weirdml_runs
    if runs is None:
        runs = _positive_int("ini weirdml_runs")(config.getini("weirdml_runs"))
    sandbox = opt.weirdml_sandbox or config.getini("weirdml_sandbox")
    if sandbox not in SANDBOXES:
        raise pytest.UsageError(f"ini weirdml_sandbox: unknown sandbox {sandbox!r}; choose one of {SANDBOXES}")
    reports = Path(opt.weirdml_reports or config.getini("weirdml_reports"))
    resume = False
    if opt.weirdml_resume:
        previous = Path(opt.weirdml_resume).expanduser().resolve()
        if not (previous / RECORDS_FILE).is_file():
            raise pytest.UsageError(
                f"--weirdml-resume: {previous} holds no {RECORDS_FILE}; pass a session directory under reports/"
            )
        reports, session, resume = previous.parent, previous.name, True
    cache_text = opt.weirdml_data_cache or config.getini("weirdml_data_cache")
    if cache_text:
        cache = Path(cache_text).expanduser()
    else:
        cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pytest-weirdml" / "data"
    try:
        catalog = Catalog.load(config.rootpath, base_url=opt.weirdml_base_url)
    except ValueError as exc:
        raise pytest.UsageError(f"models config: {exc}") from None
    responses: Path | None = None
    if opt.weirdml_cache:
        default = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pytest-weirdml" / "responses"
        responses = Path(opt.weirdml_cache_dir).expanduser() if opt.weirdml_cache_dir else default
    return Settings(
        models=_models(opt.weirdml_models, catalog),
        runs=runs,
        iterations=opt.weirdml_iterations,
        time_limit_s=opt.weirdml_time_limit,
        sandbox=sandbox,
        python=opt.weirdml_python,
        memory_bytes=opt.weirdml_memory or (8 << 30),
        fail_under=opt.weirdml_fail_under,
        reports_dir=reports if reports.is_absolute() else config.rootpath / reports,
        data_cache=cache.resolve(),
        session=session,
        resume=resume,
        bootstrap=opt.weirdml_bootstrap,
        leaderboard=_leaderboard(opt.weirdml_leaderboard),
        catalog=catalog,
        cache_dir=responses.resolve() if responses else None,
        gpus=opt.weirdml_gpus if opt.weirdml_gpus is not None else leases.detect(),
        cores_per_script=opt.weirdml_cores_per_script,
        ray=(opt.weirdml_ray or config.getini("weirdml_ray") or "").strip() or None,
    )
