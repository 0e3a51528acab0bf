"""The feedback loop of one run, free of pytest: plan, then ask, extract, run, score, feed back.

``plan_run`` works out what a run is made under (its ``RunPlan``), the one place that does: the
loop runs by it and the gate compares baselines with it. ``run_task`` hands the plan to
``on_start`` before its first model call (the record store writes it as a ``RunStart``), then
drives up to N submissions. Each finished iteration goes to ``on_iteration`` at once, so a run
killed midway keeps what it finished; ``on_phase`` hears what the run is doing (waiting for the
model, running the script), for the status line.

The model owns its output: whatever goes wrong with what it sent (no script, a script that is not
valid Unicode, a crash, a timeout, a bad predictions file, anything the harness raises while
handling its script) scores 0 with a reason it reads, and the next iteration runs. Only a
failure of the infrastructure (``HarnessError``: the provider after its retries, the sandbox
backend, a Ray node) ends the run with that exception; the model is never scored for it.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

import numpy as np

from pytest_weirdml import protocol as protocol_mod
from pytest_weirdml.errors import HarnessError, WeirdMLError
from pytest_weirdml.extract import extract_code
from pytest_weirdml.models import Message, Model, Request
from pytest_weirdml.protocol import PUBLISHED
from pytest_weirdml.records import IterationRecord, RunPlan, RunRecord, RunStart, Usage, legacy_plan
from pytest_weirdml.redact import redact, redact_optional
from pytest_weirdml.sandbox import Environment, ExecResult, Limits, Sandbox, size_text
from pytest_weirdml.sandbox._workdir import RESULTS_INODES
from pytest_weirdml.tasks import Score, TaskData, TaskSpec, score_predictions
from pytest_weirdml.untrusted import lone_surrogate, valid_unicode


def system_prompt(
    task: TaskSpec, env: Environment, iterations: int, time_limit_s: float, protocol: str = PUBLISHED
) -> str:
    return protocol_mod.system_prompt(
        protocol,
        device=env.device,
        python=env.python,
        packages=env.packages,
        iterations=iterations,
        time_limit_s=time_limit_s,
    )


def script_output(result: ExecResult) -> str:
    """The script's output with the harness's notes after it (what was cut, what was killed)."""
    return "\n".join([result.output, *result.notes])


def outcome(iteration: int, result: ExecResult | None, score: Score) -> protocol_mod.Outcome:
    if result is None:
        return protocol_mod.Outcome(iteration, score.accuracy, score.zero_reason, None)
    return protocol_mod.Outcome(
        iteration,
        score.accuracy,
        score.zero_reason,
        script_output(result),
        duration_s=result.duration_s,
        exit_note="timed out" if result.timed_out else f"exit code {result.exit_code}",
    )


def no_code_reason(usage: Usage) -> str:
    """Why an answer without a script scores 0: the output cap, when it cut the answer (an answer
    cut after a complete block still runs that block), else the missing fence."""
    if usage.truncated:
        cap = f" ({usage.max_output_tokens} tokens)" if usage.max_output_tokens else ""
        return f"the answer hit the output-token cap{cap}"
    return "no code block in the response (put the script between ``` fences)"


def judge(result: ExecResult, answers_score: Callable[[bytes | None], Score], limits: Limits) -> Score:
    """The protocol's scoring: a timeout or a crash scores 0 whatever it wrote; so does a
    predictions file the harness refused to read (a symlink, a FIFO, over the cap)."""
    if result.timed_out:
        return Score(0.0, f"timed out: the script was killed after {result.duration_s:.0f} s")
    if result.exit_code != 0:
        if result.out_of_memory:
            return Score(0.0, f"killed: out of memory (limit {size_text(limits.memory_bytes)})")
        if result.results_files_full:
            return Score(
                0.0,
                f"results/ is full: a script may make at most {RESULTS_INODES} files there "
                f"(the script ended with exit code {result.exit_code})",
            )
        if result.results_full:
            return Score(
                0.0,
                f"results/ is full: a script may write at most {size_text(limits.results_bytes)} there "
                f"(the script ended with exit code {result.exit_code})",
            )
        return Score(0.0, f"the script crashed (exit code {result.exit_code})")
    if result.predictions_problem:
        return Score(0.0, result.predictions_problem)
    return answers_score(result.predictions)


@dataclass(frozen=True)
class LoopSettings:
    """Per-session choices that override a task's own (``None`` keeps the task's)."""

    iterations: int | None = None
    time_limit_s: float | None = None
    limits: Limits = field(default_factory=Limits)
    session: str = ""
    protocol: str = PUBLISHED


def planned_iterations(session: int | None, task: int, model_cap: int | None) -> int:
    """The submissions a run gets: the session's count or the task's, capped by the model's."""
    wanted = session or task
    return wanted if model_cap is None else min(wanted, model_cap)


def plan_run(
    task: TaskSpec,
    model: Model,
    settings: LoopSettings,
    *,
    data_key: str,
    data_seed: int | None,
    sandbox: Sandbox | None = None,
) -> RunPlan:
    """What a run of ``task`` by ``model`` is made under. Without ``sandbox`` (the gate, before
    anything runs) the plan holds the conditions alone: no sandbox, hardware or system prompt."""
    iterations = planned_iterations(settings.iterations, task.iterations, model.max_iterations)
    time_limit = float(settings.time_limit_s or task.time_limit_s)
    limits = settings.limits
    plan = RunPlan(
        iterations_planned=iterations,
        time_limit_s=time_limit,
        memory_bytes=limits.memory_bytes,
        output_bytes=limits.output_bytes,
        results_bytes=limits.results_bytes,
        max_output_tokens=model.max_output_tokens,
        protocol=settings.protocol,
        data_seed=data_seed,
        data_key=data_key,
        time_estimates=task.time_estimates.as_dict() if task.time_estimates else None,
    )
    if sandbox is None:
        return plan
    env = sandbox.environment()
    system = system_prompt(task, env, iterations, time_limit, settings.protocol)
    return replace(plan, sandbox=sandbox.name, isolation=sandbox.isolation, hardware=env.device, system_prompt=system)


def run_task(
    task: TaskSpec,
    data: TaskData,
    model: Model,
    sandbox: Sandbox,
    *,
    run: int,
    settings: LoopSettings = LoopSettings(),
    on_start: Callable[[RunStart], None] = lambda start: None,
    on_iteration: Callable[[IterationRecord], None] = lambda record: None,
    finished: Sequence[IterationRecord] = (),
    started: RunStart | None = None,
    on_phase: Callable[[str], None] = lambda what: None,
) -> RunRecord:
    """Drive the run; ``finished`` iterations (from a resumed session) are replayed into the
    conversation instead of being asked and run again, and a resumed run whose start was recorded
    (``started``) keeps it instead of starting again."""
    plan = plan_run(task, model, settings, data_key=data.key, data_seed=data.seed, sandbox=sandbox)
    recorded = started.plan if started is not None else legacy_plan(list(finished))
    if recorded is None:
        recorded = replace(plan, system_prompt=redact_optional(plan.system_prompt))
        on_start(RunStart(task.name, model.name, run, recorded, started_at=_now(), session=settings.session))
    elif finished:
        _check_resumable(recorded, plan, finished)
    iterations = plan.iterations_planned
    limits = replace(settings.limits, time_s=plan.time_limit_s)
    answers = data.answers()
    messages = [Message("system", plan.system_prompt or ""), Message("user", task.prompt)]
    record = RunRecord(task=task.name, model=model.name, run=run, plan=recorded)
    best = 0.0
    for done in finished[:iterations]:
        record.iterations.append(done)
        best = max(best, done.score)
        messages.append(Message("assistant", done.response))
        said = outcome(done.iteration, _as_result(done), _as_score(done))
        feedback = protocol_mod.feedback(settings.protocol, said, iterations=iterations, best=best)
        messages.append(Message("user", redact(feedback)))
    for iteration in range(len(record.iterations) + 1, iterations + 1):
        started_at = _now()
        clock = time.monotonic()
        on_phase(f"waiting for {model.waiting_for} (iteration {iteration})")
        response = model.generate(Request(tuple(messages), task, run, iteration, recorded.conversation))
        running = functools.partial(on_phase, f"running the script (iteration {iteration})")
        code, result, score = submit(response.text, response.usage, sandbox, data, limits, answers, running)
        best = max(best, score.accuracy)
        # Every text below goes to the records, the reports, the terminal or the next prompt.
        item = IterationRecord(
            task=task.name,
            model=model.name,
            run=run,
            iteration=iteration,
            prompt=redact(messages[-1].content),
            response=redact(valid_unicode(response.text)),
            code=redact_optional(None if code is None else valid_unicode(code)),
            output=redact(script_output(result)) if result else "",
            output_bytes=result.output_bytes if result else 0,
            exit_code=result.exit_code if result else None,
            timed_out=result.timed_out if result else False,
            duration_s=result.duration_s if result else 0.0,
            score=score.accuracy,
            zero_reason=redact_optional(score.zero_reason),
            usage=response.usage.redacted(),
            started_at=started_at,
            wall_s=time.monotonic() - clock,
            isolation=(result.isolation if result else "") or sandbox.isolation,
            node=result.node if result else "",
            harness_notes=tuple(redact(n) for n in result.harness_notes) if result else (),
            session=settings.session,
        )
        record.iterations.append(item)
        on_iteration(item)
        messages.append(Message("assistant", valid_unicode(response.text)))
        said = outcome(iteration, result, score)
        feedback = protocol_mod.feedback(settings.protocol, said, iterations=iterations, best=best)
        messages.append(Message("user", redact(feedback)))
    return record


def submit(
    text: str,
    usage: Usage,
    sandbox: Sandbox,
    data: TaskData,
    limits: Limits,
    answers: np.ndarray,
    starting: Callable[[], None] = lambda: None,
) -> tuple[str | None, ExecResult | None, Score]:
    """Extract the answer's script, run it and score it: (code, result, score). Everything that
    fails here because of what the model sent is its zero; a ``WeirdMLError`` (the sandbox or
    the provider broke) goes up and ends the run."""
    code = extract_code(text)
    if code is None:
        return None, None, Score(0.0, no_code_reason(usage))
    invalid = lone_surrogate(code)
    if invalid is not None:
        return code, None, Score(0.0, f"the script was not run: it holds {invalid}; write it as plain UTF-8 text")
    starting()
    try:
        result, score = run_and_score(code, sandbox, data, limits, answers)
    except WeirdMLError:
        raise
    except Exception as exc:  # what the script left made the harness fail: the submission's zero
        return code, None, Score(0.0, f"the harness could not handle this script ({type(exc).__name__}: {exc})")
    return code, result, score


def run_and_score(
    code: str, sandbox: Sandbox, data: TaskData, limits: Limits, answers: np.ndarray
) -> tuple[ExecResult, Score]:
    """Run one script in the sandbox and score it as the protocol does; its output and notes come
    back redacted."""
    result = sandbox.run(code, data.public_dir, limits)
    # Redacted before any cut (the protocol keeps a head and a tail of the output).
    result = replace(result, output=redact(result.output), notes=tuple(redact(n) for n in result.notes))
    return result, judge(result, lambda content: score_predictions(content, answers, cap=limits.results_bytes), limits)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _check_resumable(recorded: RunPlan, plan: RunPlan, finished: Sequence[IterationRecord]) -> None:
    """A resumed run continues only under the protocol, on the data and with the limits it started
    with, and never takes a recorded score its own record contradicts."""
    for done in finished:
        problem = _inconsistent(done.legacy_plan or recorded, plan, done.schema) or _contradicted(done)
        if problem is not None:
            raise HarnessError(
                f"--weirdml-resume: iteration {done.iteration} of {done.task} / {done.model} / run {done.run} "
                f"in the records {problem}; its score is not taken. Start a new session instead of resuming this one"
            )
    if recorded.protocol != plan.protocol:
        raise HarnessError(
            f"this run started under the {recorded.protocol} protocol; resume it with "
            f"--weirdml-protocol={recorded.protocol}"
        )
    if recorded.data_key and recorded.data_key != plan.data_key:
        raise HarnessError(
            f"this run started on data {recorded.data_key}, not {plan.data_key}; resume it with "
            f"--weirdml-data-seed={recorded.data_seed}"
        )


def _inconsistent(recorded: RunPlan, plan: RunPlan, schema: int) -> str | None:
    """Why an iteration recorded under ``recorded`` cannot be part of a run under ``plan``, or None."""
    if recorded.protocol != plan.protocol or (recorded.data_key and recorded.data_key != plan.data_key):
        return None  # said by the caller, with the option that resumes it
    if not recorded.data_key and schema >= 2:
        return "has no data identity (data_key)"
    if recorded.iterations_planned and recorded.iterations_planned != plan.iterations_planned:
        return f"was planned with {recorded.iterations_planned} submissions, this run with {plan.iterations_planned}"
    if recorded.time_limit_s and recorded.time_limit_s != plan.time_limit_s:
        return f"ran under a time limit of {recorded.time_limit_s:g} s, this run under {plan.time_limit_s:g} s"
    return None


def _contradicted(done: IterationRecord) -> str | None:
    """Why a recorded iteration's score contradicts its own record, or None."""
    failed = done.code is None or done.timed_out or done.exit_code != 0 or done.zero_reason is not None
    if failed and done.score != 0.0:
        return f"scores {done.score} although it failed (zero_reason {done.zero_reason!r}, exit code {done.exit_code})"
    if not failed and done.duration_s <= 0.0:
        return f"scores {done.score} but its script never ran (duration {done.duration_s} s)"
    return None


def _as_result(done: IterationRecord) -> ExecResult | None:
    if done.code is None:
        return None
    return ExecResult(
        exit_code=done.exit_code,
        timed_out=done.timed_out,
        duration_s=done.duration_s,
        output=done.output,
        output_bytes=done.output_bytes,
        predictions=None,
    )


def _as_score(done: IterationRecord) -> Score:
    return Score(done.score, done.zero_reason)
