"""Every option of the plugin and of the ``weirdml`` command, defined once, in groups.

Each group is a function ``add_*_options(add, prefix)`` that declares its options through
``add`` (``pytest.OptionGroup.addoption`` for the plugin, ``argparse.ArgumentParser.add_argument``
for the command), so a flag has one validator and one help text wherever it is offered. The
plugin's flags are ``--weirdml-NAME``; the command offers the shared groups under short names
(``--bootstrap``, ``--margin``). Every value lands under the same ``dest`` (``weirdml_NAME``).
No pytest here: the command runs without it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pytest_weirdml.models.queue import DEFAULT_TIMEOUT_S as DEFAULT_ANSWER_TIMEOUT_S
from pytest_weirdml.option_types import (
    answer_timeout,
    data_seed,
    existing_file,
    fraction,
    gpus,
    margin,
    seconds,
    size,
    usd,
    whole,
)
from pytest_weirdml.protocol import PROTOCOLS

PLUGIN = "--weirdml-"
COMMAND = "--"
AddOption = Callable[..., Any]


def flag(prefix: str, name: str, short: str | None = None) -> str:
    """``--weirdml-NAME`` for the plugin; ``--SHORT`` (or ``--NAME``) for the command."""
    return prefix + name if prefix == PLUGIN else COMMAND + (short or name)


# The groups ---------------------------------------------------------------------------------------


def add_model_options(add: AddOption, prefix: str = PLUGIN) -> None:
    """Which models, and how their answers are asked for."""
    add(
        flag(prefix, "model"),
        action="append",
        dest="weirdml_models",
        default=[],
        metavar="NAME[,NAME]",
        help="model(s) to benchmark, comma-separated or repeated: reference, baseline, replay:PATH, "
        "queue:DIR (an outside program answers request files in DIR), human (a person answers), "
        "an alias from the models config (claude, gpt, gemini, ...) or PROVIDER:MODEL-ID with PROVIDER "
        "one of anthropic, openai, google, openai-compatible. Default: none (task items are skipped).",
    )
    add(
        flag(prefix, "base-url"),
        dest="weirdml_base_url",
        default=None,
        metavar="URL",
        help="server of every API model in the session, e.g. http://127.0.0.1:8000/v1 for "
        "openai-compatible:MODEL (default: base_url from the models config, else the provider's).",
    )
    add(
        flag(prefix, "max-output-tokens"),
        dest="weirdml_max_output_tokens",
        type=whole(flag(prefix, "max-output-tokens")),
        default=None,
        metavar="N",
        help="output cap of every API model's answers, in tokens (default: max_output_tokens from the models "
        "config: 64000 anthropic, 128000 openai, 65536 google; openai-compatible: the server's own limit, else 8192).",
    )
    add(
        flag(prefix, "max-cost"),
        dest="weirdml_max_cost",
        type=usd(flag(prefix, "max-cost")),
        default=None,
        metavar="USD",
        help="a budget guard: start no new run once the session's API spending reaches USD (runs in flight "
        "finish; the summary lists the items not run); every model needs its prices in the models config "
        "(default: no cap).",
    )
    add(
        flag(prefix, "cache"),
        dest="weirdml_cache",
        action="store_true",
        default=False,
        help="store API answers on disk keyed by (model, settings, conversation, run) and replay them "
        "on a re-run instead of calling the API (default: off).",
    )
    add(
        flag(prefix, "cache-dir"),
        dest="weirdml_cache_dir",
        default=None,
        metavar="DIR",
        help="where --weirdml-cache keeps answers (default: $XDG_CACHE_HOME/pytest-weirdml/responses).",
    )
    add(
        flag(prefix, "answer-timeout"),
        dest="weirdml_answer_timeout",
        type=answer_timeout(flag(prefix, "answer-timeout")),
        default=DEFAULT_ANSWER_TIMEOUT_S,
        metavar="SECONDS",
        help="how long the human and queue:DIR models wait for each answer before the run ends in an "
        f"infrastructure error (default: {DEFAULT_ANSWER_TIMEOUT_S:.0f}, eight hours).",
    )


def add_run_options(add: AddOption, prefix: str = PLUGIN) -> None:
    """How many runs, what each run is allowed, and what the model is told."""
    add(
        flag(prefix, "runs"),
        dest="weirdml_runs",
        type=whole(flag(prefix, "runs")),
        default=None,
        metavar="N",
        help="independent runs per model and task (default: 5, or ini weirdml_runs).",
    )
    add(
        flag(prefix, "iterations"),
        dest="weirdml_iterations",
        type=whole(flag(prefix, "iterations")),
        default=None,
        metavar="N",
        help="submissions per run, overriding each task's (default: the task's, 5).",
    )
    add(
        flag(prefix, "time-limit"),
        dest="weirdml_time_limit",
        type=seconds(flag(prefix, "time-limit")),
        default=None,
        metavar="SECONDS",
        help="wall-clock limit per script, overriding each task's (default: the task's, 120).",
    )
    add(
        flag(prefix, "protocol"),
        dest="weirdml_protocol",
        choices=PROTOCOLS,
        default=None,
        help="what the model is told: published = exactly the information of the published benchmark "
        "(several iterations, never how many; feedback is the output and the accuracy); informed = also "
        "the number of submissions, how many are left, the best accuracy so far and each run time "
        "(default: published, or ini weirdml_protocol).",
    )
    add(
        flag(prefix, "memory"),
        dest="weirdml_memory",
        # A Python that imports numpy needs about this much; beyond the top, nothing is a limit.
        type=size(flag(prefix, "memory"), 64 << 20, 64 << 40),
        default=None,
        metavar="SIZE",
        help="memory cap per script, e.g. 8G, between 64M and 64T (default: 8G).",
    )
    add(
        flag(prefix, "results-cap"),
        dest="weirdml_results_cap",
        type=size(flag(prefix, "results-cap"), 64 << 10, 16 << 30),
        default=None,
        metavar="SIZE",
        help="most a script may write to results/, the one host directory it can write; a write past it "
        "fails (default: 64M).",
    )
    add(
        flag(prefix, "fail-under"),
        dest="weirdml_fail_under",
        type=fraction(flag(prefix, "fail-under")),
        default=None,
        metavar="ACC",
        help="fail a run whose score (best accuracy) is under ACC (default: never fail on score).",
    )


def add_sandbox_options(add: AddOption, prefix: str = PLUGIN) -> None:
    """Where scripts run, and how executions share the hardware."""
    add(
        flag(prefix, "sandbox"),
        dest="weirdml_sandbox",
        default=None,
        metavar="NAME",
        help="where scripts run: docker = a container from the sandbox image; local = bubblewrap, or a "
        "plain subprocess with a warning when bubblewrap is missing (offline models only, unless "
        "--weirdml-allow-unisolated); auto = docker when a daemon and the image are there, else local with "
        "a warning (default: local, or ini weirdml_sandbox).",
    )
    add(
        flag(prefix, "allow-unisolated"),
        dest="weirdml_allow_unisolated",
        action="store_true",
        default=False,
        help="let a provider model's scripts run as plain subprocesses where bubblewrap is missing or "
        "refused (they can read your files, the API keys in the harness's environment and the hidden "
        "answers, and reach the network); every record then says isolation: none (default: refused).",
    )
    add(
        flag(prefix, "build-image"),
        dest="weirdml_build_image",
        action="store_true",
        default=False,
        help="build the docker sandbox's image before the session unless it is built already; the same "
        "as `weirdml image build` (default: off).",
    )
    add(
        flag(prefix, "python"),
        dest="weirdml_python",
        default=None,
        metavar="PATH",
        help="interpreter that runs scripts in the local sandbox instead of the sandbox's own environment; "
        "it must have the packages of `weirdml image requirements`, and scripts can import whatever else "
        "it has (default: the environment of `weirdml env build`, built on first use).",
    )
    add(
        flag(prefix, "gpus"),
        dest="weirdml_gpus",
        type=gpus,
        default=None,
        metavar="auto|none|0,1,...",
        help="GPUs for the scripts: each script holds a free one while it runs, so -n may exceed their "
        "number; auto = every GPU nvidia-smi lists, none = CPU only (default: auto).",
    )
    add(
        flag(prefix, "cores-per-script"),
        dest="weirdml_cores_per_script",
        type=whole(flag(prefix, "cores-per-script")),
        default=None,
        metavar="N",
        help="CPU cores pinned to each script on a host without GPUs; at most cores/N scripts run at "
        "once (default: the cores split between the xdist workers; 1 per script on a Ray CPU cluster).",
    )
    add(
        flag(prefix, "ray"),
        dest="weirdml_ray",
        default=None,
        metavar="auto|ADDRESS",
        help="run every script as a Ray task on a Ray cluster (one GPU each, or a CPU share) while model "
        "calls stay here: auto = the cluster `ray start` made on this machine or $RAY_ADDRESS, or "
        "HOST:PORT (default: off, or ini weirdml_ray).",
    )


def add_data_options(add: AddOption, prefix: str = PLUGIN) -> None:
    """Where task data is cached, and which seed it is built from."""
    add(
        flag(prefix, "data-cache"),
        dest="weirdml_data_cache",
        default=None,
        metavar="DIR",
        help="where built task data is cached; hidden answers live here, outside every sandbox "
        "(default: $XDG_CACHE_HOME/pytest-weirdml/data, or ini weirdml_data_cache).",
    )
    add(
        flag(prefix, "data-seed"),
        dest="weirdml_data_seed",
        type=data_seed(flag(prefix, "data-seed")),
        default=None,
        metavar="N|random",
        help="build every task's data from this seed instead of the task's own: fresh samples, subsets, "
        "crops and games that no model can have seen; random draws one and records it (default: each "
        "task's seed, or ini weirdml_data_seed).",
    )


def add_session_options(add: AddOption, prefix: str = PLUGIN) -> None:
    """Where the session's files go, and resuming one."""
    add(
        flag(prefix, "reports"),
        dest="weirdml_reports",
        default=None,
        metavar="DIR",
        help="where each session writes its records, transcripts and summary (default: reports/ under "
        "the directory pytest was started in, or ini weirdml_reports relative to the rootdir).",
    )
    add(
        flag(prefix, "resume"),
        dest="weirdml_resume",
        default=None,
        metavar="SESSION_DIR",
        help="continue a killed or interrupted session in its own directory: finished iterations "
        "are read back from its records.jsonl, not run again (default: a new session).",
    )


def add_statistics_options(add: AddOption, prefix: str = PLUGIN) -> None:
    """The summary's intervals and the published rows drawn beside it (also ``weirdml report``)."""
    add(
        flag(prefix, "bootstrap"),
        dest="weirdml_bootstrap",
        type=whole(flag(prefix, "bootstrap")),
        default=10_000,
        metavar="N",
        help="bootstrap resamples for the confidence intervals (default: 10000).",
    )
    add(
        flag(prefix, "leaderboard"),
        dest="weirdml_leaderboard",
        type=existing_file(flag(prefix, "leaderboard"), "the published leaderboard.csv"),
        default=None,
        metavar="PATH",
        help="a published WeirdML results CSV (leaderboard.csv) whose rows the HTML report draws beside "
        "this session's models (default: none).",
    )


def add_comparison_options(add: AddOption, prefix: str = PLUGIN) -> None:
    """How a session is judged against a baseline (also ``weirdml compare``)."""
    add(
        flag(prefix, "regression-margin", "margin"),
        dest="weirdml_regression_margin",
        type=margin(flag(prefix, "regression-margin", "margin")),
        default=None,
        metavar="ACC",
        help="a drop counts as a regression only when its whole interval lies below -ACC (default: 0.0, or "
        "ini weirdml_regression_margin).",
    )
    add(
        flag(prefix, "baseline-force", "force"),
        dest="weirdml_baseline_force",
        action="store_true",
        default=False,
        help="compare with the baseline even where it was made under other conditions (data, protocol, "
        "submissions, time limit); the differences are listed with the comparison (default: refuse).",
    )


def add_baseline_options(add: AddOption, prefix: str = PLUGIN) -> None:
    """The baseline a session is compared with, and saving one."""
    add(
        flag(prefix, "baseline"),
        dest="weirdml_baseline",
        default=None,
        metavar="PATH",
        help="compare this session with a baseline (a file written by --weirdml-save-baseline, or a finished "
        "session directory under reports/) and exit 1 when a model's score on a task, or overall, dropped: when "
        "the 95%% bootstrap interval of the difference lies below -margin (default: no comparison).",
    )
    add(
        flag(prefix, "save-baseline"),
        dest="weirdml_save_baseline",
        default=None,
        metavar="PATH",
        help="write this session's scores and conditions to PATH as a baseline file, after comparing with "
        "--weirdml-baseline when both are given (a rolling baseline) (default: none).",
    )


PLUGIN_GROUPS = (
    add_model_options,
    add_run_options,
    add_sandbox_options,
    add_data_options,
    add_session_options,
    add_statistics_options,
    add_baseline_options,
    add_comparison_options,
)
