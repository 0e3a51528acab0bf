"""The HTML report: one self-contained file (figures inlined, no scripts or fonts from elsewhere).

It opens straight from the file system. Transcripts use ``<details>`` so they fold without any
JavaScript; code is highlighted by pygments (which pytest itself depends on).
"""

from __future__ import annotations

import base64
import html
from collections.abc import Sequence
from typing import Any

from pygments import highlight as pygments_highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import PythonLexer

from pytest_weirdml.records import IterationRecord, RunRecord
from pytest_weirdml.report.figures import Figure
from pytest_weirdml.report.transcript import run_status, script_status, usage_text

REPORT_FILE = "report.html"

CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,sans-serif;margin:0 auto;max-width:1280px;padding:1em 2em;
color:#222}
h1{font-size:1.6em;margin-bottom:.2em}h2{border-bottom:1px solid #ddd;padding-bottom:.2em;margin-top:1.6em}
table{border-collapse:collapse;margin:.5em 0}th,td{padding:.25em .6em;border-bottom:1px solid #eee;text-align:right}
th:first-child,td:first-child{text-align:left}th{background:#f6f6f6}.ci{color:#777;font-size:.85em}
figure{margin:1em 0}figure img{max-width:100%;border:1px solid #eee}figcaption{color:#555;font-size:.9em}
details{margin:.3em 0 .3em 1em}summary{cursor:pointer}summary.run{font-weight:600}
pre{background:#f8f8f8;border:1px solid #eee;padding:.6em;overflow:auto;max-height:32em;white-space:pre-wrap}
.zero{color:#b00020}.meta{color:#666}
"""
_FORMATTER = HtmlFormatter(cssclass="pyg")


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _fmt(value: float | None, spec: str = ".3f", none: str = "-") -> str:
    return none if value is None else format(value, spec)


def _cost(value: float | None) -> str:
    return "cost unknown" if value is None else f"${value:.4f}"


# Highlighting takes about 20 s per million characters: a longer script is shown plain.
HIGHLIGHT_MAX_CHARS = 200_000


def highlight(code: str) -> str:
    """The code as highlighted HTML (a ``div.pyg``); the page carries the style once."""
    if len(code) > HIGHLIGHT_MAX_CHARS:
        return f'<div class="pyg"><pre>{_e(code)}</pre></div>'
    return pygments_highlight(code, PythonLexer(), _FORMATTER)


# --- page sections ---------------------------------------------------------------------------


def _results_table(summary: dict[str, Any]) -> str:
    models = summary["models"]
    head = "".join(f"<th>{_e(m)}</th>" for m in models)
    body = []
    for task in summary["tasks"]:
        cells = []
        for m in models.values():
            cell = m["tasks"].get(task)
            cells.append(
                "<td>-</td>"
                if cell is None
                else f"<td>{cell['mean']:.3f} <span class='ci'>[{cell['ci_low']:.3f}, {cell['ci_high']:.3f}]"
                f" n={cell['n']}</span></td>"
            )
        body.append(f"<tr><td>{_e(task)}</td>{''.join(cells)}</tr>")
    overall = "".join(
        f"<td><b>{m['overall']['mean']:.3f}</b> <span class='ci'>[{m['overall']['ci_low']:.3f}, "
        f"{m['overall']['ci_high']:.3f}] SE {m['overall']['se']:.3f}</span></td>"
        for m in models.values()
    )
    body.append(f"<tr><td><b>overall</b></td>{overall}</tr>")
    return f"<table id='results'><tr><th>task</th>{head}</tr>{''.join(body)}</table>"


def _model_table(summary: dict[str, Any]) -> str:
    rows = []
    for name, m in summary["models"].items():
        code = m.get("code_lines") or {}
        cost = m.get("cost_per_run_usd")
        rows.append(
            f"<tr><td>{_e(name)}</td><td>{m['runs']}</td><td>{m['iterations']}</td>"
            f"<td>{m['failure_rate']:.1%}</td><td>{_cost(cost)}</td>"
            f"<td>{_fmt(m.get('mean_output_tokens'), '.0f')}</td>"
            f"<td>{_fmt(code.get('p10'), '.0f')} / {_fmt(code.get('p50'), '.0f')} / {_fmt(code.get('p90'), '.0f')}</td>"
            f"<td>{_fmt(m.get('exec_time_median_s'), '.1f')}</td></tr>"
        )
    return (
        "<table id='models'><tr><th>model</th><th>runs</th><th>submissions</th><th>failure rate</th>"
        "<th>cost / run</th><th>output tokens / call</th><th>code lines p10/p50/p90</th>"
        f"<th>median exec (s)</th></tr>{''.join(rows)}</table>"
    )


def _figures(figures: Sequence[Figure], note: str | None) -> str:
    if note:
        return f"<p class='meta'>{_e(note)}</p>"
    parts = []
    for fig in figures:
        data = base64.b64encode(fig.png).decode("ascii")
        parts.append(
            f"<figure id='fig-{_e(fig.id)}'><img alt='{_e(fig.title)}' src='data:image/png;base64,{data}'>"
            f"<figcaption>{_e(fig.caption)}</figcaption></figure>"
        )
    return "".join(parts)


def _iteration(it: IterationRecord) -> str:
    verdict = f"{it.score:.4f}" + (f" <span class='zero'>— {_e(it.zero_reason)}</span>" if it.zero_reason else "")
    code_html = "<p class='meta'>no code block</p>" if it.code is None else highlight(it.code)
    return (
        f"<details class='iteration'><summary>iteration {_e(it.iteration)}: {verdict}</summary>"
        f"<p class='meta'>script: {_e(script_status(it))} · model: {_e(usage_text(it))}</p>"
        f"<details><summary>prompt</summary><pre>{_e(it.prompt)}</pre></details>"
        f"<h4>response</h4><pre class='response'>{_e(it.response)}</pre>"
        f"<h4>code</h4>{code_html}"
        f"<h4>output</h4><pre class='output'>{_e(it.output) or '(none)'}</pre></details>"
    )


def _transcripts(runs: Sequence[RunRecord]) -> str:
    if not runs:
        return "<p class='meta'>no runs recorded</p>"
    out = []
    for task in sorted({run.task for run in runs}):
        out.append(f"<h3>{_e(task)}</h3>")
        for run in (r for r in runs if r.task == task):
            its = run.iterations
            zeros = sum(it.zero_reason is not None for it in its)
            session = f" · session {_e(run.session)}" if run.session else ""
            status = "" if run.scored else f" <span class='zero'>{_e(run_status(run))}</span>"
            system = run.system_prompt
            told = (
                ""
                if system is None
                else f"<details class='system'><summary>system prompt ({_e(run.protocol)} protocol)</summary>"
                f"<pre>{_e(system)}</pre></details>"
            )
            body = told + "".join(_iteration(it) for it in its)
            anchor = f"run-{_e(task)}-{_e(run.model)}-{_e(run.session)}-{_e(run.run)}"
            out.append(
                f"<details class='run' data-status='{_e(run.status)}' id='{anchor}'>"
                f"<summary class='run'>{_e(run.model)} · run {_e(run.run)}{session}: score {run.score:.4f} "
                f"({len(its)} submission{'s' if len(its) != 1 else ''}, {zeros} scored 0){status}</summary>"
                f"{body}</details>"
            )
    return "".join(out)


def _unscored(summary: dict[str, Any]) -> str:
    parts = []
    for entry in summary.get("errors", []):
        parts.append(
            f"<li>{_e(entry['task'])} · {_e(entry['model'])} · run {_e(entry['run'])}: "
            f"{_e(entry.get('error') or '')}</li>"
        )
    for entry in summary.get("incomplete", []):
        parts.append(
            f"<li>{_e(entry['task'])} · {_e(entry['model'])} · run {_e(entry['run'])}: the session ended first</li>"
        )
    if not parts:
        return ""
    return f"<p class='zero'>{len(parts)} run(s) are not scored:</p><ul class='unscored'>{''.join(parts)}</ul>"


def render_html(
    summary: dict[str, Any],
    runs: Sequence[RunRecord],
    figures: Sequence[Figure],
    *,
    figures_note: str | None = None,
    published_note: str | None = None,
    horizon_html: str = "",
) -> str:
    sessions = ", ".join(summary.get("sessions", [])) or "-"
    boot = summary.get("bootstrap", {})
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<title>WeirdML report · {_e(sessions)}</title>
<style>{CSS}{_FORMATTER.get_style_defs(".pyg")}</style></head>
<body>
<h1>WeirdML report</h1>
<p class="meta">sessions {_e(sessions)} · {_e(summary.get("generator", ""))} ·
records up to {_e(summary.get("created", ""))} ·
95% intervals: {_e(boot.get("method", ""))}, {_e(boot.get("resamples", "?"))} resamples</p>
{_unscored(summary)}
<h2>Accuracy by task</h2>
<p class="meta">Run score = best accuracy over a run's submissions; task score = mean over runs;
overall = unweighted mean over tasks.</p>
{_results_table(summary)}
<h2>Per model</h2>
{_model_table(summary)}
{horizon_html}
<h2>Figures</h2>
{f"<p class='meta'>{_e(published_note)}</p>" if published_note else ""}
{_figures(figures, figures_note)}
<h2>Transcripts</h2>
{_transcripts(runs)}
</body></html>
"""
