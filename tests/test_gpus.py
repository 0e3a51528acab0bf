"""GPU leases, with a stand-in nvidia-smi on PATH (this machine has no GPU)."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from helpers import SYSTEM_PROMPT_SPY, read_jsonl, session_dir, write_replay

from pytest_weirdml.sandbox import gpus

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
    monkeypatch.setenv("PATH", f"{smi.parent}:{__import__('os').environ['PATH']}")
    return smi


def test_parse_and_round_robin_lease() -> None:
    assert gpus.parse("none") == ()
    assert gpus.parse("0, 2") == ("0", "2")
    with pytest.raises(ValueError, match="--weirdml-gpus must be auto, none or GPU indices"):
        gpus.parse("first")
    assert [gpus.lease(("0", "2"), f"gw{i}") for i in range(3)] == ["0", "2", "0"]
    assert gpus.lease((), "gw1") is None


def test_detect_and_describe_read_nvidia_smi(fake_smi: Path) -> None:
    assert gpus.parse("auto") == ("0", "1")
    assert gpus.describe("1") == "one NVIDIA H200 GPU with 140 GB of memory"


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
    result.stdout.fnmatch_lines(["*Hardware: one NVIDIA H200 GPU with 140 GB of memory.*"])
    (record,) = read_jsonl(session_dir(pytester) / "records.jsonl")
    assert "CUDA=0" in record["output"]
