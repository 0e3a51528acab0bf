"""How busy the GPUs stay: leases held only while a script runs, against one worker per GPU.

Runs real pytest sessions of a simulated task: the model answers after ``--latency`` seconds
with a script that sleeps ``--exec`` seconds and writes fixed predictions (a constant accuracy).
The GPUs are pretend ones (``--weirdml-gpus=0,1,...``; scripts only see CUDA_VISIBLE_DEVICES).
For 2 and 4 GPUs it runs:

  leases   2G+2 xdist workers share the G GPUs, each script holding one only while it runs;
  ray      the same on a local two-node Ray cluster with G pretend GPUs (skipped without Ray);
  per GPU  G workers, so each worker in effect keeps one GPU for its whole life (the old scheme).

Each session's makespan is timed from the moment every worker is ready (xdist and Ray start-up
are left out; the first model call waits for all workers) to the end of the last script. The
ideal bound is the larger of the GPU bound (script seconds / G) and the model bound (runs x
iterations x (latency + script) / workers). It also prints the per-iteration overhead of a local
lease and of a Ray round trip, on a trivial script. The last line is ``utilisation=<ratio>`` of
the leases session on 2 GPUs with latency = exec.

    python benchmarks/scale_utilisation.py [--exec 1] [--latency 1] [--runs-per-worker 2] [--no-ray]
    python benchmarks/scale_utilisation.py --tiny   # CI: one short session per scheme on 1 GPU, no Ray
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from helpers import GOOD_SCRIPT, write_tiny_task  # noqa: E402

from pytest_weirdml.sandbox import Limits  # noqa: E402
from pytest_weirdml.sandbox.leased import LeasedSandbox  # noqa: E402
from pytest_weirdml.sandbox.local import LocalSandbox  # noqa: E402
from pytest_weirdml.sandbox.pool import SlotPool, gpu_slots, overlapping, read_leases  # noqa: E402
from pytest_weirdml.tasks import build_data, load_task  # noqa: E402

# The simulated model: it waits for every worker once, then answers after LATENCY seconds.
CONFTEST = """
import os, time
from pathlib import Path
import pytest
from pytest_weirdml.models import Model, Response, Usage

EXEC_S, LATENCY_S = {exec_s!r}, {latency_s!r}
SCRIPT = (
    "import time\\ntime.sleep(%r)\\n"
    "open('results/test_preds.txt', 'w').write('0\\\\n' * 100)\\n" % EXEC_S
)


class Simulated(Model):
    name = "simulated"

    def __init__(self, ready: Path) -> None:
        self.ready = ready

    def generate(self, request):
        workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
        me = self.ready / os.environ.get("PYTEST_XDIST_WORKER", "gw0")
        if not me.exists():
            me.touch()
            while len(list(self.ready.iterdir())) < workers:
                time.sleep(0.01)
        time.sleep(LATENCY_S)
        return Response(text="```python\\n" + SCRIPT + "```", usage=Usage(latency_s=LATENCY_S))


@pytest.fixture
def weirdml_model(weirdml_settings):
    ready = weirdml_settings.session_dir / "ready"
    ready.mkdir(parents=True, exist_ok=True)
    return Simulated(ready)
"""


@dataclass
class Session:
    makespan_s: float
    exec_s: float
    iterations: int
    overlaps: int


def run_session(
    root: Path, *, gpus: int, workers: int, runs: int, ray_address: str | None, args: argparse.Namespace
) -> Session:
    reports = Path(tempfile.mkdtemp(prefix="reports-", dir=root))
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", str(workers)]
    command += ["--weirdml-model=reference", f"--weirdml-runs={runs}", f"--weirdml-reports={reports}"]
    command += [f"--weirdml-data-cache={root / 'cache'}", "--weirdml-sandbox=local", "-p", "no:randomly"]
    command += [f"--weirdml-gpus={','.join(map(str, range(gpus)))}"]
    if ray_address:
        command += [f"--weirdml-ray={ray_address}"]
    proc = subprocess.run(command, cwd=root, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"session failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    (session,) = reports.iterdir()
    ready = max(p.stat().st_mtime for p in (session / "ready").iterdir())
    held = read_leases(session)
    lines = [json.loads(line) for line in (session / "records.jsonl").read_text().splitlines()]
    records = [r for r in lines if r["kind"] == "iteration"]
    assert all(r["zero_reason"] is None for r in records), records[0]
    return Session(
        makespan_s=max(lease["end"] for lease in held) - ready,
        exec_s=sum(r["duration_s"] for r in records),
        iterations=len(records),
        overlaps=len(overlapping(held)),
    )


def lease_overhead(root: Path, n: int) -> tuple[float, float]:
    """Median seconds of a bare lease (take, log, give back), and of a leased run beyond the run."""
    pool = SlotPool(root / "pool", gpu_slots(("0", "1")))
    bare = []
    for _ in range(n):
        start = time.perf_counter()
        with pool.lease():
            pass
        bare.append(time.perf_counter() - start)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        inner = LocalSandbox()
    data = build_data(load_task(root / "tasks" / "sim"), root / "cache")
    leased = LeasedSandbox(inner, pool)
    # The plain run gets a share of the cores of the same size, as a leased one does.
    return statistics.median(bare), _extra(leased, inner, data.public_dir, n, pool.slots[0].cpus)


def _extra(outer: object, inner: LocalSandbox, data: Path, n: int, cpus: tuple[int, ...] = ()) -> float:
    """Median wall time of ``outer.run`` minus that of ``inner.run`` (taking turns) on one script."""
    times: dict[str, list[float]] = {"outer": [], "inner": []}
    boxes = (("outer", outer, Limits(time_s=60)), ("inner", inner, Limits(time_s=60, cpus=cpus)))
    for _, box, limits in boxes:
        box.run(GOOD_SCRIPT, data, limits)  # type: ignore[attr-defined]
    for _ in range(n):
        for key, box, limits in boxes:
            start = time.perf_counter()
            box.run(GOOD_SCRIPT, data, limits)  # type: ignore[attr-defined]
            times[key].append(time.perf_counter() - start)
    return statistics.median(times["outer"]) - statistics.median(times["inner"])


class RayCluster:
    """A local head and a second node, with ``gpus`` pretend GPUs between them."""

    def __init__(self, gpus: int) -> None:
        from ray.cluster_utils import Cluster

        # CPUs declared, not used (the scripts ask for GPUs only): a node keeps as many idle Ray
        # workers as it has CPUs, and every xdist worker keeps one there, as on a real GPU node.
        node = {"num_cpus": 16, "object_store_memory": 100 << 20}
        self.cluster = Cluster(
            initialize_head=True, head_node_args={**node, "num_gpus": gpus - gpus // 2, "include_dashboard": False}
        )
        self.cluster.add_node(**node, num_gpus=gpus // 2)
        self.cluster.wait_for_nodes()
        self.address = self.cluster.address

    def close(self) -> None:
        self.cluster.shutdown()


def ray_overhead(root: Path, address: str, n: int) -> float:
    import ray

    from pytest_weirdml.sandbox.ray_cluster import RaySandbox

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        inner = LocalSandbox()
        remote = RaySandbox(address, backend="local")
    data = build_data(load_task(root / "tasks" / "sim"), root / "cache")
    try:
        return _extra(remote, inner, data.public_dir, n)
    finally:
        ray.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--exec", dest="exec_s", type=float, default=1.0, help="seconds each script sleeps")
    parser.add_argument("--latency", type=float, default=1.0, help="seconds each model call takes")
    parser.add_argument("--iterations", type=int, default=5)
    parser.add_argument("--runs-per-worker", type=int, default=2)
    parser.add_argument("--gpus", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--no-ray", action="store_true", help="leave out the Ray sessions")
    parser.add_argument("-n", type=int, default=20, help="repeats of the overhead measurements")
    parser.add_argument("--tiny", action="store_true", help="seconds, not minutes: checks the script still runs")
    args = parser.parse_args()
    if args.tiny:
        args.exec_s, args.latency, args.iterations, args.runs_per_worker = 0.2, 0.2, 1, 1
        args.gpus, args.no_ray, args.n = [1], True, 2
    try:
        import ray  # noqa: F401

        use_ray = not args.no_ray
    except ImportError:
        use_ray = False
    headline: float | None = None
    with tempfile.TemporaryDirectory(prefix="weirdml-scale-") as tmp:
        root = Path(tmp)
        write_tiny_task(root, "sim", time_limit=args.exec_s + 60, iterations=args.iterations)
        (root / "conftest.py").write_text(textwrap.dedent(CONFTEST.format(exec_s=args.exec_s, latency_s=args.latency)))
        print(f"load average at start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
        print(f"model latency {args.latency:g} s, script {args.exec_s:g} s, {args.iterations} iterations per run")
        header = f"{'GPUs':>4} {'scheme':<8} {'workers':>7} {'runs':>4} {'makespan s':>10} {'ideal s':>8}"
        print(header + f" {'of ideal':>8} {'GPUs busy':>9} {'overlaps':>8}")
        for gpus in args.gpus:
            workers = 2 * gpus + 2
            runs = workers * args.runs_per_worker
            cluster = RayCluster(gpus) if use_ray else None
            schemes = [("leases", workers, None)]
            schemes += [("ray", workers, cluster.address)] if cluster is not None else []
            schemes += [("per GPU", gpus, None)]
            ideal = 0.0
            try:
                for scheme, n_workers, address in schemes:
                    s = run_session(root, gpus=gpus, workers=n_workers, runs=runs, ray_address=address, args=args)
                    if scheme == "leases":
                        # Every scheme of this row is held to the bound of the best one.
                        model_bound = runs * args.iterations * (args.latency + args.exec_s) / n_workers
                        ideal = max(s.exec_s / gpus, model_bound)
                    ratio, busy = ideal / s.makespan_s, s.exec_s / (gpus * s.makespan_s)
                    line = f"{gpus:>4} {scheme:<8} {n_workers:>7} {runs:>4} {s.makespan_s:>10.1f} {ideal:>8.1f}"
                    print(line + f" {ratio:>8.2f} {busy:>9.2f} {s.overlaps:>8}", flush=True)
                    if scheme == "leases" and gpus == 2 and args.latency == args.exec_s:
                        headline = ratio
            finally:
                if cluster is not None:
                    cluster.close()
        bare, leased = lease_overhead(root, args.n)
        print(f"local lease, per iteration: {bare * 1000:.2f} ms bare (take, log, give back); "
              f"{leased * 1000:+.1f} ms for a leased run against a plain one")  # fmt: skip
        if use_ray:
            cluster = RayCluster(2)
            try:
                extra = ray_overhead(root, cluster.address, args.n)
            finally:
                cluster.close()
            print(f"ray, per iteration: {extra * 1000:+.1f} ms for a run as a Ray task against a local one")
    if headline is not None:
        print(f"utilisation={headline:.2f}")


if __name__ == "__main__":
    main()
