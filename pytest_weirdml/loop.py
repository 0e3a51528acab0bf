"""The feedback loop of one run, free of pytest: ask, extract, run, score, feed back.

``run_task`` drives up to N submissions. Each finished iteration goes to ``on_iteration`` at
once (the record store), so a run killed midway keeps what it finished; ``on_phase`` hears
what the run is doing (waiting for the model, running the script), for the status line.

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
from pytest_weirdml.records import IterationRecord, RunRecord, Usage
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
    gpu: str | None = None
    # How the system prompt names the hardware when a GPU is leased (the sandbox's own text otherwise).
    device: str | None = None
    session: str = ""
    protocol: str = PUBLISHED


def planned_iterations(session: int | None, task: int, model_cap: int | None) -> int:
    """The submissions a run gets: the session's count or the task's, capped by the model's."""
    wanted = session or task
    return wanted if model_cap is None else min(wanted, model_cap)


def run_task(
    task: TaskSpec,
    data: TaskData,
    model: Model,
    sandbox: Sandbox,
    *,
    run: int,
    settings: LoopSettings = LoopSettings(),
    on_iteration: Callable[[IterationRecord], None] = lambda record: None,
    finished: Sequence[IterationRecord] = (),
    on_phase: Callable[[str], None] = lambda what: None,
) -> RunRecord:
    """Drive the run; ``finished`` iterations (from a resumed session) are replayed into the
    conversation instead of being asked and run again."""
    iterations = planned_iterations(settings.iterations, task.iterations, model.max_iterations)
    time_limit = settings.time_limit_s or task.time_limit_s
    limits = replace(settings.limits, time_s=time_limit)
    answers = data.answers()
    env = sandbox.environment()
    if settings.device:
        env = replace(env, device=settings.device)
    system = system_prompt(task, env, iterations, time_limit, settings.protocol)
    messages = [Message("system", system), Message("user", task.prompt)]
    record = RunRecord(task=task.name, model=model.name, run=run)
    best = 0.0
    _check_resumable(finished, settings.protocol, data, iterations, time_limit)
    for done in finished[:iterations]:
        record.iterations.append(done)
        best = max(best, done.score)
        messages.append(Message("assistant", done.response))
        said = outcome(done.iteration, _as_result(done), _as_score(done))
        feedback = protocol_mod.feedback(settings.protocol, said, iterations=iterations, best=best)
        messages.append(Message("user", redact(feedback)))
    for iteration in range(len(record.iterations) + 1, iterations + 1):
        started_at = datetime.now(UTC).isoformat(timespec="seconds")
        clock = time.monotonic()
        on_phase(f"waiting for {model.waiting_for} (iteration {iteration})")
        response = model.generate(Request(messages=tuple(messages), task=task, run=run, iteration=iteration))
        running = functools.partial(on_phase, f"running the script (iteration {iteration})")
        code, result, score = submit(
            response.text, response.usage, sandbox, data, limits, settings.gpu, answers, running
        )
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
            sandbox=sandbox.name,
            isolation=(result.isolation if result else "") or sandbox.isolation,
            node=result.node if result else "",
            session=settings.session,
            protocol=settings.protocol,
            data_seed=data.seed,
            data_key=data.key,
            iterations_planned=iterations,
            time_limit_s=time_limit,
            hardware=env.device,
            # The exact system prompt, once per run: what the model was told of hardware and packages.
            system_prompt=redact(system) if iteration == 1 else None,
            time_estimates=task.time_estimates.as_dict() if task.time_estimates and iteration == 1 else None,
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
    gpu: str | None,
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
        result = sandbox.run(code, data.public_dir, limits, gpu=gpu)
        # Redacted before any cut (the protocol keeps a head and a tail of the output).
        result = replace(result, output=redact(result.output), notes=tuple(redact(n) for n in result.notes))
        score = judge(result, lambda content: score_predictions(content, answers, cap=limits.results_bytes), limits)
    except WeirdMLError:
        raise
    except Exception as exc:  # what the script left made the harness fail: the submission's zero
        return code, None, Score(0.0, f"the harness could not handle this script ({type(exc).__name__}: {exc})")
    return code, result, score


def _check_resumable(
    finished: Sequence[IterationRecord], protocol: str, data: TaskData, iterations: int, time_limit: float
) -> None:
    """A resumed run continues only under the protocol, on the data and with the limits it started
    with, and never takes a recorded score its own record contradicts."""
    if not finished:
        return
    for done in finished:
        problem = _inconsistent(done, protocol, data, iterations, time_limit)
        if problem is not None:
            raise HarnessError(
                f"--weirdml-resume: iteration {done.iteration} of {done.task} / {done.model} / run {done.run} "
                f"in the records {problem}; its score is not taken. Start a new session instead of resuming this one"
            )
    first = finished[0]
    if first.protocol != protocol:
        raise HarnessError(
            f"this run started under the {first.protocol} protocol; resume it with --weirdml-protocol={first.protocol}"
        )
    if first.data_key and first.data_key != data.key:
        raise HarnessError(
            f"this run started on data {first.data_key}, not {data.key}; resume it with "
            f"--weirdml-data-seed={first.data_seed}"
        )


def _inconsistent(
    done: IterationRecord, protocol: str, data: TaskData, iterations: int, time_limit: float
) -> str | None:
    """Why a recorded iteration cannot be part of this run, or None."""
    if done.protocol != protocol or (done.data_key and done.data_key != data.key):
        return None  # said below, with the option that resumes it
    if not done.data_key and done.schema >= 2:
        return "has no data identity (data_key)"
    if done.iterations_planned and done.iterations_planned != iterations:
        return f"was planned with {done.iterations_planned} submissions, this run with {iterations}"
    if done.time_limit_s and done.time_limit_s != time_limit:
        return f"ran under a time limit of {done.time_limit_s:g} s, this run under {time_limit:g} s"
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
