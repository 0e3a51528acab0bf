"""Build a task's data and run one script against it, outside pytest (for task authors).

    python tools/try_task.py tasks/shapes_easy                 # runs reference.py
    python tools/try_task.py tasks/shapes_easy my_solution.py  # runs another script
    python tools/try_task.py tasks/shapes_easy --seed 1        # on the data of another seed

Prints the data build time, the script's output, its wall time and its accuracy. The script
runs as a plain subprocess in a fresh directory with data/ and results/, like the sandbox.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pytest_weirdml.tasks import build_data, load_task, score_predictions


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("task_dir", type=Path)
    parser.add_argument("script", type=Path, nargs="?")
    parser.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "pytest-weirdml" / "data")
    parser.add_argument("--seed", type=int, help="data seed (default: the task's own)")
    args = parser.parse_args()
    spec = load_task(args.task_dir)
    if args.seed is not None:
        spec = dataclasses.replace(spec, seed=args.seed)
    start = time.perf_counter()
    data = build_data(spec, args.cache)
    print(f"data: {data.root} ({time.perf_counter() - start:.2f} s)")
    script = args.script or spec.reference_path
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        shutil.copytree(data.public_dir, work / "data")
        (work / "results").mkdir()
        shutil.copy(script, work / "solution.py")
        start = time.perf_counter()
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": tmp, "PYTHONUNBUFFERED": "1"}
        try:
            proc = subprocess.run([sys.executable, "solution.py"], cwd=work, env=env, timeout=spec.time_limit_s)
            status = f"exit {proc.returncode}"
        except subprocess.TimeoutExpired:
            status = "TIMED OUT"
        elapsed = time.perf_counter() - start
        preds = work / "results" / "test_preds.txt"
        score = score_predictions(preds.read_bytes() if preds.is_file() else None, data.answers())
    print(f"{script}: {status}, {elapsed:.1f} s of {spec.time_limit_s:.0f} s, accuracy {score.accuracy:.4f}", end="")
    print(f" ({score.zero_reason})" if score.zero_reason else "")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
