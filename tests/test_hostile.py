"""Hostile scripts, submitted through the replay model: each is contained, scored 0 with its
reason, and the run goes on to the next iteration."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import GOOD_SCRIPT, needs_bwrap, read_iterations, session_dir, write_replay, write_tiny_task

from pytest_weirdml.sandbox.local import bwrap_works

SECRET = "sk-planted-0123456789abcdef"

ENDLESS = """
import subprocess, time
# A child that tries to outlive the script, then a loop that never ends.
subprocess.Popen(["sleep", "987"], start_new_session=True)
while True:
    time.sleep(0.1)
"""

FLOOD = """
import sys
chunk = "x" * 1023 + "\\n"
for _ in range(10 * 1024):
    sys.stdout.write(chunk)
"""

READ_KEY = """
import os, pathlib
print("KEY=" + os.environ.get("WEIRDML_TEST_API_KEY", "absent"))
found = [p for p in pathlib.Path("/proc").glob("*/environ") if b"sk-planted" in p.read_bytes()]
print("FOUND", found)
"""

READ_HIDDEN = """
import pathlib
target = pathlib.Path({hidden!r})
print("hidden visible:", target.exists())
print(target.read_bytes()[:20])
"""


def _hostile_session(pytester: pytest.Pytester, base_args: list[str], scripts: list[str]):  # type: ignore[no-untyped-def]
    if not (pytester.path / "tasks" / "tiny").exists():
        write_tiny_task(pytester.path, time_limit=3, iterations=len(scripts))
    replay = write_replay(pytester.path / "hostile.json", scripts)
    return pytester.runpytest(f"--weirdml-model=replay:{replay}", "--weirdml-runs=1", *base_args)


@needs_bwrap
def test_hostile_scripts_are_contained_and_scored_zero(
    pytester: pytest.Pytester, base_args: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WEIRDML_TEST_API_KEY", SECRET)
    cache = pytester.path / "cache"
    # Build the data first so the hostile script can name the exact path of the hidden answers.
    from pytest_weirdml.tasks import build_data, load_task

    task_dir = write_tiny_task(pytester.path, time_limit=3, iterations=5)
    hidden = build_data(load_task(task_dir), cache).answers_path
    assert hidden.is_file()
    scripts = [ENDLESS, FLOOD, READ_KEY, READ_HIDDEN.format(hidden=str(hidden)), GOOD_SCRIPT]
    start = time.monotonic()
    result = _hostile_session(pytester, base_args, scripts)
    result.assert_outcomes(passed=1)
    records = read_iterations(session_dir(pytester) / "records.jsonl")
    assert [r["iteration"] for r in records] == [1, 2, 3, 4, 5]
    endless, flood, key, peek, good = records

    assert endless["timed_out"] and endless["score"] == 0.0
    assert endless["zero_reason"].startswith("timed out")
    assert 3.0 <= endless["duration_s"] < 6.0
    assert subprocess.run(["pgrep", "-f", "sleep 987"], capture_output=True).returncode == 1, "a child outlived it"

    assert flood["output_bytes"] == 10 * 1024 * 1024
    assert len(flood["output"]) < 1_100_000 and "bytes of output not kept" in flood["output"]
    # The model is fed at most the protocol's head and tail.
    assert len(key["prompt"]) < 9_000 and "characters cut" in key["prompt"]

    assert "KEY=absent" in key["output"] and "FOUND []" in key["output"]
    assert SECRET not in (session_dir(pytester) / "records.jsonl").read_text()

    assert "hidden visible: False" in peek["output"] and peek["zero_reason"].startswith("the script crashed")
    assert good["score"] == 1.0
    assert time.monotonic() - start < 60


def test_wrong_shape_and_malformed_predictions_score_zero_with_reason(
    pytester: pytest.Pytester, base_args: list[str]
) -> None:
    scripts = [
        "import numpy as np\nnp.savetxt('results/test_preds.txt', np.zeros(99), fmt='%d')",
        "open('results/test_preds.txt', 'w').write('cat\\ndog\\n')",
        "open('results/test_preds.txt', 'w').write('\\n'.join(['0.5'] * 100))",
        "open('results/elsewhere.txt', 'w').write('1')",
        "import numpy as np\nx = np.load('data/test_x.npy')\n"
        "np.savetxt('results/test_preds.txt', (x[:, :1] % 2).T, fmt='%d')",
    ]
    result = _hostile_session(pytester, base_args, scripts)
    result.assert_outcomes(passed=1)
    reasons = [r["zero_reason"] for r in read_iterations(session_dir(pytester) / "records.jsonl")]
    assert reasons[0] == "wrong shape: predictions (99,), expected (100,)"
    assert reasons[1].startswith("malformed predictions in results/test_preds.txt")
    assert reasons[2] == "malformed predictions in results/test_preds.txt: values must be integers"
    assert reasons[3] == "no predictions: results/test_preds.txt was not written"
    # Scores are over flattened arrays: one row of 100 is as good as 100 rows of one.
    assert reasons[4] is None


@needs_bwrap
def test_writing_into_data_is_refused(pytester: pytest.Pytester, base_args: list[str]) -> None:
    scripts = ["open('data/train_y.npy', 'wb').write(b'gone')", GOOD_SCRIPT]
    result = _hostile_session(pytester, base_args, scripts)
    result.assert_outcomes(passed=1)
    first, second = read_iterations(session_dir(pytester) / "records.jsonl")
    assert "Read-only file system" in first["output"] and first["zero_reason"].startswith("the script crashed")
    assert second["score"] == 1.0


def test_sigkill_mid_run_keeps_every_finished_iteration(pytester: pytest.Pytester, base_args: list[str]) -> None:
    scripts = [GOOD_SCRIPT, GOOD_SCRIPT, "import time\nprint('working', flush=True)\ntime.sleep(600)"]
    write_tiny_task(pytester.path, time_limit=900, iterations=len(scripts))
    replay = write_replay(pytester.path / "slow.json", scripts)
    cmd = [sys.executable, "-m", "pytest", f"--weirdml-model=replay:{replay}", "--weirdml-runs=1", *base_args]
    proc = subprocess.Popen(cmd, cwd=pytester.path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    records_file = None
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        found = list((pytester.path / "reports").glob("*/records.jsonl"))
        if found and len(found[0].read_text().splitlines()) == 2:
            records_file = found[0]
            break
        time.sleep(0.2)
    assert records_file is not None, "the first two iterations never reached the records file"
    time.sleep(1.0)  # the third script is now sleeping inside the sandbox
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    records = read_iterations(records_file)
    assert [(r["iteration"], r["score"]) for r in records] == [(1, 1.0), (2, 1.0)]
    time.sleep(0.5)
    if bwrap_works()[0]:
        # bubblewrap's --die-with-parent takes the sandbox down with the killed session.
        leftover = subprocess.run(["pgrep", "-f", "time.sleep.600"], capture_output=True)
        assert leftover.returncode == 1, "the sandboxed script outlived the session"


def test_resume_continues_a_killed_session_where_it_stopped(pytester: pytest.Pytester, base_args: list[str]) -> None:
    write_tiny_task(pytester.path, time_limit=900, iterations=3)
    slow = write_replay(pytester.path / "slow.json", [GOOD_SCRIPT, GOOD_SCRIPT, "import time\ntime.sleep(600)"])
    cmd = [sys.executable, "-m", "pytest", f"--weirdml-model=replay:{slow}", "--weirdml-runs=1", *base_args]
    proc = subprocess.Popen(cmd, cwd=pytester.path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        found = list((pytester.path / "reports").glob("*/records.jsonl"))
        if found and len(found[0].read_text().splitlines()) == 2:
            break
        time.sleep(0.2)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    where = session_dir(pytester)
    # The same file name, now with answers that would score 0 if iterations 1 and 2 were asked again.
    write_replay(pytester.path / "slow.json", ["", "", GOOD_SCRIPT])
    result = pytester.runpytest(
        f"--weirdml-model=replay:{slow}", "--weirdml-runs=1", f"--weirdml-resume={where}", *base_args
    )
    result.assert_outcomes(passed=1)
    records = read_iterations(where / "records.jsonl")
    assert [(r["iteration"], r["score"]) for r in records] == [(1, 1.0), (2, 1.0), (3, 1.0)]
    # The model saw its earlier answers and their feedback before the third submission.
    assert records[2]["prompt"].endswith("Test accuracy: 1.0000.")
    result.stdout.fnmatch_lines(["tiny*replay:slow.json*1*1.000*"])
    # A finished run is not run again.
    again = pytester.runpytest(
        f"--weirdml-model=replay:{slow}", "--weirdml-runs=1", f"--weirdml-resume={where}", *base_args
    )
    again.assert_outcomes(passed=1)
    assert len(read_iterations(where / "records.jsonl")) == 3


def test_resume_needs_a_session_directory(pytester: pytest.Pytester, tiny: Path) -> None:
    result = pytester.runpytest("--weirdml-resume=nowhere")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--weirdml-resume: */nowhere holds no records.jsonl*"])
