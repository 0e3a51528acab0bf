"""tools/try_task.py: a task author's one script against one task, in the harness's own sandbox."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from helpers import write_tiny_task

ROOT = Path(__file__).resolve().parents[1]
TOOL = ROOT / "tools" / "try_task.py"


def try_task(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cache = tmp_path / "cache"
    # the tool imports the plugin of this checkout, whatever else is installed
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    return subprocess.run(
        [sys.executable, str(TOOL), *args, "--cache", str(cache)], capture_output=True, text=True, timeout=300, env=env
    )


def test_the_reference_scores_as_the_harness_scores_it(tmp_path: Path) -> None:
    task = write_tiny_task(tmp_path)
    run = try_task(tmp_path, str(task), "--cpus", "0")
    assert run.returncode == 0, run.stderr
    last = run.stdout.strip().splitlines()[-1]
    assert last.endswith("accuracy 1.0000"), run.stdout
    assert "exit 0" in last


def test_a_crash_scores_zero_with_the_reason_and_keeps_its_output(tmp_path: Path) -> None:
    task = write_tiny_task(tmp_path)
    script = tmp_path / "crash.py"
    # it writes perfect predictions, then crashes: the protocol scores a crash 0 whatever it wrote
    script.write_text(
        "import numpy as np\nx = np.load('data/test_x.npy')\n"
        "np.savetxt('results/test_preds.txt', x[:, 0] % 2, fmt='%d')\nprint('wrote them')\nraise SystemExit(3)\n"
    )
    run = try_task(tmp_path, str(task), str(script))
    assert run.returncode == 0, run.stderr
    assert "wrote them" in run.stdout
    assert run.stdout.strip().endswith("accuracy 0.0000 (the script crashed (exit code 3))"), run.stdout


def test_a_bad_core_list_names_the_fix(tmp_path: Path) -> None:
    run = try_task(tmp_path, str(write_tiny_task(tmp_path)), "--cpus", "one")
    assert run.returncode == 2
    assert "--cpus takes core numbers separated by commas, e.g. 1 or 0,1; not 'one'" in run.stderr
