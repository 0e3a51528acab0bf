"""What the model is told: the system prompt and the feedback after each submission, per protocol.

``published`` (the default) gives exactly the information of the published benchmark's system
prompt and feedback, in our own words: the task comes next, one script, the hardware and time
limit, the packages, several iterations (never how many), the code-block rule, nothing persists
between submissions, the output truncation, reasoning in the answer helps later iterations, the
results are compared with other models. After a submission: the terminal output and the test
accuracy, or why it scored 0; nothing else.

``informed`` also discloses the number of submissions, how many are left, the best accuracy so
far, each script's run time and that a submission without predictions scores 0. Its scores are not
comparable with the published protocol's, and every record says which protocol produced it.
"""

from __future__ import annotations

from dataclasses import dataclass

from pytest_weirdml.extract import HEAD_CHARS, TAIL_CHARS, truncate_output
from pytest_weirdml.tasks import PREDICTIONS_FILE

PUBLISHED = "published"
INFORMED = "informed"
PROTOCOLS = (PUBLISHED, INFORMED)

_PUBLISHED_SYSTEM = """\
You will be given a machine learning task. Solve it by writing one complete Python script that \
trains a model on the task's data and predicts the test set. Your script runs on {device}, with a \
limit of {time_limit} of wall-clock time.

Put the script in a code block that opens with ```python (a bare ``` also works). If your answer \
has more than one such block, the longest one is taken as the script.

You will have several iterations. After each submission you will see the terminal output of your \
script (when it is longer than {cut} characters, only its first {head} and last {tail} characters) \
and its accuracy on the test set, and you can submit an improved script. Think step by step and \
write your reasoning in your answer: your earlier answers stay in the conversation, so later \
iterations can build on it. Nothing is kept between submissions: every script starts from scratch.

After each submission your results are compared with those of other models, so make every \
submission count.

The script can use Python {python} with {packages}. There is no internet access, and nothing else \
can be installed."""

_INFORMED_SYSTEM = """\
You are taking part in a benchmark of machine learning on unusual problems. You will get one \
task with a small data set. Solve it by writing ONE complete Python script that trains a model \
from scratch and predicts the labels of the test set.

How your script is run:
- As `python solution.py` in a directory holding `data/` (the task's files, read-only) and an \
empty `results/`.
- It must save its test-set predictions with \
`np.savetxt('{predictions}', preds, fmt='%d')`. A submission that writes no predictions file \
scores 0.
- Hardware: {device}. Time limit: {time_limit} of wall-clock time for the whole script, \
start-up and data loading included; a script still running at the limit is killed and scores 0.
- There is no internet access and nothing can be installed. Available: Python {python} with \
{packages}.
- Nothing is kept between submissions: every script starts from scratch.

How to answer:
- Put the script in a code block fenced with ```python (or a bare ```). If your answer holds \
several such blocks, the longest one is taken as the script.
- Think step by step and write your reasoning before the code; you will see your earlier answers \
again.

You have {iterations} submission{plural} in total. After each one you will see the script's \
terminal output (output longer than {cut} characters is cut to its first {head} and last {tail}) \
and its test accuracy, with the number of submissions left. Your result is your best test \
accuracy over all submissions, and it is compared with other models' results."""


@dataclass(frozen=True)
class Outcome:
    """What a submission came to, as the feedback describes it."""

    iteration: int
    accuracy: float
    zero_reason: str | None
    # None when no script ran (no code block in the answer).
    output: str | None
    duration_s: float = 0.0
    exit_note: str = ""


def _seconds(value: float) -> str:
    return f"{value:g} seconds" if value != 120 else "2 minutes (120 seconds)"


def system_prompt(
    protocol: str,
    *,
    device: str,
    python: str,
    packages: dict[str, str],
    iterations: int,
    time_limit_s: float,
) -> str:
    listed = ", ".join(f"{name} {version}" for name, version in sorted(packages.items(), key=lambda kv: kv[0].lower()))
    fields = {
        "device": device,
        "time_limit": _seconds(time_limit_s),
        "python": python,
        "packages": listed or "the standard library only",
        "cut": HEAD_CHARS + TAIL_CHARS,
        "head": HEAD_CHARS,
        "tail": TAIL_CHARS,
        "predictions": PREDICTIONS_FILE,
        "iterations": iterations,
        "plural": "" if iterations == 1 else "s",
    }
    template = _INFORMED_SYSTEM if protocol == INFORMED else _PUBLISHED_SYSTEM
    return template.format(**fields)


def _verdict(outcome: Outcome) -> str:
    if outcome.zero_reason:
        return f"Test accuracy: 0.0 ({outcome.zero_reason})"
    return f"Test accuracy: {outcome.accuracy:.4f}"


def feedback(protocol: str, outcome: Outcome, *, iterations: int, best: float) -> str:
    """The message after a submission."""
    output = None if outcome.output is None else f"```text\n{truncate_output(outcome.output)}\n```"
    if protocol != INFORMED:
        parts = [] if output is None else ["Terminal output of your script:", output]
        return "\n\n".join([*parts, _verdict(outcome) + "."])
    left = iterations - outcome.iteration
    lines = [f"Submission {outcome.iteration} of {iterations}. {_verdict(outcome)}."]
    if output is not None:
        lines.append(f"The script ran for {outcome.duration_s:.1f} s ({outcome.exit_note}). Its terminal output:")
        lines.append(output)
    lines.append(f"Best test accuracy so far: {best:.4f}.")
    if left:
        lines.append(
            f"You have {left} submission{'s' if left > 1 else ''} left. Reply with an improved, complete "
            f"script that writes {PREDICTIONS_FILE}; a submission without predictions scores 0."
        )
    return "\n\n".join(lines)
