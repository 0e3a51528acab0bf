"""GPU leases, with a stand-in nvidia-smi on PATH (this machine has no GPU)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from helpers import SYSTEM_PROMPT_SPY, read_iterations, session_dir, write_replay

from pytest_weirdml.sandbox import leases

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


def test_parse_and_round_robin_lease() -> None:
    assert leases.parse("none") == ()
    assert leases.parse("0, 2") == ("0", "2")
    with pytest.raises(ValueError, match="--weirdml-gpus must be auto, none or GPU indices"):
        leases.parse("first")
    assert [leases.lease(("0", "2"), f"gw{i}") for i in range(3)] == ["0", "2", "0"]
    assert leases.lease((), "gw1") is None


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
