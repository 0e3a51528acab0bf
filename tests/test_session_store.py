"""A session's files survive any answer, a torn line, a crash and a full disk, and a resumed
session never writes through a link planted in its directory: record lines cut to fit the
reader, appends that end at a record boundary, a reader that skips a damaged line and reads every
other, derived files written atomically, and a resume that refuses another session's records."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import GOOD_SCRIPT, read_iterations, session_dir, write_replay, write_tiny_task

from pytest_weirdml.atomic import write_atomic
from pytest_weirdml.cli import main as weirdml
from pytest_weirdml.linecap import record_line
from pytest_weirdml.recordfile import RecordsWarning
from pytest_weirdml.records import IterationRecord, RunEnd, RunPlan, RunStart, Usage, parse_record
from pytest_weirdml.report.summary import write_summary
from pytest_weirdml.schema import MAX_LINE_CHARS
from pytest_weirdml.session import SessionDir

# What a queue answerer sent (issue 36): a million control characters in a comment, each six
# characters once escaped, and a script that prints a MiB of them.
HUGE_SCRIPT = GOOD_SCRIPT + "# " + "\x01" * 1_000_000 + "\nimport sys\n\nsys.stdout.write(chr(1) * (1 << 20))\n"


def _start(run: int, planned: int = 2) -> RunStart:
    return RunStart("t", "m", run, RunPlan(iterations_planned=planned, protocol="published"), session="s")


def _iteration(run: int, iteration: int, score: float, **texts: object) -> IterationRecord:
    fields: dict[str, object] = {"prompt": "p", "response": "r", "code": "print(1)", "output": "1"} | texts
    return IterationRecord(
        task="t", model="m", run=run, iteration=iteration, output_bytes=2, exit_code=0, timed_out=False,
        duration_s=0.5, score=score, zero_reason=None, session="s", **fields,  # type: ignore[arg-type]
    )  # fmt: skip


def _strictly(session: SessionDir) -> list[tuple[int, str, list[float]]]:
    """The session's runs, read with any skipped line an error: (run, status, scores)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", RecordsWarning)
        return [(r.run, r.status, [it.score for it in r.iterations]) for r in session.runs()]


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A real 2 MiB tmpfs: a disk that fills up."""
    where = tmp_path / "disk"
    where.mkdir()
    if os.geteuid() != 0:
        pytest.skip("a full disk needs a 2 MiB tmpfs, and mounting one needs root")
    mount = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(where)], capture_output=True, text=True
    )
    if mount.returncode != 0:
        pytest.skip(f"could not mount a 2 MiB tmpfs: {mount.stderr.strip()}")
    yield where
    subprocess.run(["umount", "-l", str(where)], check=False)


def _fill(disk: Path, leave: int) -> Path:
    """A file that takes all but about ``leave`` bytes of ``disk``."""
    stat = os.statvfs(disk)
    filler = disk / "filler"
    filler.write_bytes(bytes(max(stat.f_bavail * stat.f_frsize - leave, 0)))
    return filler


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


def test_a_torn_tail_is_dropped_before_every_append_not_once_per_process(tmp_path: Path) -> None:
    session = SessionDir(tmp_path / "s")
    session.append(_start(0))
    for iteration in (1, 2):
        # A writer killed mid-line (another xdist worker, or this process's own failed write).
        with open(session.records_path, "a") as fh:
            fh.write('{"task": "t", "model": "m", "run": 0, "itera')
        session.append(_iteration(0, iteration, 0.25 * iteration))
    session.end_run("t", "m", 0, session="s")
    assert _strictly(session) == [(0, "finished", [0.25, 0.5])]


def test_a_write_the_disk_cuts_short_is_undone_and_the_next_append_is_whole(small_disk: Path) -> None:
    session = SessionDir(small_disk / "s")
    session.append(_start(0))
    session.append(_iteration(0, 1, 0.5))
    before = session.records_path.read_bytes()
    filler = _fill(small_disk, 16 << 10)
    with pytest.raises(OSError) as full:
        session.append(_iteration(0, 2, 0.75, response="x" * (256 << 10)))
    assert full.value.errno == errno.ENOSPC
    # The file ends where it did, at a record boundary: no part of the line is left.
    assert session.records_path.read_bytes() == before
    filler.unlink()
    session.append(_iteration(0, 2, 0.75))
    session.end_run("t", "m", 0, session="s")
    assert _strictly(session) == [(0, "finished", [0.5, 0.75])]


def test_records_that_are_a_link_are_never_appended_through(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.txt"
    target.write_text("precious\n")
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "records.jsonl").symlink_to(target)
    with pytest.raises(OSError):
        SessionDir(tmp_path / "s").append(_start(0))
    assert target.read_text() == "precious\n"


# Reading records ---------------------------------------------------------------------------------


def _damaged(tmp_path: Path) -> SessionDir:
    """Three runs of two iterations; run 1's second iteration torn in half by a full disk and its
    end glued to the torn half (what the writer did before it repaired each tail), run 2's first
    iteration longer than a line may be (what it wrote before lines were cut to fit)."""
    session = SessionDir(tmp_path / "s")
    for run in range(3):
        session.append(_start(run))
        session.append(_iteration(run, 1, 0.5))
        session.append(_iteration(run, 2, 0.75))
        session.end_run("t", "m", run, session="s")
    lines = session.records_path.read_text().splitlines(keepends=True)
    lines[6] = lines[6][: len(lines[6]) // 2] + lines.pop(7)
    old = json.loads(lines[8]) | {"output": "\x01" * 3_000_000}
    lines[8] = json.dumps(old, ensure_ascii=False) + "\n"
    assert len(lines[8]) > MAX_LINE_CHARS
    session.records_path.write_text("".join(lines))
    return session


def test_a_damaged_line_is_skipped_with_a_warning_and_every_other_line_is_read(tmp_path: Path) -> None:
    session = _damaged(tmp_path)
    path = session.records_path
    with pytest.warns(RecordsWarning) as said:
        runs = {r.run: (r.status, [it.score for it in r.iterations]) for r in session.runs()}
    messages = [str(w.message) for w in said]
    assert (
        f"{path} line 7 is not a whole record" in messages[0] and "the record glued to its end is kept" in messages[0]
    )
    assert f"{path} line 9 is longer than 16 MiB characters" in messages[1]
    # The runs that lost a line are not scored on what is left of them; the other is whole.
    assert runs == {0: ("finished", [0.5, 0.75]), 1: ("incomplete", [0.5]), 2: ("incomplete", [0.75])}


def test_weirdml_report_counts_every_good_run_of_a_damaged_session(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    session = _damaged(tmp_path)
    assert weirdml(["report", str(session.path), "-o", str(tmp_path / "out"), "--bootstrap", "100"]) == 0
    err = capsys.readouterr().err
    assert f"warning: {session.records_path} line 7 is not a whole record" in err
    assert f"warning: {session.records_path} line 9 is longer than 16 MiB characters" in err
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert [(r["run"], r["score"]) for r in summary["runs"]] == [(0, 0.75)]
    assert [r["run"] for r in summary["incomplete"]] == [1, 2]


# Derived files -----------------------------------------------------------------------------------


def test_a_write_that_fails_leaves_the_old_summary_whole_and_nothing_beside_it(small_disk: Path) -> None:
    write_summary({"old": True}, small_disk)
    filler = _fill(small_disk, 16 << 10)
    with pytest.raises(OSError) as full:
        write_summary({"new": "x" * (256 << 10)}, small_disk)
    assert full.value.errno == errno.ENOSPC
    assert json.loads((small_disk / "summary.json").read_text()) == {"old": True}
    assert sorted(p.name for p in small_disk.iterdir()) == ["filler", "summary.json"]
    filler.unlink()
    write_summary({"new": True}, small_disk)
    assert json.loads((small_disk / "summary.json").read_text()) == {"new": True}


def test_an_atomic_write_replaces_a_planted_link_and_never_follows_it(tmp_path: Path) -> None:
    target = tmp_path / "target"
    target.write_text("precious\n")
    (tmp_path / "report.html").symlink_to(target)
    write_atomic(tmp_path / "report.html", "<html></html>")
    assert target.read_text() == "precious\n"
    assert not (tmp_path / "report.html").is_symlink() and (tmp_path / "report.html").read_text() == "<html></html>"
    old_umask = os.umask(0o022)
    try:
        write_atomic(tmp_path / "fresh.csv", b"a,b\n")
    finally:
        os.umask(old_umask)
    assert (tmp_path / "fresh.csv").stat().st_mode & 0o777 == 0o644


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


def test_a_session_with_a_huge_line_and_a_torn_middle_line_is_reported_and_resumed_with_every_good_run(
    pytester: pytest.Pytester, base_args: list[str]
) -> None:
    write_tiny_task(pytester.path, iterations=1)
    replay = write_replay(pytester.path / "good.json", [GOOD_SCRIPT])
    args = [f"--weirdml-model=reference,baseline,replay:{replay}", "--weirdml-runs=1", *base_args]
    pytester.runpytest(*args).assert_outcomes(passed=3)
    where = session_dir(pytester)
    records = where / "records.jsonl"
    lines = records.read_text().splitlines(keepends=True)
    kinds = [(json.loads(line)["kind"], json.loads(line)["model"]) for line in lines]
    # The baseline's iteration torn in half by a full disk, its end glued to it (as written before
    # each append repaired the tail); the replay's iteration an 18 M-character line (as written
    # before lines were cut to fit).
    torn = kinds.index(("iteration", "baseline"))
    lines[torn] = lines[torn][: len(lines[torn]) // 2] + lines.pop(torn + 1)
    huge = kinds.index(("iteration", "replay:good.json")) - 1
    lines[huge] = json.dumps(json.loads(lines[huge]) | {"response": "\x01" * 3_000_000}, ensure_ascii=False) + "\n"
    assert torn < len(lines) - 2 and len(lines[huge]) > 18_000_000
    records.write_text("".join(lines))

    out = pytester.path / "rebuilt"
    assert weirdml(["report", str(where), "-o", str(out), "--bootstrap", "100"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert [r["model"] for r in summary["runs"]] == ["reference"]
    assert {r["model"] for r in summary["incomplete"]} == {"baseline", "replay:good.json"}

    resumed = pytester.runpytest(*args, f"--weirdml-resume={where}")
    resumed.assert_outcomes(passed=3)
    resumed.stdout.fnmatch_lines([f"*{records} line {torn + 1} is not a whole record*"])
    summary = json.loads((where / "summary.json").read_text())
    scores = {r["model"]: r["score"] for r in summary["runs"]}
    assert set(scores) == {"reference", "baseline", "replay:good.json"} and summary["incomplete"] == []
    assert scores["reference"] == scores["replay:good.json"] == 1.0
    # Only the two damaged runs were made again; the whole one was not asked twice.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RecordsWarning)
        made = [r.model for r in SessionDir(where).iterations()]
    assert sorted(made) == ["baseline", "reference", "replay:good.json"]


def test_a_resume_replaces_planted_links_and_never_writes_through_them(
    pytester: pytest.Pytester, tiny: Path, base_args: list[str]
) -> None:
    args = ["--weirdml-model=reference", "--weirdml-runs=1", *base_args]
    pytester.runpytest(*args).assert_outcomes(passed=1)
    where = session_dir(pytester)
    outside = pytester.path / "outside"
    outside.mkdir()
    planted = ["summary.json", "report.html", "results.csv", "results_own_tasks.csv", "transcripts/tiny/reference-0.md"]
    for name in planted:
        target = outside / name.replace("/", "_")
        target.write_text("precious\n")
        (where / name).unlink()
        (where / name).symlink_to(target)
    pytester.runpytest(*args, f"--weirdml-resume={where}").assert_outcomes(passed=1)
    for name in planted:
        assert (outside / name.replace("/", "_")).read_text() == "precious\n", name
        assert not (where / name).is_symlink() and (where / name).stat().st_size > 0, name
    assert [r["model"] for r in json.loads((where / "summary.json").read_text())["runs"]] == ["reference"]
    # Records that are a link: a session appends to its own file only.
    kept = (where / "records.jsonl").read_text()
    (where / "records.jsonl").rename(outside / "records.jsonl")
    (where / "records.jsonl").symlink_to(outside / "records.jsonl")
    refused = pytester.runpytest(*args, f"--weirdml-resume={where}")
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    refused.stderr.fnmatch_lines([f"*--weirdml-resume: {where / 'records.jsonl'} is not a regular file*"])
    assert (outside / "records.jsonl").read_text() == kept


def test_a_renamed_copy_of_a_session_is_refused_naming_the_fix(
    pytester: pytest.Pytester, tiny: Path, base_args: list[str]
) -> None:
    args = ["--weirdml-model=reference", "--weirdml-runs=1", *base_args]
    pytester.runpytest(*args).assert_outcomes(passed=1)
    original = session_dir(pytester)
    copy = original.with_name("copy")
    shutil.copytree(original, copy)
    kept = (copy / "records.jsonl").read_text()
    refused = pytester.runpytest(*args, f"--weirdml-resume={copy}")
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    refused.stderr.fnmatch_lines(
        [
            f"*--weirdml-resume: {copy} holds the records of session {original.name}, not of copy (a renamed copy?)*"
            f"move the directory back to {original} and pass --weirdml-resume={original}*"
        ]
    )
    assert (copy / "records.jsonl").read_text() == kept
