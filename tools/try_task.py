"""Build a task's data and run one script against it, outside pytest (for task authors).

    python tools/try_task.py tasks/shapes_easy                 # runs reference.py
    python tools/try_task.py tasks/shapes_easy my_solution.py  # runs another script
    python tools/try_task.py tasks/shapes_easy --seed 1        # on the data of another seed
    python tools/try_task.py tasks/shapes_easy --cpus 1        # on core 1 only (as --weirdml-cores-per-script)

Prints the data build time, the script's output, its wall time and its score. The script runs
in the harness's own sandbox (``--sandbox``, local by default: its environment, limits and
isolation) and is scored as the harness scores it (a timeout or a crash scores 0); its output is
redacted as the model would read it.
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from pathlib import Path

from pytest_weirdml.loop import run_and_score
from pytest_weirdml.sandbox import Limits
from pytest_weirdml.sandbox.choose import open_sandbox, sandbox_names
from pytest_weirdml.tasks import build_data, load_task


def cpu_list(text: str) -> tuple[int, ...]:
    try:
        return tuple(sorted({int(part) for part in text.split(",")}))
    except ValueError:
        message = f"--cpus takes core numbers separated by commas, e.g. 1 or 0,1; not {text!r}"
        raise argparse.ArgumentTypeError(message) from None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("task_dir", type=Path)
    parser.add_argument("script", type=Path, nargs="?")
    parser.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "pytest-weirdml" / "data")
    parser.add_argument("--seed", type=int, help="data seed (default: the task's own)")
    parser.add_argument("--sandbox", default="local", choices=sandbox_names(), help="default: local")
    parser.add_argument("--cpus", type=cpu_list, default=(), help="cores the script may use (default: all)")
    args = parser.parse_args()
    spec = load_task(args.task_dir)
    if args.seed is not None:
        spec = dataclasses.replace(spec, seed=args.seed)
    start = time.perf_counter()
    data = build_data(spec, args.cache)
    print(f"data: {data.root} ({time.perf_counter() - start:.2f} s)", flush=True)
    script = args.script or spec.reference_path
    limits = Limits(time_s=spec.time_limit_s, cpus=args.cpus)
    sandbox = open_sandbox(args.sandbox)
    try:
        result, score = run_and_score(script.read_text(encoding="utf-8"), sandbox, data, limits, data.answers())
    finally:
        sandbox.close()
    print(result.output, end="" if result.output.endswith("\n") or not result.output else "\n")
    for note in result.notes:
        print(f"[harness] {note}")
    status = "TIMED OUT" if result.timed_out else f"exit {result.exit_code}"
    print(f"{script}: {status}, {result.duration_s:.1f} s of {spec.time_limit_s:.0f} s ({sandbox.isolation}), ", end="")
    print(f"{spec.metric} {score.accuracy:.4f}" + (f" ({score.zero_reason})" if score.zero_reason else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
