"""A session's files survive any answer, a torn line, a crash and a full disk, and a resumed
session never writes through a link planted in its directory: record lines cut to fit the
reader, appends that end at a record boundary, a reader that skips a damaged line and reads every
other, derived files written atomically, and a resume that refuses another session's records."""

from __future__ import annotations

import json

import pytest
from helpers import GOOD_SCRIPT, read_iterations, session_dir, write_replay, write_tiny_task

from pytest_weirdml.cli import main as weirdml
from pytest_weirdml.linecap import record_line
from pytest_weirdml.records import IterationRecord, RunEnd, RunPlan, RunStart, Usage, parse_record
from pytest_weirdml.schema import MAX_LINE_CHARS

# What a queue answerer sent (issue 36): a million control characters in a comment, each six
# characters once escaped, and a script that prints a MiB of them.
HUGE_SCRIPT = GOOD_SCRIPT + "# " + "\x01" * 1_000_000 + "\nimport sys\n\nsys.stdout.write(chr(1) * (1 << 20))\n"


def _iteration(run: int, iteration: int, score: float, **texts: object) -> IterationRecord:
    fields: dict[str, object] = {"prompt": "p", "response": "r", "code": "print(1)", "output": "1"} | texts
    return IterationRecord(
        task="t", model="m", run=run, iteration=iteration, output_bytes=2, exit_code=0, timed_out=False,
        duration_s=0.5, score=score, zero_reason=None, session="s", **fields,  # type: ignore[arg-type]
    )  # fmt: skip


# Writing records ---------------------------------------------------------------------------------


def test_every_text_of_a_record_is_cut_to_fit_a_line_and_the_cut_is_recorded() -> None:
    retry = {"attempt": 1, "error": "\x02" * 100_000, "wait_s": 1.0}
    record = _iteration(
        0, 1, 0.5, response="\x01" * 100_000 + "END", output="y" * 10_000, harness_notes=("n" * 90_000,),
        usage=Usage(retries=(retry,)),
    )  # fmt: skip
    fields = json.loads(record.to_json())
    assert fields["cut"] == {}  # it fits a real line: nothing is cut
    line = record_line(fields, limit=200_000)
    assert len(line) <= 200_000
    cut = parse_record(line)
    assert isinstance(cut, IterationRecord)
    assert cut.cut == {"response": 100_003, "usage.retries[0].error": 100_000, "harness_notes[0]": 90_000}
    # Head and tail kept around a visible marker; the short texts whole.
    assert cut.response.startswith("\x01" * 100) and cut.response.endswith("\x01END")
    assert "characters cut here: more than a record line holds" in cut.response
    assert (cut.output, cut.code, cut.score) == ("y" * 10_000, "print(1)", 0.5)
    start = RunStart("t", "m", 0, RunPlan(system_prompt="\x03" * 60_000), session="s")
    assert parse_record(record_line(json.loads(start.to_json()), limit=50_000)).cut == {"plan.system_prompt": 60_000}
    end = RunEnd("t", "m", 0, "error", error="\x04" * 60_000, session="s")
    assert parse_record(record_line(json.loads(end.to_json()), limit=50_000)).cut == {"error": 60_000}


# Sessions ----------------------------------------------------------------------------------------


def test_an_answer_of_a_million_control_characters_is_cut_and_the_session_reports_and_resumes(
    pytester: pytest.Pytester, base_args: list[str]
) -> None:
    write_tiny_task(pytester.path, iterations=1)
    huge = write_replay(pytester.path / "huge.json", [HUGE_SCRIPT])
    args = [f"--weirdml-model=reference,replay:{huge}", "--weirdml-runs=1", *base_args]
    result = pytester.runpytest(*args)
    result.assert_outcomes(passed=2)
    assert "could not be built" not in result.stdout.str()
    where = session_dir(pytester)
    with open(where / "records.jsonl", encoding="utf-8") as fh:
        assert max(len(line) for line in fh) <= MAX_LINE_CHARS
    (cut,) = [r for r in read_iterations(where / "records.jsonl") if r["model"] == "replay:huge.json"]
    assert {"response", "code", "output"} <= set(cut["cut"]) and cut["cut"]["code"] > 1_000_000
    assert "characters cut here" in cut["response"] and cut["score"] == 1.0
    scored = {(r["model"], r["score"]) for r in json.loads((where / "summary.json").read_text())["runs"]}
    assert scored == {("reference", 1.0), ("replay:huge.json", 1.0)}
    out = pytester.path / "rebuilt"
    assert weirdml(["report", str(where), "-o", str(out), "--bootstrap", "100"]) == 0
    assert {(r["model"], r["score"]) for r in json.loads((out / "summary.json").read_text())["runs"]} == scored
    again = pytester.runpytest(*args, f"--weirdml-resume={where}")
    again.assert_outcomes(passed=2)
    assert len(read_iterations(where / "records.jsonl")) == 2
    assert {(r["model"], r["score"]) for r in json.loads((where / "summary.json").read_text())["runs"]} == scored
