"""The HTML report: one self-contained file (figures inlined, no scripts or fonts from elsewhere).

It opens straight from the file system. Transcripts use ``<details>`` so they fold without any
JavaScript. Code is highlighted by pygments when it is installed, otherwise by the small
tokenizer below (Python keywords, strings, comments, numbers), which needs nothing.
"""

from __future__ import annotations

import base64
import html
import io
import keyword
import tokenize
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from pytest_weirdml.records import IterationRecord
from pytest_weirdml.report.figures import Figure

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
.zero{color:#b00020}.meta{color:#666}.k{color:#0033b3;font-weight:600}.s{color:#067d17}.c{color:#8c8c8c;
font-style:italic}.n{color:#1750eb}.f{color:#00627a}
"""


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _fmt(value: float | None, spec: str = ".3f", none: str = "-") -> str:
    return none if value is None else format(value, spec)


# --- code highlighting -----------------------------------------------------------------------


def highlight(code: str) -> tuple[str, str]:
    """(HTML of the code, extra CSS): pygments when installed, else the built-in tokenizer."""
    try:
        from pygments import highlight as pyg_highlight
        from pygments.formatters import HtmlFormatter
        from pygments.lexers import PythonLexer
    except ImportError:
        return f'<pre class="code">{_simple_highlight(code)}</pre>', ""
    formatter = HtmlFormatter(cssclass="pyg")
    return pyg_highlight(code, PythonLexer(), formatter), formatter.get_style_defs(".pyg")


def _simple_highlight(code: str) -> str:
    """Colour Python tokens; code that does not tokenize (a model's broken script) stays plain."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(code).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return _e(code)
    lines = code.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    out: list[str] = []
    pos = 0
    previous = ""
    for tok in tokens:
        if tok.type in (tokenize.ENDMARKER,) or tok.start[0] > len(lines):
            continue
        start = offsets[tok.start[0] - 1] + tok.start[1]
        end = offsets[tok.end[0] - 1] + tok.end[1] if tok.end[0] <= len(lines) else len(code)
        css = None
        if tok.type == tokenize.NAME and keyword.iskeyword(tok.string):
            css = "k"
        elif tok.type == tokenize.NAME and previous in ("def", "class"):
            css = "f"
        elif tok.type == tokenize.STRING or tok.type in _FSTRING_TYPES:
            css = "s"
        elif tok.type == tokenize.COMMENT:
            css = "c"
        elif tok.type == tokenize.NUMBER:
            css = "n"
        if tok.type == tokenize.NAME:
            previous = tok.string
        if css is None or start < pos:
            continue
        out.append(_e(code[pos:start]))
        out.append(f'<span class="{css}">{_e(code[start:end])}</span>')
        pos = end
    out.append(_e(code[pos:]))
    return "".join(out)


_FSTRING_TYPES = {
    getattr(tokenize, n) for n in ("FSTRING_START", "FSTRING_MIDDLE", "FSTRING_END") if hasattr(tokenize, n)
}


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
            f"<td>{m['failure_rate']:.1%}</td><td>{'-' if cost is None else f'${cost:.4f}'}</td>"
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


def _iteration(it: IterationRecord, css: set[str]) -> str:
    verdict = f"{it.score:.4f}" + (f" <span class='zero'>— {_e(it.zero_reason)}</span>" if it.zero_reason else "")
    status = "timed out" if it.timed_out else f"exit {it.exit_code}"
    if it.code is None:
        code_html = "<p class='meta'>no code block</p>"
    else:
        code_html, extra = highlight(it.code)
        css.add(extra)
    tokens = f"{it.output_tokens} output tokens" + (f", ${it.cost_usd:.4f}" if it.cost_usd is not None else "")
    return (
        f"<details class='iteration'><summary>iteration {it.iteration}: {verdict}</summary>"
        f"<p class='meta'>script: {_e(status)}, {it.duration_s:.1f} s · {it.code_lines} lines · {_e(tokens)}</p>"
        f"<details><summary>prompt</summary><pre>{_e(it.prompt)}</pre></details>"
        f"<h4>response</h4><pre class='response'>{_e(it.response)}</pre>"
        f"<h4>code</h4>{code_html}"
        f"<h4>output</h4><pre class='output'>{_e(it.output) or '(none)'}</pre></details>"
    )


def _transcripts(records: Sequence[IterationRecord], css: set[str]) -> str:
    if not records:
        return "<p class='meta'>no records.jsonl found: transcripts unavailable</p>"
    runs: defaultdict[tuple[str, str, str, int], dict[int, IterationRecord]] = defaultdict(dict)
    for rec in records:
        # A resumed session may record an iteration twice; the last one is what the run used.
        runs[(rec.task, rec.model, rec.session, rec.run)][rec.iteration] = rec
    out = []
    for task in sorted({key[0] for key in runs}):
        out.append(f"<h3>{_e(task)}</h3>")
        for key in sorted(k for k in runs if k[0] == task):
            its = [runs[key][i] for i in sorted(runs[key])]
            score = max(it.score for it in its)
            zeros = sum(it.zero_reason is not None for it in its)
            session = f" · session {_e(key[2])}" if key[2] else ""
            body = "".join(_iteration(it, css) for it in its)
            out.append(
                f"<details class='run' id='run-{_e(task)}-{_e(key[1])}-{_e(key[2])}-{key[3]}'>"
                f"<summary class='run'>{_e(key[1])} · run {key[3]}{session}: score {score:.4f} "
                f"({len(its)} submission{'s' if len(its) != 1 else ''}, {zeros} scored 0)</summary>{body}</details>"
            )
    return "".join(out)


def render_html(
    summary: dict[str, Any],
    records: Sequence[IterationRecord],
    figures: Sequence[Figure],
    *,
    figures_note: str | None = None,
    published_note: str | None = None,
) -> str:
    css: set[str] = set()
    transcripts = _transcripts(records, css)
    sessions = ", ".join(summary.get("sessions", [])) or "-"
    boot = summary.get("bootstrap", {})
    errors = summary.get("errors") or []
    error_html = (
        f"<p class='zero'>{len(errors)} item(s) hit a harness error and are not scored: {_e(', '.join(errors))}</p>"
        if errors
        else ""
    )
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<title>WeirdML report · {_e(sessions)}</title>
<style>{CSS}{"".join(sorted(css))}</style></head>
<body>
<h1>WeirdML report</h1>
<p class="meta">sessions {_e(sessions)} · {_e(summary.get("generator", ""))} · built {_e(summary.get("created", ""))} ·
95% intervals: {_e(boot.get("method", ""))}, {boot.get("resamples", "?")} resamples</p>
{error_html}
<h2>Accuracy by task</h2>
<p class="meta">Run score = best accuracy over a run's submissions; task score = mean over runs;
overall = unweighted mean over tasks.</p>
{_results_table(summary)}
<h2>Per model</h2>
{_model_table(summary)}
<h2>Figures</h2>
{f"<p class='meta'>{_e(published_note)}</p>" if published_note else ""}
{_figures(figures, figures_note)}
<h2>Transcripts</h2>
{transcripts}
</body></html>
"""
