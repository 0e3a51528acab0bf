"""One results pipeline: records are the source of truth; a session's files and a rebuild from
its records are the same; runs a harness error or a killed session stopped are never scored."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from helpers import GOOD_SCRIPT, session_dir

from pytest_weirdml.cli import main as weirdml
from pytest_weirdml.records import IterationRecord, RunEnd, RunRecord, Usage
from pytest_weirdml.report.build import write_reports
from pytest_weirdml.report.export import OWN_RESULTS_FILE, RESULTS_FILE
from pytest_weirdml.report.published import PUBLISHED_TASKS
from pytest_weirdml.session import SessionDir, group_runs

# A client that answers once, then loses its provider: the run ends in a harness error.
DIES_AFTER_ONE = f"""
import pytest
from pytest_weirdml.errors import ModelError
from pytest_weirdml.models import Model, Response, resolve

class DiesAfterOne(Model):
    name = "dies"

    def generate(self, request):
        if request.iteration > 1:
            raise ModelError("the provider went away")
        return Response("```python\\n" + {GOOD_SCRIPT!r} + "```")

@pytest.fixture
def weirdml_model(weirdml_case):
    return DiesAfterOne() if weirdml_case.model == "baseline" else resolve(weirdml_case.model)
"""


@pytest.mark.parametrize("xdist", [False, True], ids=["one-process", "xdist"])
def test_live_and_rebuilt_summaries_are_equal_and_skip_the_errored_run(
    pytester: pytest.Pytester, tiny: Path, base_args: list[str], tmp_path: Path, xdist: bool
) -> None:
    pytester.makeconftest(DIES_AFTER_ONE)
    args = ["--weirdml-model=reference,baseline", "--weirdml-runs=1", "--weirdml-bootstrap=2000", *base_args]
    result = pytester.runpytest_subprocess("-n", "2", *args, timeout=300) if xdist else pytester.runpytest(*args)
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*ModelError: the provider went away*", "*1 run(s) hit a harness error*"])
    where = session_dir(pytester)
    runs = SessionDir(where).runs()
    statuses = [(r.model, r.status, len(r.iterations)) for r in runs]
    assert statuses == [("dies", "error", 1), ("reference", "finished", 1)]
    # The errored run's first iteration scored 1.0: scoring it would lift the model to 1.0.
    assert runs[0].iterations[0].score == 1.0

    assert weirdml(["report", str(where), "-o", str(tmp_path / "rebuilt"), "--bootstrap", "2000"]) == 0
    live = json.loads((where / "summary.json").read_text())
    rebuilt = json.loads((tmp_path / "rebuilt" / "summary.json").read_text())
    assert live == rebuilt
    assert list(live["models"]) == ["reference"] and [r["model"] for r in live["runs"]] == ["reference"]
    (error,) = live["errors"]
    assert (error["model"], error["task"], error["run"], error["iterations"]) == ("dies", "tiny", 0, 1)
    assert "ModelError: the provider went away" in error["error"]
    for name in ("results.csv", "results_own_tasks.csv"):
        assert (where / name).read_text() == (tmp_path / "rebuilt" / name).read_text()
    assert "dies" not in (where / "results_own_tasks.csv").read_text()


def test_a_session_whose_every_run_errored_still_says_so(
    pytester: pytest.Pytester, tiny: Path, base_args: list[str]
) -> None:
    pytester.makeconftest(DIES_AFTER_ONE)
    result = pytester.runpytest("--weirdml-model=baseline", "--weirdml-runs=2", *base_args)
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines(["*weirdml summary*", "no run finished", "2 run(s) hit a harness error*"])
    summary = json.loads((session_dir(pytester) / "summary.json").read_text())
    assert summary["models"] == {} and len(summary["errors"]) == 2


def _iteration(task: str, model: str, run: int, iteration: int, score: float, **extra: object) -> IterationRecord:
    return IterationRecord(
        task=task,
        model=model,
        run=run,
        iteration=iteration,
        prompt="p",
        response="r",
        code="print(1)\n",
        output="",
        output_bytes=0,
        exit_code=0,
        timed_out=False,
        duration_s=1.0,
        score=score,
        zero_reason=None,
        session="s",
        **extra,  # type: ignore[arg-type]
    )


def test_run_status_comes_from_the_records(tmp_path: Path) -> None:
    session = SessionDir(tmp_path / "s")
    session.append(_iteration("t", "m", 0, 1, 0.5))
    session.end_run("t", "m", 0, session="s")
    # Killed mid-run: iterations, no end.
    session.append(_iteration("t", "m", 1, 1, 0.9))
    # A harness error, then a resumed session went on: not ended again yet.
    session.append(_iteration("t", "m", 2, 1, 0.2))
    session.end_run("t", "m", 2, session="s", error="ModelError: gone")
    session.append(_iteration("t", "m", 2, 2, 0.4))
    # A harness error that stays.
    session.append(_iteration("t", "m", 3, 1, 0.7))
    session.end_run("t", "m", 3, session="s", error="SandboxError: broke")
    statuses = {r.run: (r.status, r.error) for r in session.runs()}
    assert statuses == {
        0: ("finished", None),
        1: ("incomplete", None),
        2: ("incomplete", None),
        3: ("error", "SandboxError: broke"),
    }
    built = write_reports(session.runs(), tmp_path / "out", resamples=500)
    summary = built.summary
    assert [r["run"] for r in summary["runs"]] == [0] and summary["models"]["m"]["overall"]["mean"] == 0.5
    assert [i["run"] for i in summary["incomplete"]] == [1, 2] and [e["run"] for e in summary["errors"]] == [3]
    assert summary["created"] == max(r.ended_at for r in session.runs())
    # A torn last line (killed mid-write) is dropped before the next append, not glued to it.
    with open(session.records_path, "a") as fh:
        fh.write('{"task": "t", "model"')
    SessionDir(session.path).end_run("t", "m", 1, session="s")
    assert {r.run: r.status for r in SessionDir(session.path).runs()}[1] == "finished"


def test_records_of_schema_1_still_read_as_finished_runs(tmp_path: Path) -> None:
    legacy = {
        **{k: v for k, v in json.loads(_iteration("t", "m", 0, 1, 0.75).to_json()).items() if k != "usage"},
        "schema": 1,
        "input_tokens": 10,
        "output_tokens": 5,
        "cost_usd": 0.01,
        "model_latency_s": 2.0,
    }
    del legacy["kind"]
    (tmp_path / "records.jsonl").write_text(json.dumps(legacy) + "\n")
    (run,) = SessionDir(tmp_path).runs()
    assert run.status == "finished" and run.score == 0.75
    assert run.iterations[0].usage == Usage(input_tokens=10, output_tokens=5, cost_usd=0.01, latency_s=2.0)


def _runs(tasks: list[str], scores: dict[str, float]) -> list[RunRecord]:
    runs = []
    for task in tasks:
        for run in range(2):
            it = _iteration(task, "m", run, 1, scores.get(task, 0.5) - 0.1 * run)
            runs.append(RunRecord(task, "m", run, [it], session="s", ended_at="2026-01-01T00:00:00+00:00"))
    return runs


def _csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def test_results_csv_of_the_six_bundled_tasks_has_no_avg_acc(tmp_path: Path) -> None:
    bundled = sorted(p.parent.name for p in (Path(__file__).parents[1] / "tasks").glob("*/task.toml"))
    assert {"shapes_easy", "shapes_hard", "digits_unsup", "chess_winners", "shuffle_easy", "shuffle_hard"} <= set(
        bundled
    )
    built = write_reports(_runs(bundled, {"shapes_easy": 0.9, "shuffle_easy": 0.7}), tmp_path, resamples=500)
    (row,) = _csv(tmp_path / RESULTS_FILE)
    assert row["avg_acc"] == row["avg_acc_standard_error"] == ""
    assert float(row["shapes_easy_acc"]) == pytest.approx(0.85) and row["kolmo_shuffle_acc"] == ""
    assert "shuffle_easy_acc" not in row
    # The tasks the published table lacks: their own file, its average over exactly its columns.
    own_rows = _csv(tmp_path / OWN_RESULTS_FILE)
    own = [t for t in bundled if t not in PUBLISHED_TASKS]
    assert list(own_rows[0])[3 : 3 + len(own)] == [f"{t}_acc" for t in own]
    means = [float(own_rows[0][f"{t}_acc"]) for t in own]
    assert float(own_rows[0]["avg_acc"]) == pytest.approx(sum(means) / len(means))
    assert built.summary["published_tasks"] == [t for t in PUBLISHED_TASKS if t in bundled]


def test_results_csv_averages_a_session_that_covers_the_published_table(tmp_path: Path) -> None:
    write_reports(_runs(list(PUBLISHED_TASKS), {"shapes_easy": 0.9}), tmp_path, resamples=500)
    (row,) = _csv(tmp_path / RESULTS_FILE)
    expected = sum(float(row[f"{t}_acc"]) for t in PUBLISHED_TASKS) / len(PUBLISHED_TASKS)
    assert float(row["avg_acc"]) == pytest.approx(expected) and float(row["avg_acc_standard_error"]) > 0
    assert not (tmp_path / OWN_RESULTS_FILE).exists()


def test_group_runs_keeps_the_last_copy_of_an_iteration() -> None:
    first, again = _iteration("t", "m", 0, 1, 0.1), _iteration("t", "m", 0, 1, 0.6)
    end = RunEnd("t", "m", 0, "finished", session="s")
    (run,) = group_runs([first, again, end])
    assert run.score == 0.6 and run.status == "finished"
