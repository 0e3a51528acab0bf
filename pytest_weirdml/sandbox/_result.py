"""The one place a backend's finished run becomes an ``ExecResult``: every backend (docker,
local) reports the time limit, memory, a full results/ and a capped capture in the same words,
and reads the predictions through its ``RunDir`` the same way."""

from __future__ import annotations

from pytest_weirdml.sandbox import ExecResult, Limits, size_text
from pytest_weirdml.sandbox._output import capture_note
from pytest_weirdml.sandbox._workdir import RunDir


def run_result(
    work: RunDir,
    limits: Limits,
    *,
    exit_code: int | None,
    timed_out: bool,
    duration_s: float,
    output: str,
    output_bytes: int,
    out_of_memory: bool = False,
    over_cap: bool = False,
    isolation: str = "",
) -> ExecResult:
    """What every backend returns for a finished run: the harness's notes (time limit, memory,
    a full results/, a capped capture) in one wording, the predictions read through ``work``, and
    how the backend isolated the script."""
    results_full = over_cap or work.full()
    notes = []
    if timed_out:
        notes.append(f"harness: killed after the time limit of {limits.time_s:g} s")
    if out_of_memory:
        notes.append(f"harness: a process was killed: out of memory (limit {size_text(limits.memory_bytes)})")
    if results_full:
        notes.append(work.full_note() + (" (the run was stopped for it)" if over_cap else ""))
    if output_bytes > limits.output_bytes:
        notes.append(capture_note(output_bytes, limits.output_bytes))
    predictions, problem = work.read_predictions()
    return ExecResult(
        exit_code=None if timed_out else exit_code,
        timed_out=timed_out,
        duration_s=duration_s,
        output=output,
        output_bytes=output_bytes,
        predictions=predictions,
        notes=tuple(notes),
        predictions_problem=problem,
        out_of_memory=out_of_memory,
        results_full=results_full,
        results_files_full=results_full and work.too_many_files,
        isolation=isolation,
    )
