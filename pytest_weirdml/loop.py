"""The feedback loop of one run, free of pytest: plan, then ask, extract, run, score, feed back.

``plan_run`` works out what a run is made under (its ``RunPlan``), the one place that does: the
loop runs by it and the gate compares baselines with it. ``run_task`` hands the plan to
``on_start`` before its first model call (the record store writes it as a ``RunStart``), then
drives up to N submissions. Each finished iteration goes to ``on_iteration`` at once, so a run
killed midway keeps what it finished. A model or sandbox failure (``HarnessError``) ends the run
with that exception; the model is never scored for it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from pytest_weirdml import protocol as protocol_mod
from pytest_weirdml.errors import HarnessError
from pytest_weirdml.extract import extract_code
from pytest_weirdml.models import Message, Model, Request
from pytest_weirdml.protocol import PUBLISHED
from pytest_weirdml.records import IterationRecord, RunPlan, RunRecord, RunStart, Usage, legacy_plan
from pytest_weirdml.redact import redact, redact_optional
from pytest_weirdml.sandbox import Environment, ExecResult, Limits, Sandbox, size_text
from pytest_weirdml.tasks import Score, TaskData, TaskSpec, score_predictions


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
    )
    if sandbox is None:
        return plan
    env = sandbox.environment()
    system = system_prompt(task, env, iterations, time_limit, settings.protocol)
    return replace(plan, sandbox=sandbox.name, isolated=sandbox.isolated, hardware=env.device, system_prompt=system)


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
        _check_resumable(recorded, plan)
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
        response = model.generate(Request(messages=tuple(messages), task=task, run=run, iteration=iteration))
        code = extract_code(response.text)
        result: ExecResult | None = None
        if code is None:
            score = Score(0.0, no_code_reason(response.usage))
        else:
            result = sandbox.run(code, data.public_dir, limits)
            score = judge(result, lambda content: score_predictions(content, answers, cap=limits.results_bytes), limits)
        best = max(best, score.accuracy)
        # Every text below goes to the records, the reports, the terminal or the next prompt.
        item = IterationRecord(
            task=task.name,
            model=model.name,
            run=run,
            iteration=iteration,
            prompt=redact(messages[-1].content),
            response=redact(response.text),
            code=redact_optional(code),
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
            node=result.node if result else "",
            session=settings.session,
        )
        record.iterations.append(item)
        on_iteration(item)
        messages.append(Message("assistant", response.text))
        said = outcome(iteration, result, score)
        feedback = protocol_mod.feedback(settings.protocol, said, iterations=iterations, best=best)
        messages.append(Message("user", redact(feedback)))
    return record


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _check_resumable(recorded: RunPlan, plan: RunPlan) -> None:
    """A resumed run continues only under the protocol and on the data it started with."""
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
