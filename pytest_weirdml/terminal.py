"""What the session prints: its header, and the summary (a (task, model) table with intervals,
then one line per model).

``-q`` keeps one line per model; the default shows both tables; ``-v`` adds the best-so-far
progression and the zero-score reasons per model.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import pytest

from pytest_weirdml import __version__
from pytest_weirdml.config import Settings
from pytest_weirdml.horizons.report import terminal_lines
from pytest_weirdml.models import OFFLINE
from pytest_weirdml.models.pool import ModelPool
from pytest_weirdml.redact import redact
from pytest_weirdml.sandbox import pool
from pytest_weirdml.sandbox import venv as sandbox_venv
from pytest_weirdml.sandbox.image import image_tag
from pytest_weirdml.sandbox.scale import SandboxSettings
from pytest_weirdml.table import align, comparison_lines
from pytest_weirdml.untrusted import printable


def header_lines(settings: Settings, workers: int, models: ModelPool) -> list[str]:
    """The session header: what runs, where, and where the results go."""
    seed = "each task's own" if settings.data_seed is None else str(settings.data_seed)
    lines = [
        f"weirdml: pytest-weirdml {__version__}, protocol {settings.protocol} (docs/protocol.md), data seed {seed}"
    ]
    names = []
    servers = []
    for name in settings.models:
        if name.partition(":")[0] in ("queue", "human"):
            names.append(f"{name} (answered through files, waiting up to {settings.answer_timeout_s:g} s per answer)")
            continue
        if OFFLINE.get(name.partition(":")[0]) is not None:
            names.append(name)
            continue
        config = settings.catalog.lookup(name)
        alias = f"{name} = {config.spec}" if name != config.spec else name
        # The retirement itself is said once, as a warning (plugin.ModelDeprecatedWarning).
        retiring = ", deprecated" if models.get(name).deprecation() else ""
        names.append(f"{alias} ({config.price_text()}{retiring})")
        # A project's config may point a provider at another server: the header says which.
        if config.base_url:
            servers.append(f"{name} at {_shown_url(config.base_url)}")
    lines.append(f"weirdml models: {'; '.join(names) if names else 'none (pass --weirdml-model=NAME)'}")
    if servers:
        lines.append(f"weirdml servers: {'; '.join(servers)}")
    box = settings.sandbox
    if box.backend == "local":
        own = f"the sandbox's own environment ({sandbox_venv.env_dir()})"
        where = f"local, scripts run by {box.python or own}"
    elif box.backend == "docker":
        where = f"docker, image {image_tag()}"
    else:
        where = f"{box.backend} (docker with image {image_tag()} when its daemon answers, else local)"
    lines.append(f"weirdml sandbox: {where}")
    lines.append(f"weirdml isolation: {header_isolation(box)}")
    lines.append(f"weirdml hardware: {_hardware(box, workers)}")
    resumed = " (resumed)" if settings.resume else ""
    lines.append(f"weirdml session: {settings.session_dir}{resumed}")
    return lines


def _hardware(box: SandboxSettings, workers: int) -> str:
    """Where the scripts run: the Ray cluster, the leased GPUs, or this host's cores in slots."""
    if box.ray:
        each = f"a GPU, or {box.cores_per_script or 1} CPU core(s) on a node without one"
        return f"the Ray cluster at {box.ray}; each script asks for {each}"
    if box.gpus:
        return f"GPUs {','.join(box.gpus)}; each script leases a free one while it runs"
    # The slots the session's pool will have (sandbox/scale.py), counted on the controller.
    cores = len(os.sched_getaffinity(0))
    slots = pool.cpu_slots(pool.default_shares(box.cores_per_script, workers))
    shares = [len(slot.cpus) for slot in slots]
    each = f"{min(shares)}" if min(shares) == max(shares) else f"{min(shares)}-{max(shares)}"
    return f"no GPU; {cores} CPU cores, {len(slots)} script(s) at once with {each} core(s) each ({workers} worker(s))"


def _shown_url(url: str) -> str:
    """A server's URL without any user or password in it."""
    scheme, sep, rest = url.partition("://")
    host, slash, path = rest.partition("/")
    return printable(redact(scheme + sep + host.rsplit("@", 1)[-1] + slash + path))


def header_isolation(box: SandboxSettings) -> str:
    """How the session's scripts will be isolated, as the records will say."""
    if box.ray:
        return "as each Ray node's sandbox says"
    if box.backend == "docker":
        return "docker"
    from pytest_weirdml.sandbox._cgroup import cgroups_usable
    from pytest_weirdml.sandbox.local import bwrap_works

    ok, why = bwrap_works()
    local = ("bwrap+cgroups" if cgroups_usable()[0] else "bwrap") if ok else f"none ({why})"
    return local if box.backend == "local" else f"docker, or {local} if it falls back to local"


def _ci(row: Mapping[str, Any]) -> str:
    return f"[{row['ci_low']:.3f}, {row['ci_high']:.3f}]"


def _num(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def _table(tr: pytest.TerminalReporter, header: list[str], rows: list[list[str]], left: int = 1) -> None:
    """Columns sized to fit (``table.align``), the header in bold."""
    first, *lines = align(header, rows, left=left)
    tr.write_line(first, bold=True)
    for line in lines:
        tr.write_line(line)


MODEL_COLUMNS = [
    "model",
    "tasks",
    "runs",
    "overall",
    "95% CI",
    "SE",
    "failures",
    "cost/run",
    "tok/call",
    "code p10/50/90",
    "exec med s",
]


def _model_row(name: str, m: Mapping[str, Any]) -> list[str]:
    """One model's line of the summary's second table (``MODEL_COLUMNS``)."""
    code = m.get("code_lines") or {}
    cost = m.get("cost_per_run_usd")
    return [
        name,
        str(len(m["tasks"])),
        str(m["runs"]),
        f"{m['overall']['mean']:.3f}",
        _ci(m["overall"]),
        f"{m['overall']['se']:.3f}",
        f"{m['failure_rate']:.1%}",
        "cost unknown" if cost is None else f"${cost:.4f}",
        _num(m.get("mean_output_tokens"), ".0f"),
        "/".join(_num(code.get(k), ".0f") for k in ("p10", "p50", "p90")),
        _num(m.get("exec_time_median_s"), ".1f"),
    ]


def write_summary(tr: pytest.TerminalReporter, summary: dict[str, Any], files: Mapping[str, str]) -> None:
    models = summary["models"]
    verbosity = tr.config.get_verbosity()
    tr.write_sep("=", "weirdml summary")
    if not models:
        tr.write_line("no run finished")
    elif verbosity >= 0:
        # One row per (task, model), models of a task side by side: reads at any terminal width.
        rows = [
            [task, name, str(cell["n"]), f"{cell['mean']:.3f}", _ci(cell)]
            for task in summary["tasks"]
            for name, m in models.items()
            if (cell := m["tasks"].get(task))
        ]
        _table(tr, ["task", "model", "runs", "mean", "95% CI"], rows, left=2)
        tr.write_line("")
        _table(tr, MODEL_COLUMNS, [_model_row(name, m) for name, m in models.items()])
        horizon = terminal_lines(summary)
        if horizon:
            tr.write_line("")
        for line in horizon:
            tr.write_line(line)
    else:
        for name, m in models.items():
            tr.write_line(
                f"{name}: {m['overall']['mean']:.3f} {_ci(m['overall'])} over {len(m['tasks'])} task(s), "
                f"{m['runs']} run(s), {m['failure_rate']:.0%} failed submissions"
            )
    if verbosity > 0:
        tr.write_line("")
        for name, m in models.items():
            steps = "  ".join(f"{s['iteration']}: {s['mean']:.3f} {_ci(s)}" for s in m["progression"])
            tr.write_line(f"{name} best so far after iteration  {steps}")
        for name, m in models.items():
            if m["zero_reasons"]:
                reasons = ", ".join(f"{n}x {r}" for r, n in sorted(m["zero_reasons"].items(), key=lambda x: -x[1]))
                tr.write_line(f"{name} zero scores: {reasons}")
    if summary.get("isolation"):
        isolation = ", ".join(summary["isolation"])
        tr.write_line(f"isolation: {isolation}", red="none" in summary["isolation"])
    if summary["errors"]:
        tr.write_line(f"{len(summary['errors'])} run(s) hit a harness error and are not scored (see the errors above)")
    if summary["incomplete"]:
        tr.write_line(f"{len(summary['incomplete'])} run(s) did not end (session interrupted) and are not scored")
    for name, reasons in summary.get("unscored", {}).items():
        listed = ", ".join(f"{n}x {reason}" for reason, n in sorted(reasons.items(), key=lambda x: -x[1]))
        tr.write_line(printable(f"{name}: {sum(reasons.values())} run(s) not scored: {listed}"), yellow=True)
    if verbosity >= 0:
        for kind, path in files.items():
            tr.write_line(f"{kind}: {path}")


def write_comparison(tr: pytest.TerminalReporter, comparison: Mapping[str, Any], refused_items: list[str]) -> None:
    """The regression gate: one row per compared (model, task) and model overall, then what could
    not be compared and why."""
    margin = comparison.get("margin", 0.0)
    tr.write_sep("=", f"weirdml comparison with {comparison.get('baseline') or 'the baseline'} (margin {margin:g})")
    for line, style in comparison_lines(comparison, refused_items):
        tr.write_line(line, **style)
