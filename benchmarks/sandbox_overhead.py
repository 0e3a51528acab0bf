"""Per-run overhead of each sandbox backend on a trivial script, against a raw ``docker run``.

    python benchmarks/sandbox_overhead.py [--runs N]
    python benchmarks/sandbox_overhead.py --tiny   # CI: one run each, checks the script still runs

Times N runs of the same one-line script: as a plain subprocess on the host (the script's own
run), in the local sandbox, in the docker sandbox, and with ``docker run --rm --network none`` of
the same image and mounts. Each backend also runs with results/ as a plain directory instead of
its size-capped tmpfs, so the cost of mounting one per run shows (where the harness may mount).
Prints each median wall time, each backend's overhead beyond the script's own run, and the docker
sandbox's ratio to the raw ``docker run``. The docker rows are left out, saying why, without a
daemon or the image.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path

from pytest_weirdml.errors import SandboxError
from pytest_weirdml.sandbox import Limits
from pytest_weirdml.sandbox.local import LocalSandbox

SCRIPT = "print('ok')\n"
LIMITS = Limits(time_s=30, memory_bytes=1 << 30)


def timed(fns: dict[str, Callable[[], object]], runs: int) -> dict[str, float]:
    """Median seconds of each; the ways take turns, so a busy host weighs on all of them alike."""
    times: dict[str, list[float]] = {name: [] for name in fns}
    for fn in fns.values():
        fn()  # warm caches (page cache, image layers, interpreter imports)
    for _ in range(runs):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in times.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--tiny", action="store_true", help="seconds, not minutes: one run each")
    args = parser.parse_args()
    if args.tiny:
        args.runs = 1

    root = Path(tempfile.mkdtemp(prefix="weirdml-bench-"))
    root.chmod(0o755)  # the containers' unprivileged user reads it
    data = root / "data"
    data.mkdir()
    (root / "results").mkdir()
    (root / "solution.py").write_text(SCRIPT)
    fns: dict[str, Callable[[], object]] = {}

    def plain() -> None:
        subprocess.run([sys.executable, "-s", "solution.py"], cwd=root, check=True, capture_output=True)

    fns["script alone (host subprocess)"] = plain

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        local = LocalSandbox()
        local_on_disk = LocalSandbox(cap_with_tmpfs=False)
    local_name = f"local sandbox ({'bwrap' if local.isolated else 'plain'}, cgroups {local.cgroups})"
    fns[local_name] = lambda: local.run(SCRIPT, data, LIMITS)
    if local.cap_with_tmpfs:
        fns["local sandbox, results/ not a tmpfs"] = lambda: local_on_disk.run(SCRIPT, data, LIMITS)

    docker_box = None
    try:
        from pytest_weirdml.sandbox.docker import DockerSandbox

        docker_box = DockerSandbox()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            docker_on_disk = DockerSandbox(cap_with_tmpfs=False, client=docker_box.client)
    except SandboxError as exc:
        print(f"docker rows left out: {exc}")
    if docker_box is not None:
        box = docker_box
        fns["docker sandbox"] = lambda: box.run(SCRIPT, data, LIMITS)
        if box.cap_with_tmpfs:
            fns["docker sandbox, results/ not a tmpfs"] = lambda: docker_on_disk.run(SCRIPT, data, LIMITS)
        raw = [
            "docker", "run", "--rm", "--network", "none",
            "-v", f"{root}:/sandbox:ro", "-v", f"{data}:/sandbox/data:ro", "-w", "/sandbox",
            box.image, "python3", "-s", "solution.py",
        ]  # fmt: skip

        def raw_run() -> None:
            proc = subprocess.run(raw, capture_output=True, text=True, check=False)
            if proc.returncode != 0:
                raise SystemExit(f"docker run failed: {proc.stderr}")

        fns["raw docker run --rm"] = raw_run
    try:
        medians = timed(fns, args.runs)
    finally:
        if docker_box is not None:
            docker_box.close()
        shutil.rmtree(root, ignore_errors=True)

    base = medians["script alone (host subprocess)"]
    print(f"median wall time over {args.runs} runs of a one-line script:")
    for name, value in medians.items():
        print(f"  {name:<48} {value * 1000:8.1f} ms   overhead {max(value - base, 0) * 1000:8.1f} ms")
    if "docker sandbox" in medians:
        ratio = medians["docker sandbox"] / medians["raw docker run --rm"]
        over = (medians["docker sandbox"] - base) / (medians["raw docker run --rm"] - base)
        print(f"docker sandbox / raw docker run: {ratio:.2f}x wall time, {over:.2f}x overhead (aim: within 1.2x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
