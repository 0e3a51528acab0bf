"""The harness's own cost per iteration: time beyond the script's own run.

Runs one trivial script (load a small array, write predictions) N times three ways and prints
medians:
  raw      `python solution.py` in a prepared directory (the script's own run)
  sandbox  LocalSandbox.run (fresh directory, bubblewrap or plain subprocess, limits, capture)
  loop     a whole iteration of run_task (model call, extraction, sandbox, scoring, record append)
and, with --reference TASK, the wall time of one reference iteration of that task.

    python benchmarks/harness_overhead.py [-n 20] [--reference tasks/shapes_easy]
    python benchmarks/harness_overhead.py --tiny   # CI: two runs each, checks the script still runs
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from helpers import GOOD_SCRIPT, write_replay, write_tiny_task  # noqa: E402

from pytest_weirdml.loop import LoopSettings, run_task  # noqa: E402
from pytest_weirdml.models import resolve  # noqa: E402
from pytest_weirdml.sandbox import Limits  # noqa: E402
from pytest_weirdml.sandbox.local import LocalSandbox  # noqa: E402
from pytest_weirdml.session import SessionDir  # noqa: E402
from pytest_weirdml.tasks import build_data, load_task  # noqa: E402


def raw_runs(data_dir: Path, n: int) -> list[float]:
    times = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        shutil.copytree(data_dir, work / "data")
        (work / "results").mkdir()
        (work / "solution.py").write_text(GOOD_SCRIPT)
        for _ in range(n):
            start = time.perf_counter()
            subprocess.run([sys.executable, "-s", "solution.py"], cwd=work, check=True, capture_output=True)
            times.append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=20)
    parser.add_argument("--reference", type=Path, help="also time one reference iteration of this task")
    parser.add_argument("--tiny", action="store_true", help="seconds, not minutes: two runs each")
    args = parser.parse_args()
    if args.tiny:
        args.n = 2
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        spec = load_task(write_tiny_task(root, iterations=args.n))
        data = build_data(spec, root / "cache")
        sandbox = LocalSandbox()
        sandbox.environment()
        raw = raw_runs(data.public_dir, args.n)
        boxed = []
        for _ in range(args.n):
            start = time.perf_counter()
            sandbox.run(GOOD_SCRIPT, data.public_dir, Limits(time_s=60))
            boxed.append(time.perf_counter() - start)
        model = resolve(f"replay:{write_replay(root / 'replay.json', [GOOD_SCRIPT] * args.n)}")
        store = SessionDir(root / "session")
        run = run_task(spec, data, model, sandbox, run=0, settings=LoopSettings(), on_iteration=store.append)
        loop = [it.wall_s for it in run.iterations]
        assert all(it.score == 1.0 for it in run.iterations)
    med = {name: statistics.median(v) for name, v in (("raw", raw), ("sandbox", boxed), ("loop", loop))}
    mode = "bubblewrap" if sandbox.isolated else "plain subprocess"
    print(f"local sandbox ({mode}), {args.n} runs each, medians:")
    for name, label in (
        ("raw", "raw python solution.py"),
        ("sandbox", "sandbox run"),
        ("loop", "whole loop iteration"),
    ):
        extra = f"  (overhead {1000 * (med[name] - med['raw']):.1f} ms)" if name != "raw" else ""
        print(f"  {label:<23}: {med[name] * 1000:7.1f} ms{extra}")
    print(f"  ratio loop / raw       : {med['loop'] / med['raw']:.2f}x")
    if args.reference:
        with tempfile.TemporaryDirectory() as tmp:
            spec = load_task(args.reference)
            cache = Path.home() / ".cache" / "pytest-weirdml" / "data"
            data = build_data(spec, cache)
            run = run_task(spec, data, resolve("reference"), sandbox, run=0)
            it = run.iterations[0]
            print(
                f"reference iteration of {spec.name}: wall {it.wall_s:.1f} s, script {it.duration_s:.1f} s, "
                f"accuracy {it.score:.4f}"
            )


if __name__ == "__main__":
    main()
