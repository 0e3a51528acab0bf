"""A run as a readable transcript: the Markdown file per run, and the words the HTML shares.

Written live when a run ends (so a long session can be read as it goes) and again by
``report.build`` for every run of the records, with the same function. What a model or a script
wrote is kept as text only: terminal escape sequences and control characters are removed (a
transcript shown with ``cat`` must not drive the terminal), and the file's path is made of
sanitised names only and checked to stay inside the output directory.
"""

from __future__ import annotations

from pathlib import Path

from pytest_weirdml.atomic import write_atomic
from pytest_weirdml.records import ERROR, FINISHED, IterationRecord, RunRecord
from pytest_weirdml.untrusted import printable

TRANSCRIPTS_DIR = "transcripts"


def verdict(it: IterationRecord) -> str:
    """``0.8500``, or ``0.0000 (the script crashed (exit code 1))``."""
    return f"{it.score:.4f}" + (f" ({it.zero_reason})" if it.zero_reason else "")


def script_status(it: IterationRecord) -> str:
    if it.code is None:
        return "no script"
    ran = "timed out" if it.timed_out else f"exit {it.exit_code}"
    return f"{ran}, {it.duration_s:.1f} s, {it.code_lines} lines"


def usage_text(it: IterationRecord) -> str:
    usage = it.usage
    cost = "cost unknown" if usage.cost_usd is None else f"${usage.cost_usd:.4f}"
    retries = f", {len(usage.retries)} retries" if usage.retries else ""
    return f"{usage.input_tokens} input / {usage.output_tokens} output tokens, {cost}{retries}"


def run_status(run: RunRecord) -> str:
    """How the run ended, in words: its score, or why it is not scored."""
    if run.status == FINISHED:
        return f"Run score: {run.score:.4f}"
    if run.status == ERROR:
        return f"Not scored: a harness error stopped the run: {run.error}"
    return "Not scored: the session ended before the run did"


def render_markdown(run: RunRecord) -> str:
    session = f" · session {run.session}" if run.session else ""
    lines = [f"# {run.task} · {run.model} · run {run.run}{session}", "", run_status(run), ""]
    if run.system_prompt is not None:
        lines += [f"## System prompt ({run.protocol} protocol)", "", run.system_prompt, ""]
    for it in run.iterations:
        lines += [
            f"## Iteration {it.iteration}: {verdict(it)}",
            "",
            f"Script: {script_status(it)}. Model: {usage_text(it)}.",
            "",
            "### Prompt",
            "",
            it.prompt,
            "",
            "### Response",
            "",
            it.response,
            "",
            "### Output",
            "",
            "```text",
            it.output,
            "```",
            "",
        ]
    return printable("\n".join(lines))


def transcript_path(directory: Path, run: RunRecord, *, by_session: bool = False) -> Path:
    """``transcripts/<task>/<model>-<run>.md``; under ``<session>/`` first when several
    sessions are merged (their run numbers overlap)."""
    root = directory / TRANSCRIPTS_DIR / (_safe(run.session) if by_session else "")
    path = root / _safe(run.task) / f"{_safe(run.model)}-{int(run.run)}.md"
    inside = directory.resolve() / TRANSCRIPTS_DIR
    # The directories may not lead elsewhere; a link at the file's own name is replaced, not followed.
    if not path.parent.resolve().is_relative_to(inside):
        raise ValueError(f"transcript path {path} would leave {inside}")
    return path


def write_transcript(directory: Path, run: RunRecord, *, by_session: bool = False) -> Path:
    path = transcript_path(directory, run, by_session=by_session)
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_atomic(path, render_markdown(run))


def _safe(name: str) -> str:
    """A path component of ASCII letters, digits and ``-_.`` only, never ``.``, ``..`` or hidden."""
    safe = "".join(c if (c.isascii() and c.isalnum()) or c in "-_." else "_" for c in str(name))[:120]
    return "_" + safe[1:] if not safe or safe.startswith(".") else safe
