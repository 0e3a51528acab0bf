"""The feedback loop of one run, free of pytest: ask, extract, run, score, feed back.

``run_task`` drives up to N submissions. Each finished iteration goes to ``on_iteration`` at
once (the record store), so a run killed midway keeps what it finished. A model or sandbox
failure (``HarnessError``) ends the run with that exception; the model is never scored for it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from pytest_weirdml.extract import HEAD_CHARS, TAIL_CHARS, extract_code, truncate_output
from pytest_weirdml.models import Message, Model, Request
from pytest_weirdml.records import IterationRecord, RunRecord
from pytest_weirdml.sandbox import PREDICTIONS_CAP_BYTES, Environment, ExecResult, Limits, Sandbox
from pytest_weirdml.tasks import PREDICTIONS_FILE, Score, TaskData, TaskSpec, score_predictions

SYSTEM_PROMPT = """\
You are taking part in a benchmark of machine learning on unusual problems. You will get one \
task with a small data set. Solve it by writing ONE complete Python script that trains a model \
from scratch and predicts the labels of the test set.

How your script is run:
- As `python solution.py` in a directory holding `data/` (the task's files, read-only) and an \
empty `results/`.
- It must save its test-set predictions with \
`np.savetxt('{predictions}', preds, fmt='%d')`. A submission that writes no predictions file \
scores 0.
- Hardware: {device}. Time limit: {time_limit:g} seconds of wall-clock time for the whole script, \
start-up and data loading included; a script still running at the limit is killed and scores 0.
- There is no internet access and nothing can be installed. Available: Python {python} with \
{packages}.
- Nothing is kept between submissions: every script starts from scratch.

How to answer:
- Put the script in a fenced code block (```python ... ```). If your answer holds several code \
blocks, the longest one is taken as the script.
- Explain your reasoning briefly before the code; you will see your earlier answers again.

You have {iterations} submission{plural} in total. After each one you will see the script's \
terminal output (output longer than {cut} characters is cut to its first {head} and last {tail}) \
and its test accuracy, with the number of submissions left. Your result is your best test \
accuracy over all submissions, and it is compared with other models' results."""


def system_prompt(task: TaskSpec, env: Environment, iterations: int, time_limit_s: float) -> str:
    packages = ", ".join(f"{name} {version}" for name, version in sorted(env.packages.items()))
    return SYSTEM_PROMPT.format(
        predictions=PREDICTIONS_FILE,
        device=env.device,
        time_limit=time_limit_s,
        python=env.python,
        packages=packages or "the standard library only",
        iterations=iterations,
        plural="" if iterations == 1 else "s",
        cut=HEAD_CHARS + TAIL_CHARS,
        head=HEAD_CHARS,
        tail=TAIL_CHARS,
    )


def feedback_message(iteration: int, iterations: int, result: ExecResult | None, score: Score, best: float) -> str:
    """What the model reads after a submission: the verdict, the output, what is left."""
    left = iterations - iteration
    if score.zero_reason:
        lines = [f"Submission {iteration} of {iterations} scored 0: {score.zero_reason}."]
    else:
        lines = [f"Submission {iteration} of {iterations}: test accuracy {score.accuracy:.4f}."]
    if result is not None:
        status = "timed out" if result.timed_out else f"exit code {result.exit_code}"
        lines.append(f"The script ran for {result.duration_s:.1f} s ({status}). Its terminal output:")
        lines.append(f"```text\n{truncate_output(result.output)}\n```")
    lines.append(f"Best test accuracy so far: {best:.4f}.")
    if left:
        lines.append(
            f"You have {left} submission{'s' if left > 1 else ''} left. Reply with an improved, complete "
            f"script that writes {PREDICTIONS_FILE}; a submission without predictions scores 0."
        )
    return "\n\n".join(lines)


def judge(result: ExecResult, answers_score: Callable[[bytes | None], Score]) -> Score:
    """The protocol's scoring: a timeout or a crash scores 0 whatever it wrote."""
    if result.timed_out:
        return Score(0.0, f"timed out: the script was killed after {result.duration_s:.0f} s")
    if result.exit_code != 0:
        return Score(0.0, f"the script crashed (exit code {result.exit_code})")
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
) -> RunRecord:
    """Drive the run; ``finished`` iterations (from a resumed session) are replayed into the
    conversation instead of being asked and run again."""
    iterations = settings.iterations or task.iterations
    if model.max_iterations is not None:
        iterations = min(iterations, model.max_iterations)
    time_limit = settings.time_limit_s or task.time_limit_s
    limits = replace(settings.limits, time_s=time_limit)
    answers = data.answers()
    env = sandbox.environment()
    if settings.device:
        env = replace(env, device=settings.device)
    messages = [
        Message("system", system_prompt(task, env, iterations, time_limit)),
        Message("user", task.prompt),
    ]
    record = RunRecord(task=task.name, model=model.name, run=run)
    best = 0.0
    for done in finished[:iterations]:
        record.iterations.append(done)
        best = max(best, done.score)
        messages.append(Message("assistant", done.response))
        messages.append(
            Message("user", feedback_message(done.iteration, iterations, _as_result(done), _as_score(done), best))
        )
    for iteration in range(len(record.iterations) + 1, iterations + 1):
        started_at = datetime.now(UTC).isoformat(timespec="seconds")
        clock = time.monotonic()
        response = model.generate(Request(messages=tuple(messages), task=task, run=run, iteration=iteration))
        code = extract_code(response.text)
        result: ExecResult | None = None
        if code is None:
            score = Score(0.0, "no code block in the response (put the script between ``` fences)")
        else:
            result = sandbox.run(code, data.public_dir, limits, gpu=settings.gpu)
            score = judge(result, lambda content: score_predictions(content, answers, cap=PREDICTIONS_CAP_BYTES))
        best = max(best, score.accuracy)
        item = IterationRecord(
            task=task.name,
            model=model.name,
            run=run,
            iteration=iteration,
            prompt=messages[-1].content,
            response=response.text,
            code=code,
            output="\n".join([result.output, *result.notes]) if result else "",
            output_bytes=result.output_bytes if result else 0,
            exit_code=result.exit_code if result else None,
            timed_out=result.timed_out if result else False,
            duration_s=result.duration_s if result else 0.0,
            score=score.accuracy,
            zero_reason=score.zero_reason,
            input_tokens=response.input_tokens,
            output_tokens=response.output_tokens,
            reasoning_tokens=response.reasoning_tokens,
            cached_tokens=response.cached_tokens,
            cost_usd=response.cost_usd,
            model_latency_s=response.latency_s,
            retries=[dict(retry) for retry in response.retries],
            started_at=started_at,
            wall_s=time.monotonic() - clock,
            sandbox=sandbox.name,
            node=result.node if result else "",
            session=settings.session,
        )
        record.iterations.append(item)
        on_iteration(item)
        messages.append(Message("assistant", response.text))
        messages.append(Message("user", feedback_message(iteration, iterations, result, score, best)))
    return record


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
