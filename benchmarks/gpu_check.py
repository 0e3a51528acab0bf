"""The GPU machine's check, in one go: the Docker sandbox's contract with a GPU lease, every task's
reference on the GPU, and a replay of each shipped blind run's best script on the GPU, then one
table (and the same as JSON) of CPU against GPU scores.

    bash benchmarks/gpu_check.sh                 # on the GPU machine, after `bash scripts/setup.sh`
    python benchmarks/gpu_check.py --tiny        # CI: local sandbox, no GPU, seconds

Stages, all through the harness's own code:
  contract   the shipped sandbox contract (``pytest_weirdml.sandbox.contract``) as a pytest
             subprocess on a module written for it: the chosen backend only, every script run
             holding the GPU (the contract itself never names one); it runs beside the scripts.
  reference  each task's reference (``task.toml``'s ``reference``, else reference.py) on the
             task's data, with ``WEIRDML_TIME_LIMIT_S`` set at the top of the code and the same
             limit for the sandbox (``--reference-limit``, 60 s).
  replay     each blind run shipped in ``tasks/<task>/calibration/`` and ``calibration/run*/``:
             the script of its best iteration (``--all-iterations``: every one) on the run's data
             seed, under the run's time limit; the CPU score is the one recorded.
The references and the replays share one pool of ``--parallel`` slots (default 6), all on the
one GPU, each slot with its own share of the cores (a ``SlotPool`` leased by a
``LeasedSandbox``, as a session leases them); a script reaches the sandbox through
``loop.run_and_score``, exactly as ``tools/try_task.py`` runs one. No script starts that could
not end within ``--budget-s`` (450 s) of the start; those are listed as not run.

Before anything runs it says whether there is a GPU and a Docker sandbox, and exits 2 when either
is missing (outside ``--tiny``); a probe script then checks that sandboxed scripts see the GPU
(when they do not, no script runs, the contract still ends, and it exits 3). Exit 1 when the
contract fails or a script could not be run at all.
"""

from __future__ import annotations

import argparse
import ast
import concurrent.futures
import dataclasses
import json
import multiprocessing
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import warnings
import xml.etree.ElementTree as ET
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pytest_weirdml.errors import SandboxError, TaskError
from pytest_weirdml.loop import run_and_score
from pytest_weirdml.sandbox import Limits, Sandbox, cache_home, leases
from pytest_weirdml.sandbox.choose import open_sandbox, sandbox_names
from pytest_weirdml.sandbox.leased import LeasedSandbox
from pytest_weirdml.sandbox.pool import Slot, SlotPool, cpu_slots, overlapping, read_leases
from pytest_weirdml.session import read_runs
from pytest_weirdml.tasks import REFERENCE_FILE, TaskData, build_data, load_task

ROOT = Path(__file__).resolve().parents[1]
TASKS = ROOT / "tasks"
# The shipped blind run the tiny mode replays (its data builds in about a second).
TINY_REPLAY_TASK = "sequence_rules"
# The contract cases the tiny mode runs: a few seconds on the local backend.
TINY_CONTRACT = (
    "test_good_script_returns_predictions or test_crash_is_the_scripts_outcome"
    " or test_endless_loop_is_killed_at_the_limit or test_data_is_read_only"
)
# Seconds a script's run may take beyond its time limit (container start, copies, scoring).
RUN_SLACK_S = 15.0
COLUMNS = ("stage", "task", "ran", "CPU score", "GPU score", "GPU wall s", "diff", "note")

CONTRACT_MODULE = '''\
"""The sandbox contract on {backend!r}, every script run holding GPU {gpu!r} (written by
benchmarks/gpu_check.py)."""

import warnings

import pytest

from pytest_weirdml.errors import SandboxError
from pytest_weirdml.sandbox.choose import open_sandbox
from pytest_weirdml.sandbox.contract import *  # noqa: F403

WEIRDML_CONTRACT_BACKENDS = [{backend!r}]
GPU = {gpu!r}


@pytest.fixture(scope="module")
def weirdml_open_backend():
    def open_backend(name):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                box = open_sandbox(name)
        except SandboxError as exc:
            pytest.fail(f"{{name}} sandbox unavailable: {{exc}}")
        if GPU is not None:
            inner = box.run

            def run(code, data_dir, limits, gpu=None):
                return inner(code, data_dir, limits, gpu=GPU if gpu is None else gpu)

            box.run = run
        return box

    return open_backend
'''

PROBE = """\
import torch
ok = torch.cuda.is_available()
print("PROBE", ok, torch.cuda.device_count() if ok else 0, torch.__version__, torch.version.cuda,
      torch.cuda.get_device_name(0) if ok else "-", sep="|")
"""


def with_time_limit(code: str, seconds: float) -> str:
    """``code`` with ``import os`` and ``os.environ["WEIRDML_TIME_LIMIT_S"] = "<seconds>"`` at its
    top: after its docstring and ``from __future__`` imports, which must come first."""
    lines = code.splitlines(keepends=True)
    after = 0
    try:
        body = ast.parse(code).body
    except SyntaxError:
        body = []
    for i, node in enumerate(body):
        docstring = i == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
        future = isinstance(node, ast.ImportFrom) and node.module == "__future__"
        if not (docstring or future):
            break
        after = node.end_lineno or node.lineno
    head = "".join(lines[:after])
    if head and not head.endswith("\n"):
        head += "\n"
    return f'{head}import os\nos.environ["WEIRDML_TIME_LIMIT_S"] = "{seconds:g}"\n' + "".join(lines[after:])


@dataclasses.dataclass
class Job:
    """One script to run: a reference or a replayed blind-run iteration."""

    stage: str
    task: str
    task_dir: Path
    ran: str
    code: str | None
    seed: int
    limits: Limits
    estimate_s: float
    cpu_score: float | None = None
    note: str = ""
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def build_key(self) -> tuple[str, int]:
        return str(self.task_dir), self.seed

    def row(self, **fields: Any) -> dict[str, Any]:
        row: dict[str, Any] = {
            "stage": self.stage,
            "task": self.task,
            "ran": self.ran,
            "cpu_score": self.cpu_score,
            "gpu_score": None,
            "gpu_wall_s": None,
            "diff": None,
            "note": self.note,
            "time_limit_s": self.limits.time_s,
            "data_seed": self.seed,
            **self.extra,
        }
        row.update(fields)
        if row["gpu_score"] is not None and row["cpu_score"] is not None and self.stage == "replay":
            row["diff"] = round(row["gpu_score"] - row["cpu_score"], 4)
        return row


def broken(stage: str, task_dir: Path, exc: Exception, ran: str = "-") -> Job:
    """A job that cannot even be planned (a broken task, an unreadable records file): an error row."""
    error = f"{type(exc).__name__}: {exc}"
    return Job(
        stage, task_dir.name, task_dir, ran, None, 0, Limits(), 0.0, note=f"ERROR {error}", extra={"error": error}
    )


def calibration_dirs(task_dir: Path) -> list[Path]:
    """``calibration/`` and ``calibration/run<N>/`` (in N's order) that hold records."""
    base = task_dir / "calibration"
    runs = sorted(base.glob("run*"), key=lambda p: (int(p.name[3:]) if p.name[3:].isdigit() else 1 << 30, p.name))
    return [d for d in [base, *runs] if (d / "records.jsonl").is_file()]


def reference_jobs(task_dirs: Sequence[Path], limit_s: float, cpu_scores: dict[str, float]) -> list[Job]:
    jobs = []
    for task_dir in task_dirs:
        try:
            spec = load_task(task_dir)
            code = with_time_limit(spec.reference_path.read_text(encoding="utf-8"), limit_s)
        except (TaskError, OSError) as exc:
            jobs.append(broken("reference", task_dir, exc))
            continue
        ran = "reference" if spec.reference == REFERENCE_FILE else f"reference ({spec.reference})"
        jobs.append(
            Job(
                "reference",
                spec.name,
                task_dir,
                ran,
                code,
                spec.seed,
                Limits(time_s=limit_s),
                estimate_s=0.9 * limit_s,
                cpu_score=cpu_scores.get(spec.name),
            )
        )
    return jobs


def replay_jobs(
    task_dirs: Sequence[Path], limit_s: float | None, all_iterations: bool, max_replays: int | None
) -> list[Job]:
    jobs: list[Job] = []
    for task_dir in task_dirs:
        try:
            spec = load_task(task_dir)
        except TaskError as exc:
            jobs.append(broken("replay", task_dir, exc))
            continue
        for directory in calibration_dirs(task_dir):
            try:
                runs = read_runs([directory])
            except (ValueError, OSError) as exc:
                jobs.append(broken("replay", task_dir, exc, directory.relative_to(task_dir).as_posix()))
                continue
            for run in runs:
                plan = run.plan
                seed = spec.seed if plan is None or plan.data_seed is None else plan.data_seed
                default = Limits()
                limits = Limits(
                    time_s=limit_s or (plan.time_limit_s if plan and plan.time_limit_s else spec.time_limit_s),
                    memory_bytes=(plan.memory_bytes if plan else 0) or default.memory_bytes,
                    output_bytes=(plan.output_bytes if plan else 0) or default.output_bytes,
                    results_bytes=(plan.results_bytes if plan else 0) or default.results_bytes,
                )
                note = ""
                if plan and plan.data_key and plan.data_key != spec.data_key(seed):
                    note = f"data differs from the run's ({plan.data_key}, now {spec.data_key(seed)})"
                iterations = run.iterations
                if not all_iterations and iterations:
                    iterations = [max(iterations, key=lambda it: it.score)]
                where = directory.relative_to(task_dir).as_posix() + (f" run {run.run}" if len(runs) > 1 else "")
                for it in iterations:
                    jobs.append(
                        Job(
                            "replay",
                            spec.name,
                            task_dir,
                            f"{where} it {it.iteration}",
                            it.code,
                            seed,
                            limits,
                            estimate_s=min(it.duration_s, limits.time_s),
                            cpu_score=it.score,
                            note=note if it.code is not None else "no code in this iteration",
                            extra={
                                "run_dir": str(
                                    directory.relative_to(ROOT) if directory.is_relative_to(ROOT) else directory
                                ),
                                "model": run.model,
                                "run": run.run,
                                "iteration": it.iteration,
                                "cpu_duration_s": it.duration_s,
                                "cpu_hardware": plan.hardware if plan else "",
                            },
                        )
                    )
                    if max_replays is not None and len(jobs) >= max_replays:
                        return jobs
    return jobs


def _build(task_dir: str, cache: str, seed: int) -> str:
    """Build (or find) a task's data in a worker process; the data's root directory."""
    return str(build_data(load_task(Path(task_dir)), Path(cache), seed).root)


class Scheduler:
    """Hands the slots their next job: among the jobs whose data is built, the first in order (the
    longest limits and estimates first); never one that could not end by the deadline."""

    def __init__(
        self, jobs: Sequence[Job], builds: dict[tuple[str, int], concurrent.futures.Future[str]], deadline: float
    ):
        self.pending = sorted(jobs, key=lambda j: (-j.limits.time_s, -j.estimate_s))
        self.builds = builds
        self.deadline = deadline
        self.skipped: list[Job] = []
        self.cond = threading.Condition()
        for future in builds.values():
            future.add_done_callback(lambda _: self._wake())

    def _wake(self) -> None:
        with self.cond:
            self.cond.notify_all()

    def next(self) -> Job | None:
        with self.cond:
            while True:
                now = time.monotonic()
                late = [j for j in self.pending if now + j.limits.time_s + RUN_SLACK_S > self.deadline]
                self.skipped += late
                self.pending = [j for j in self.pending if j not in late]
                if not self.pending:
                    return None
                for job in self.pending:
                    if self.builds[job.build_key].done():
                        self.pending.remove(job)
                        return job
                self.cond.wait(0.5)


def run_job(
    job: Job, box: Sandbox, build: concurrent.futures.Future[str], log: Callable[[str], None]
) -> dict[str, Any]:
    if job.code is None:
        return job.row()
    try:
        data = TaskData(Path(build.result()), job.seed)
        start = time.monotonic()
        result, score = run_and_score(job.code, box, data, job.limits, data.answers())
        wall = time.monotonic() - start
    except Exception as exc:  # a harness failure, not the script's: said in the row and the exit code
        row = job.row(error=f"{type(exc).__name__}: {exc}", note=f"ERROR {type(exc).__name__}: {exc}")
        log(f"{job.stage} {job.task} {job.ran}: ERROR {type(exc).__name__}: {exc}")
        return row
    note = job.note
    if score.zero_reason:
        note = "; ".join(filter(None, [score.zero_reason, note]))
    row = job.row(
        gpu_score=round(score.accuracy, 4),
        gpu_wall_s=round(wall, 1),
        duration_s=round(result.duration_s, 1),
        exit_code=result.exit_code,
        timed_out=result.timed_out,
        zero_reason=score.zero_reason,
        isolation=result.isolation,
        note=note,
        output_tail=result.output[-2000:],
    )
    log(f"{job.stage} {job.task} {job.ran}: {score.accuracy:.4f} in {wall:.1f} s" + (f" ({note})" if note else ""))
    return row


@dataclasses.dataclass
class Contract:
    """The contract's pytest subprocess, running beside the scripts."""

    proc: subprocess.Popen[bytes]
    log_path: Path
    junit: Path
    started: float
    timeout_s: float
    backend: str
    gpu: str | None

    @classmethod
    def start(
        cls, backend: str, gpu: str | None, k: str | None, work: Path, log_path: Path, timeout_s: float
    ) -> Contract:
        work.mkdir(parents=True, exist_ok=True)
        module = work / "test_gpu_check_contract.py"
        module.write_text(CONTRACT_MODULE.format(backend=backend, gpu=gpu))
        (work / "pytest.ini").write_text("[pytest]\n")  # this directory is the rootdir: no repository config
        junit = work / "junit.xml"
        command = [sys.executable, "-m", "pytest", str(module), "-q", "-rfEs", f"--junitxml={junit}"]
        command += ["-p", "no:cacheprovider", "-p", "no:benchmark", "-p", "no:hypothesispytest"]
        if k:
            command += ["-k", k]
        env = {k_: v for k_, v in os.environ.items() if not k_.startswith("PYTEST_XDIST")}
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(log_path, "wb") as out:
            proc = subprocess.Popen(
                command, cwd=work, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )
        return cls(proc, log_path, junit, time.monotonic(), timeout_s, backend, gpu)

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)  # its own session: pytest and what it started
            self.proc.wait()

    def finish(self) -> dict[str, Any]:
        try:
            self.proc.wait(max(0.0, self.started + self.timeout_s - time.monotonic()))
            timed_out = False
        except subprocess.TimeoutExpired:
            self.kill()
            timed_out = True
        wall = time.monotonic() - self.started
        counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
        if self.junit.is_file():
            for suite in ET.parse(self.junit).getroot().iter("testsuite"):
                for key in counts:
                    counts[key] += int(suite.get(key, "0"))
        log = self.log_path.read_text(errors="replace")
        lines = [line for line in log.splitlines() if line.strip()]
        summary = lines[-1].strip("= ") if lines else ""
        passed = counts["tests"] - counts["failures"] - counts["errors"] - counts["skipped"]
        ok = not timed_out and self.proc.returncode == 0 and counts["tests"] > 0
        return {
            "backend": self.backend,
            "gpu": self.gpu,
            "returncode": self.proc.returncode,
            "timed_out": timed_out,
            "wall_s": round(wall, 1),
            "passed": passed,
            "failed": counts["failures"] + counts["errors"],
            "skipped": counts["skipped"],
            "cases": counts["tests"],
            "summary": summary,
            "log": str(self.log_path),
            "log_tail": "\n".join(lines[-40:]) if not ok else "",
            "ok": ok,
        }


def probe_gpu(box: Sandbox, work: Path) -> tuple[bool | None, str]:
    """Whether a sandboxed script sees a GPU (through the same leased sandbox as the tasks), and
    what it said; None when the probe itself failed."""
    data = work / "probe_data"
    data.mkdir(parents=True, exist_ok=True)
    try:
        result = box.run(PROBE, data, Limits(time_s=90))
    except SandboxError as exc:
        return None, f"the sandbox could not run the probe: {exc}"
    line = next((x for x in result.output.splitlines() if x.startswith("PROBE|")), "")
    if not line:
        return None, f"the probe failed (exit {result.exit_code}): {result.output[-500:].strip()}"
    _, ok, count, torch_version, cuda, name = line.split("|", 5)
    said = f"torch {torch_version} (CUDA {cuda}): cuda available {ok}, {count} device(s) {name}"
    return ok == "True", said


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def table(rows: Sequence[dict[str, Any]]) -> str:
    def cell(row: dict[str, Any], key: str) -> str:
        value = row.get(key)
        if value is None or value == "":
            return "-"
        if key in ("cpu_score", "gpu_score"):
            return f"{value:.4f}" if isinstance(value, float | int) else str(value)
        if key == "diff":
            return f"{value:+.4f}"
        if key == "gpu_wall_s":
            return f"{value:.1f}"
        return str(value)

    keys = ("stage", "task", "ran", "cpu_score", "gpu_score", "gpu_wall_s", "diff", "note")
    cells = [list(COLUMNS)] + [[cell(row, key) for key in keys] for row in rows]
    cells = [[c if len(c) <= 70 else c[:67] + "..." for c in line] for line in cells]
    widths = [max(len(line[i]) for line in cells) for i in range(len(keys))]
    numeric = {3, 4, 5, 6}
    out = []
    for n, line in enumerate(cells):
        parts = [c.rjust(widths[i]) if i in numeric else c.ljust(widths[i]) for i, c in enumerate(line)]
        out.append(" | ".join(parts).rstrip())
        if n == 0:
            out.append("-+-".join("-" * w for w in widths))
    return "\n".join(out)


def load_cpu_scores(path: Path | None) -> dict[str, float]:
    """Reference CPU scores: ``{"task": score}``, or an earlier gpu_check JSON (its reference rows)."""
    if path is None:
        return {}
    raw = json.loads(path.read_text())
    if isinstance(raw, dict) and isinstance(raw.get("rows"), list):
        return {
            r["task"]: float(r["gpu_score"])
            for r in raw["rows"]
            if r.get("stage") == "reference" and r.get("gpu_score") is not None
        }
    if isinstance(raw, dict):
        return {str(k): float(v) for k, v in raw.items() if isinstance(v, int | float)}
    raise SystemExit(f"--cpu-json {path}: expected an object of task -> score, or a gpu_check JSON")


def default_out() -> Path:
    out = os.environ.get("OUT")
    return Path(out) / "gpu_check.json" if out else ROOT / "reports" / "gpu_check.json"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--tiny", action="store_true", help="CI: local sandbox, no GPU, one tiny reference and one replay"
    )
    parser.add_argument("--sandbox", choices=sandbox_names(), help="default: docker (--tiny: local)")
    parser.add_argument(
        "--gpu", help="auto (the first GPU nvidia-smi lists), an index, or none (default: auto; --tiny: none)"
    )
    parser.add_argument("--parallel", type=int, help="scripts at once, all on the one GPU (default 6; --tiny: 2)")
    parser.add_argument("--reference-limit", type=float, help="seconds for a reference (default 60; --tiny: 20)")
    parser.add_argument("--replay-limit", type=float, help="seconds for a replay (default: the run's own; --tiny: 5)")
    parser.add_argument("--all-iterations", action="store_true", help="replay every iteration, not each run's best")
    parser.add_argument("--task", action="append", default=[], help="only this task (repeat for more)")
    parser.add_argument("--stages", default="contract,reference,replay", help="default: contract,reference,replay")
    parser.add_argument(
        "--cpu-json", type=Path, help="reference CPU scores: {task: score} or an earlier gpu_check JSON"
    )
    parser.add_argument("--cache", type=Path, default=cache_home() / "data", help="the data cache")
    parser.add_argument("--out", type=Path, help="JSON (default: $OUT/gpu_check.json, else reports/gpu_check.json)")
    parser.add_argument("--budget-s", type=float, help="no script starts that could not end by then (default 450)")
    parser.add_argument("--plan-only", action="store_true", help="list the scripts it would run, and stop")
    parser.add_argument("--contract-timeout", type=float, help="seconds for the contract's pytest (default 300)")
    args = parser.parse_args(argv)
    tiny = args.tiny
    defaults = {
        "sandbox": "local" if tiny else "docker",
        "gpu": "none" if tiny else "auto",
        "parallel": 2 if tiny else 6,
        "reference_limit": 20.0 if tiny else 60.0,
        "replay_limit": 5.0 if tiny else None,
        "budget_s": 120.0 if tiny else 450.0,
        "contract_timeout": 90.0 if tiny else 300.0,
        "out": default_out(),
    }
    for key, value in defaults.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    args.stages = {s.strip() for s in args.stages.split(",") if s.strip()}
    unknown = args.stages - {"contract", "reference", "replay"}
    if unknown:
        parser.error(f"--stages takes contract, reference and replay; not {', '.join(sorted(unknown))}")
    if args.parallel < 1:
        parser.error("--parallel must be at least 1")
    return args


def plan_jobs(args: argparse.Namespace, work: Path) -> list[Job]:
    """The references and replays to run (the tiny mode's reference task is written under ``work``)."""
    cpu_scores = load_cpu_scores(args.cpu_json)
    if args.tiny:
        sys.path.insert(0, str(ROOT / "tests"))
        from helpers import write_tiny_task

        reference_dirs = [write_tiny_task(work, "tiny", time_limit=args.reference_limit)]
        replay_dirs = [TASKS / name for name in (args.task or [TINY_REPLAY_TASK])]
        max_replays: int | None = 1
    else:
        names = args.task or sorted(p.parent.name for p in TASKS.glob("*/task.toml"))
        reference_dirs = replay_dirs = [TASKS / name for name in names]
        max_replays = None
    jobs: list[Job] = []
    if "reference" in args.stages:
        jobs += reference_jobs(reference_dirs, args.reference_limit, cpu_scores)
    if "replay" in args.stages:
        jobs += replay_jobs(replay_dirs, args.replay_limit, args.all_iterations, max_replays)
    return jobs


def print_plan(jobs: Sequence[Job], parallel: int) -> None:
    """The jobs in the order the slots take them, each with its limit and estimate."""
    for job in sorted(jobs, key=lambda j: (-j.limits.time_s, -j.estimate_s)):
        cpu = "-" if job.cpu_score is None else f"{job.cpu_score:.4f}"
        print(
            f"{job.stage:9} {job.task:20} {job.ran:24} limit {job.limits.time_s:5.0f} s, "
            f"about {job.estimate_s:5.1f} s, CPU {cpu} {job.note}".rstrip()
        )
    runnable = [j for j in jobs if j.code is not None]
    script_s = sum(j.estimate_s for j in runnable)
    most = sum(j.limits.time_s for j in runnable)
    print(
        f"{len(runnable)} scripts: about {script_s:.0f} s ({most:.0f} s at most), "
        f"{script_s / parallel:.0f} s with {parallel} at once"
    )


def main(argv: Sequence[str] | None = None) -> int:
    t0 = time.monotonic()
    args = parse_args(argv)
    mode = "tiny" if args.tiny else "full"
    deadline = t0 + args.budget_s

    def log(message: str) -> None:
        print(f"[{time.monotonic() - t0:6.1f} s] {message}", flush=True)

    report: dict[str, Any] = {
        "mode": mode,
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "settings": {
            k: (sorted(v) if isinstance(v, set) else str(v) if isinstance(v, Path) else v)
            for k, v in vars(args).items()
        },
        "problems": [],
        "stages": {},
        "rows": [],
    }

    def write_report() -> None:
        report["wall_s"] = round(time.monotonic() - t0, 1)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=1) + "\n")
        print(f"gpu_check: wrote {args.out}", flush=True)

    if args.plan_only:
        with tempfile.TemporaryDirectory(prefix="gpu_check-") as tmp:
            print_plan(plan_jobs(args, Path(tmp)), args.parallel)
        return 0

    # 1. What this machine has: said first, and the end of a full check when something is missing.
    if args.gpu.lower() == "auto":
        found = leases.detect()
        gpu = found[0] if found else None
        if gpu is None:
            why = "nvidia-smi is not installed" if shutil.which("nvidia-smi") is None else "nvidia-smi lists none"
            report["problems"].append(f"NO GPU: {why}")
    else:
        gpus = leases.parse(args.gpu)
        gpu = gpus[0] if gpus else None
    gpu_name = leases.describe(gpu) if gpu is not None else "no GPU"
    cores = len(os.sched_getaffinity(0))
    print(f"gpu_check ({mode}): GPU {gpu if gpu is not None else '-'}: {gpu_name}; {cores} cores", flush=True)
    for problem in report["problems"]:
        print(f"gpu_check: {problem}", flush=True)
    boxes: list[Sandbox] = []
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # said once below: the isolation of the first box
            boxes = [open_sandbox(args.sandbox) for _ in range(args.parallel)]
        print(f"gpu_check: sandbox {boxes[0].name} ({boxes[0].isolation})", flush=True)
    except SandboxError as exc:
        report["problems"].append(f"NO {args.sandbox.upper()} SANDBOX: {exc}")
        print(f"gpu_check: NO {args.sandbox.upper()} SANDBOX: {exc}", flush=True)
    report["device"] = {
        "gpu": gpu,
        "gpu_name": gpu_name,
        "cores": cores,
        "sandbox": boxes[0].name if boxes else args.sandbox,
        "isolation": boxes[0].isolation if boxes else None,
        "parallel": args.parallel,
    }
    if report["problems"] and not args.tiny:
        print("gpu_check: stopping: this check needs a GPU and the Docker sandbox (see above)", flush=True)
        for box in boxes:
            box.close()
        report["ok"] = False
        write_report()
        return 2
    if not boxes:  # tiny mode without its sandbox: nothing can run
        report["ok"] = False
        write_report()
        return 1

    work = Path(tempfile.mkdtemp(prefix="gpu_check-"))
    contract: Contract | None = None
    builder: concurrent.futures.ProcessPoolExecutor | None = None
    try:
        # 2. The jobs, and the contract (a pytest subprocess, beside everything else).
        jobs = plan_jobs(args, work)
        runnable = [j for j in jobs if j.code is not None]
        script_s = sum(j.estimate_s for j in runnable)
        log(
            f"{plural(sum(j.stage == 'reference' for j in jobs), 'reference')}, "
            f"{plural(sum(j.stage == 'replay' for j in jobs), 'replay')}; "
            f"about {script_s:.0f} s of scripts, {script_s / args.parallel:.0f} s with {args.parallel} at once"
        )
        if "contract" in args.stages:
            log_path = args.out.with_name(args.out.stem + "_contract.log")
            k = TINY_CONTRACT if args.tiny else None
            contract = Contract.start(args.sandbox, gpu, k, work / "contract", log_path, args.contract_timeout)
            log(f"contract: {args.sandbox} sandbox, GPU {gpu if gpu is not None else 'none'}, log {log_path}")

        # 3. The slots: every one on the GPU (or none), each with its own share of the cores.
        if gpu is not None:
            slots = tuple(Slot(f"gpu{gpu}-{i}", gpu, leases.cpu_share(i, args.parallel)) for i in range(args.parallel))
        else:
            slots = cpu_slots(args.parallel)
        pool = SlotPool(work / "leases", slots)
        leased = [LeasedSandbox(box, pool) for box in boxes[: len(slots)]]
        sees, said = probe_gpu(leased[0], work)
        report["device"]["probe"] = said
        log(f"probe: {said}")
        stopped: list[Job] = []
        if sees is None or (gpu is not None and not sees):
            problem = said if sees is None else f"sandboxed scripts do not see GPU {gpu}: {said}"
            report["problems"].append(problem)
            print(f"gpu_check: {problem}", flush=True)
            if not args.tiny:
                # No script runs on a CPU it takes for the GPU; the contract, already running, still ends.
                then = "; waiting for the contract" if contract is not None else ""
                print(f"gpu_check: no reference or replay runs{then}", flush=True)
                stopped, runnable = runnable, []

        # 4. The scripts: references and replays, longest limits first, the slots kept busy; the
        # data is built in processes (a builder may fork its own) while the first scripts run.
        builder = concurrent.futures.ProcessPoolExecutor(
            max_workers=max(1, min(4, cores // 4)), mp_context=multiprocessing.get_context("spawn")
        )
        builds: dict[tuple[str, int], concurrent.futures.Future[str]] = {}
        for job in sorted(runnable, key=lambda j: (-j.limits.time_s, -j.estimate_s)):
            if job.build_key not in builds:
                builds[job.build_key] = builder.submit(_build, str(job.task_dir), str(args.cache), job.seed)
        scheduler = Scheduler(runnable, builds, deadline)
        rows: list[dict[str, Any]] = []
        lock = threading.Lock()

        def worker(box: Sandbox) -> None:
            while (job := scheduler.next()) is not None:
                row = run_job(job, box, builds[job.build_key], log)
                with lock:
                    rows.append(row)

        scripts_start = time.monotonic()
        threads = [threading.Thread(target=worker, args=(box,), daemon=True) for box in leased]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        scripts_wall = time.monotonic() - scripts_start
        for job in scheduler.skipped:
            rows.append(job.row(note=f"not run: it could not end within --budget-s {args.budget_s:g}"))
        rows += [job.row(note="not run: sandboxed scripts do not see the GPU") for job in stopped]
        rows += [job.row() for job in jobs if job.code is None]
        held = read_leases(pool.directory)
        report["leases"] = {"count": len(held), "overlapping": len(overlapping(held))}

        # 5. The contract's verdict, the table and the JSON.
        table_rows: list[dict[str, Any]] = []
        if contract is not None:
            result = contract.finish()
            contract = None
            report["stages"]["contract"] = result
            state = "TIMED OUT" if result["timed_out"] else ("ok" if result["ok"] else "FAILED")
            counts = f"{result['passed']} passed, {result['failed']} failed, {result['skipped']} skipped"
            table_rows.append(
                {
                    "stage": "contract",
                    "task": "-",
                    "ran": f"{result['backend']} sandbox, GPU {gpu if gpu is not None else 'none'}",
                    "gpu_score": f"{result['passed']}/{result['cases']} passed",
                    "gpu_wall_s": result["wall_s"],
                    "note": f"{state}: {counts}",
                }
            )
            if not result["ok"]:
                report["problems"].append(f"contract {state}: {result['summary']}")
                print(result["log_tail"], flush=True)
        plan_order = {(j.stage, j.task, j.ran): n for n, j in enumerate(jobs)}
        rows.sort(key=lambda r: plan_order.get((r["stage"], r["task"], r["ran"]), len(plan_order)))
        table_rows += rows
        for stage in ("reference", "replay"):
            if stage not in args.stages:
                continue
            mine = [r for r in rows if r["stage"] == stage]
            report["stages"][stage] = {
                "jobs": len(mine),
                "ran": sum(r["gpu_score"] is not None for r in mine),
                "errors": sum("error" in r for r in mine),
                "not_run": sum(r["gpu_score"] is None and "error" not in r for r in mine),
                "script_s": round(sum(r.get("duration_s") or 0 for r in mine), 1),
            }
        report["scripts_wall_s"] = round(scripts_wall, 1)
        errors = [r for r in rows if "error" in r]
        if errors:
            report["problems"].append(f"{len(errors)} script(s) could not be run (see their rows)")
        if report["leases"]["overlapping"]:
            report["problems"].append("two leases of one slot overlapped")
        report["rows"] = table_rows
        report["ok"] = not report["problems"]
        print(flush=True)
        print(table(table_rows), flush=True)
        print(flush=True)
        skipped = f", {plural(len(scheduler.skipped), 'script')} not run (--budget-s)" if scheduler.skipped else ""
        verdict = "ok" if report["ok"] else "PROBLEMS: " + "; ".join(report["problems"])
        log(f"done: scripts {scripts_wall:.1f} s{skipped}; {verdict}")
        write_report()
        return 3 if stopped else 0 if report["ok"] else 1
    finally:
        if contract is not None:
            contract.kill()
        if builder is not None:
            builder.shutdown(wait=True, cancel_futures=True)
        for box in boxes:
            box.close()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
