"""benchmarks/gpu_check.sh --tiny: every stage of the GPU machine's check runs end to end here
(local sandbox, no GPU), so the script cannot rot before the day a GPU machine is lent."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_the_tiny_check_runs_every_stage_and_prints_one_table(tmp_path: Path) -> None:
    out = tmp_path / "gpu_check.json"
    # Not an xdist worker's leases: the check makes its own slot pool.
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}
    proc = subprocess.run(
        [
            "bash",
            str(ROOT / "benchmarks" / "gpu_check.sh"),
            "--tiny",
            "--out",
            str(out),
            "--cache",
            str(tmp_path / "cache"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=tmp_path,  # the wrapper finds the repository itself
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr

    # The table.
    lines = proc.stdout.splitlines()
    # Said before anything runs: what this machine has.
    assert lines[0].startswith("gpu_check (tiny): GPU -: no GPU;"), proc.stdout
    header = next(n for n, line in enumerate(lines) if line.startswith("stage "))
    for column in ("task", "ran", "CPU score", "GPU score", "GPU wall s", "diff", "note"):
        assert column in lines[header]
    rows = [[cell.strip() for cell in line.split("|")] for line in lines[header + 2 :] if "|" in line]
    assert [row[0] for row in rows] == ["contract", "reference", "replay"], proc.stdout
    contract, reference, replay = rows
    assert contract[2] == "local sandbox, GPU none" and contract[4] == "4/4 passed", contract
    assert reference[1:3] == ["tiny", "reference"] and float(reference[4]) == 1.0, reference
    assert replay[1] == "sequence_rules" and replay[2].startswith("calibration it "), replay
    assert float(replay[3]) > 0  # the score recorded by the blind run, on one CPU core
    assert replay[6] != "-"  # GPU minus CPU
    assert "done: scripts" in proc.stdout and "; ok" in proc.stdout

    # The same as JSON.
    report = json.loads(out.read_text())
    assert report["mode"] == "tiny" and report["ok"] is True and report["problems"] == []
    assert report["device"]["gpu"] is None and report["device"]["sandbox"] == "local"
    assert "cuda available False" in report["device"]["probe"]
    stages = report["stages"]
    assert stages["contract"]["ok"] and stages["contract"]["passed"] == stages["contract"]["cases"] == 4
    assert stages["contract"]["failed"] == 0
    assert Path(stages["contract"]["log"]) == out.with_name("gpu_check_contract.log")
    assert stages["reference"] == {**stages["reference"], "jobs": 1, "ran": 1, "errors": 0}
    assert stages["replay"] == {**stages["replay"], "jobs": 1, "ran": 1, "errors": 0}
    by_stage = {row["stage"]: row for row in report["rows"]}
    assert list(by_stage) == ["contract", "reference", "replay"]
    reference_row = by_stage["reference"]
    assert reference_row["task"] == "tiny" and reference_row["gpu_score"] > 0 and reference_row["exit_code"] == 0
    assert reference_row["time_limit_s"] == 20
    replay_row = by_stage["replay"]
    assert replay_row["time_limit_s"] == 5 and replay_row["data_seed"] == 0
    assert replay_row["run_dir"] == "tasks/sequence_rules/calibration" and replay_row["cpu_score"] > 0
    assert replay_row["diff"] == pytest.approx(replay_row["gpu_score"] - replay_row["cpu_score"], abs=1e-4)
    assert report["leases"]["overlapping"] == 0 and report["leases"]["count"] >= 3  # the probe and two scripts


def test_the_reference_reads_its_limit_from_the_top_of_its_code() -> None:
    import sys

    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from gpu_check import with_time_limit
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    head = 'import os\nos.environ["WEIRDML_TIME_LIMIT_S"] = "60"\n'
    assert with_time_limit("x = 1\n", 60) == head + "x = 1\n"
    # `from __future__` must stay first (after the docstring): the two lines come after it.
    code = '"""Doc."""\n\nfrom __future__ import annotations\n\nimport numpy\n'
    assert with_time_limit(code, 60) == '"""Doc."""\n\nfrom __future__ import annotations\n' + head + "\nimport numpy\n"
    for reference in sorted((ROOT / "tasks").glob("*/reference.py")):
        compile(with_time_limit(reference.read_text(), 60), str(reference), "exec")
