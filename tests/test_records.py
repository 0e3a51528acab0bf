"""The records: a run's plan written once as its start, iterations that carry only what is per
submission, and sessions recorded under the older schemas read back into the same runs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from helpers import read_iterations, read_jsonl, read_plans, session_dir

from pytest_weirdml.cli import main as weirdml
from pytest_weirdml.records import SCHEMA_VERSION, IterationRecord, RunPlan, RunStart, parse_record
from pytest_weirdml.session import SessionDir

# A session recorded in schema 2 (the conditions copied into every iteration), with the
# transcripts that session wrote when it ended and the summary.json that schema's own code
# rebuilds from it (with the isolation and unscored fields added since it was recorded):
# reference, baseline, a replay with a crash and a missing code block, and a replay that errors
# before its first answer.
SCHEMA_2 = Path(__file__).parent / "fixtures" / "schema2" / "20261201-214114-32427"


def _files(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*")) if p.is_file()}


def test_a_session_recorded_in_schema_2_rebuilds_the_summary_and_transcripts_it_wrote(tmp_path: Path) -> None:
    session = tmp_path / SCHEMA_2.name
    session.mkdir()
    shutil.copy(SCHEMA_2 / "records.jsonl", session / "records.jsonl")
    assert {json.loads(line)["schema"] for line in (session / "records.jsonl").read_text().splitlines()} == {2}
    assert weirdml(["report", str(session), "-o", str(tmp_path / "rebuilt")]) == 0
    written = json.loads((SCHEMA_2 / "summary.json").read_text())
    rebuilt = json.loads((tmp_path / "rebuilt" / "summary.json").read_text())
    assert rebuilt == written
    assert len(written["runs"]) == 6 and len(written["errors"]) == 2
    assert _files(tmp_path / "rebuilt" / "transcripts") == _files(SCHEMA_2 / "transcripts")
    # The conditions the old iterations carried are the runs' plans.
    runs = SessionDir(session).runs()
    assert all(run.plan is not None for run in runs if run.iterations)
    replay = next(run for run in runs if run.model == "replay:answers.json")
    assert replay.plan is not None and replay.plan.iterations_planned == 3 and replay.plan.sandbox == "local"
    assert replay.system_prompt and "several iterations" in replay.system_prompt


def test_the_plan_is_written_once_per_run_and_iterations_carry_only_their_own(
    pytester: pytest.Pytester, tiny: Path, base_args: list[str]
) -> None:
    pytester.runpytest("--weirdml-model=reference,baseline", "--weirdml-runs=2", *base_args).assert_outcomes(passed=4)
    records = read_jsonl(session_dir(pytester) / "records.jsonl")
    kinds = [(r["kind"], r["model"], r["run"]) for r in records]
    # Per run: its start, its one iteration, its end, in that order.
    for model in ("reference", "baseline"):
        for run in (0, 1):
            mine = [kind for kind, m, r in kinds if (m, r) == (model, run)]
            assert mine == ["run_start", "iteration", "run_end"]
    assert {r["schema"] for r in records} == {SCHEMA_VERSION} == {3}
    for plan in read_plans(session_dir(pytester) / "records.jsonl"):
        assert (plan["iterations_planned"], plan["time_limit_s"], plan["protocol"]) == (1, 20.0, "published")
        assert plan["sandbox"] == "local" and plan["hardware"].startswith("CPU only")
        assert plan["memory_bytes"] == 8 << 30 and plan["results_bytes"] == 64 << 20 and plan["output_bytes"] > 0
        assert "-seed0-" in plan["data_key"] and plan["data_seed"] == 0 and plan["max_output_tokens"] is None
    moved = {"protocol", "data_key", "data_seed", "iterations_planned", "time_limit_s", "hardware", "system_prompt"}
    assert all(not moved & set(r) for r in read_iterations(session_dir(pytester) / "records.jsonl"))


def test_a_run_that_errors_before_its_first_iteration_keeps_its_conditions(
    pytester: pytest.Pytester, tiny: Path, base_args: list[str]
) -> None:
    (pytester.path / "empty.jsonl").write_text("")
    result = pytester.runpytest("--weirdml-model=replay:empty.jsonl", "--weirdml-runs=1", *base_args)
    result.assert_outcomes(errors=1)
    where = session_dir(pytester)
    records = read_jsonl(where / "records.jsonl")
    assert [r["kind"] for r in records] == ["run_start", "run_end"]
    assert records[1]["status"] == "error" and "no recorded response" in records[1]["error"]
    (run,) = SessionDir(where).runs()
    assert run.status == "error" and run.iterations == []
    assert run.conditions()["protocol"] == "published" and run.conditions()["iterations_planned"] == 2
    assert run.conditions()["time_limit_s"] == 20.0 and run.conditions()["sandbox"] == "local"
    assert run.system_prompt and "several iterations" in run.system_prompt


def test_records_round_trip_and_old_iterations_hold_their_plan() -> None:
    start = RunStart("t", "m", 0, RunPlan(iterations_planned=5, protocol="published", data_key="k"), session="s")
    assert parse_record(start.to_json()) == start
    old = {"task": "t", "model": "m", "run": 0, "iteration": 1, "prompt": "", "response": "", "code": None}
    old |= {"output": "", "output_bytes": 0, "exit_code": None, "timed_out": False, "duration_s": 0.0}
    old |= {"score": 0.5, "zero_reason": None, "schema": 2, "protocol": "published", "time_limit_s": 60.0}
    parsed = parse_record(json.dumps(old))
    assert isinstance(parsed, IterationRecord) and parsed.legacy_plan is not None
    assert (parsed.legacy_plan.protocol, parsed.legacy_plan.time_limit_s) == ("published", 60.0)
    # Written again, an iteration carries none of it.
    assert "legacy_plan" not in json.loads(parsed.to_json()) and "protocol" not in json.loads(parsed.to_json())
    with pytest.raises(ValueError, match="not a record"):
        parse_record(json.dumps({"kind": "run_start", "task": "t", "model": "m", "run": 0}))
