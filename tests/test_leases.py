"""GPU and CPU leases, with a stand-in nvidia-smi on PATH (this machine has no GPU)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from helpers import SYSTEM_PROMPT_SPY, read_iterations, session_dir, write_replay

from pytest_weirdml.sandbox import leases
from pytest_weirdml.sandbox.pool import (
    Slot,
    SlotPool,
    cpu_slots,
    describe_gpus,
    gpu_slots,
    overlapping,
    read_leases,
)

FAKE_SMI = """#!/bin/sh
case "$*" in
  *index*) printf '0\\n1\\n' ;;
  *name*) printf 'NVIDIA H200, 143771\\n' ;;
esac
"""


@pytest.fixture
def fake_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    smi = tmp_path / "bin" / "nvidia-smi"
    smi.parent.mkdir()
    smi.write_text(FAKE_SMI)
    smi.chmod(smi.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{smi.parent}:{os.environ['PATH']}")
    return smi


def test_parse_gpus() -> None:
    assert leases.parse("none") == ()
    assert leases.parse("0, 2") == ("0", "2")
    with pytest.raises(ValueError, match="--weirdml-gpus must be auto, none or GPU indices"):
        leases.parse("first")


def test_detect_and_describe_read_nvidia_smi(fake_smi: Path) -> None:
    assert leases.parse("auto") == ("0", "1")
    assert leases.describe("1") == "one NVIDIA H200 GPU with 140 GB of memory"


def test_a_leased_gpu_is_named_in_the_prompt_and_visible_to_the_script(
    pytester: pytest.Pytester, tiny: Path, base_args: list[str], fake_smi: Path
) -> None:
    script = "import os\nprint('CUDA=' + os.environ['CUDA_VISIBLE_DEVICES'])\n"
    replay = write_replay(pytester.path / "gpu.json", [script])
    pytester.makeconftest(SYSTEM_PROMPT_SPY)
    result = pytester.runpytest(
        f"--weirdml-model=replay:{replay}", "--weirdml-runs=1", "--weirdml-gpus=auto", "-s", *base_args
    )
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*Your script runs on one NVIDIA H200 GPU with 140 GB of memory, *"])
    (record,) = read_iterations(session_dir(pytester) / "records.jsonl")
    assert "CUDA=0" in record["output"]


def test_cpu_shares_split_the_cores_between_workers() -> None:
    cores = sorted(os.sched_getaffinity(0))
    assert leases.cpu_share(0, 1) == tuple(cores)
    shares = [leases.cpu_share(i, 2) for i in range(2)]
    if len(cores) >= 2:
        assert set(shares[0]).isdisjoint(shares[1]) and sorted(shares[0] + shares[1]) == cores
    assert leases.describe_cpus((3,)) == "CPU only (1 core), no GPU"


def test_xdist_workers_run_scripts_on_their_own_cores(
    pytester: pytest.Pytester, tiny: Path, base_args: list[str]
) -> None:
    script = "import os\nprint('CPUS=%s THREADS=%s' % (sorted(os.sched_getaffinity(0)), os.getenv('OMP_NUM_THREADS')))"
    replay = write_replay(pytester.path / "cpus.json", [script])
    result = pytester.runpytest_subprocess(
        "-n", "2", f"--weirdml-model=replay:{replay}", "--weirdml-runs=4", *base_args, timeout=300
    )
    result.assert_outcomes(passed=4)
    seen = {}
    for record in read_iterations(session_dir(pytester) / "records.jsonl"):
        line = next(x for x in record["output"].splitlines() if x.startswith("CPUS="))
        seen.setdefault(line, 0)
        seen[line] += 1
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) >= 2:
        # Two workers, two disjoint shares, each script told how many threads it has.
        assert len(seen) == 2, seen
        assert all(f"THREADS={len(cores) // 2}" in line for line in seen)


# Leases held only while a script runs ---------------------------------------------------------


def test_pool_slots_are_held_by_one_execution_at_a_time(tmp_path: Path) -> None:
    pool = SlotPool(tmp_path, (Slot("gpu0", "0", (0,)), Slot("gpu1", "1", (0,))))
    inside: list[str] = []
    most = 0
    guard = threading.Lock()

    def work() -> None:
        nonlocal most
        for _ in range(5):
            with pool.lease() as slot:
                with guard:
                    inside.append(slot.name)
                    most = max(most, len(inside))
                time.sleep(0.01)
                with guard:
                    inside.remove(slot.name)

    threads = [threading.Thread(target=work) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    held = read_leases(tmp_path)
    assert len(held) == 30 and {lease["slot"] for lease in held} == {"gpu0", "gpu1"}
    assert most == 2 and overlapping(held) == []
    assert all(lease["end"] >= lease["start"] for lease in held)


def test_a_dead_holder_frees_its_slot(tmp_path: Path) -> None:
    code = (
        "import sys, time\nfrom pathlib import Path\nfrom pytest_weirdml.sandbox.pool import Slot, SlotPool\n"
        "pool = SlotPool(Path(sys.argv[1]), (Slot('gpu0', '0', ()),))\n"
        "with pool.lease():\n    print('held', flush=True)\n    time.sleep(120)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    holder = subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE, env=env)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"held\n"
        pool = SlotPool(tmp_path, (Slot("gpu0", "0", ()),))
        assert pool._try() is None  # held by the other process
        holder.kill()
        holder.wait()
        deadline = time.monotonic() + 10
        while (got := pool._try()) is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert got is not None and got[0].name == "gpu0"
        os.close(got[1])
    finally:
        holder.kill()
        holder.wait()


def test_slots_split_the_cores_and_the_prompt_names_the_kind_of_gpu() -> None:
    cores = sorted(os.sched_getaffinity(0))
    shares = cpu_slots(len(cores) + 5)
    assert len(shares) == len(cores) and sorted(c for s in shares for c in s.cpus) == cores
    gpus = gpu_slots(("0", "3"))
    assert [s.gpu for s in gpus] == ["0", "3"] and all(s.cpus for s in gpus)
    same = "one NVIDIA H200 GPU with 140 GB of memory"
    assert describe_gpus([same, same]) == same
    mixed = describe_gpus([same, "one NVIDIA L4 GPU with 22 GB of memory", same])
    assert mixed == (
        "one GPU, whichever is free when the script starts: NVIDIA H200 GPU with 140 GB of memory "
        "or NVIDIA L4 GPU with 22 GB of memory"
    )


def test_more_workers_than_gpus_share_them_one_script_at_a_time(
    pytester: pytest.Pytester, tiny: Path, base_args: list[str], fake_smi: Path
) -> None:
    script = "import os, time\nprint('CUDA=' + os.environ['CUDA_VISIBLE_DEVICES'])\ntime.sleep(0.5)\n"
    replay = write_replay(pytester.path / "gpu.json", [script, script])
    result = pytester.runpytest_subprocess(
        "-n", "4", f"--weirdml-model=replay:{replay}", "--weirdml-runs=4", "--weirdml-gpus=0,1", *base_args,
        timeout=300,
    )  # fmt: skip
    result.assert_outcomes(passed=4)
    session = session_dir(pytester)
    held = read_leases(session)
    assert len(held) == 8 and {lease["slot"] for lease in held} == {"gpu0", "gpu1"}
    assert overlapping(held) == []
    # Each lease lasts one script's run, not a worker's life: four workers held the two GPUs.
    assert len({lease["holder"] for lease in held}) == 4
    assert all(lease["end"] - lease["start"] < 10 for lease in held)
    outputs = [r["output"] for r in read_iterations(session / "records.jsonl")]
    seen = {line for output in outputs for line in output.splitlines() if "CUDA=" in line}
    assert seen == {"CUDA=0", "CUDA=1"}
