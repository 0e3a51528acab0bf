"""GPU leases: which GPU a process's scripts get, and how the system prompt names it.

With ``--weirdml-gpus=0,1`` and ``-n 2``, xdist worker ``gw0`` runs every script on GPU 0 and
``gw1`` on GPU 1; with more workers than GPUs, workers share GPUs round-robin. ``auto`` uses
every GPU that ``nvidia-smi`` lists; ``none`` runs on the CPU.
"""

from __future__ import annotations

import os
import shutil
import subprocess


def detect() -> tuple[str, ...]:
    """Indices of the GPUs ``nvidia-smi`` sees; none where it is missing or fails."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return ()
    try:
        out = subprocess.run(
            [smi, "--query-gpu=index", "--format=csv,noheader"], capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.SubprocessError):
        return ()
    return tuple(line.strip() for line in out.stdout.splitlines() if line.strip()) if out.returncode == 0 else ()


def parse(text: str) -> tuple[str, ...]:
    """``auto`` | ``none`` | ``0,1,...`` -> GPU indices."""
    text = text.strip().lower()
    if text == "auto":
        return detect()
    if text in ("none", ""):
        return ()
    gpus = tuple(part.strip() for part in text.split(","))
    if not all(part.isdigit() for part in gpus):
        raise ValueError(f"--weirdml-gpus must be auto, none or GPU indices like 0,1; got {text!r}")
    return gpus


def lease(gpus: tuple[str, ...], worker: str | None = None) -> str | None:
    """The GPU for this process: one per xdist worker, round-robin."""
    if not gpus:
        return None
    worker = worker if worker is not None else os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    index = int(worker[2:]) if worker.startswith("gw") and worker[2:].isdigit() else 0
    return gpus[index % len(gpus)]


def describe(gpu: str) -> str:
    """How the system prompt names the leased GPU, e.g. 'one NVIDIA H200 GPU with 141 GB of memory'."""
    smi = shutil.which("nvidia-smi")
    if smi is not None:
        query = [smi, "-i", gpu, "--query-gpu=name,memory.total", "--format=csv,noheader,nounits"]
        try:
            out = subprocess.run(query, capture_output=True, text=True, timeout=30)
            name, memory_mib = (part.strip() for part in out.stdout.strip().split(",", 1))
            return f"one {name} GPU with {int(memory_mib) // 1024} GB of memory"
        except (OSError, subprocess.SubprocessError, ValueError):
            pass
    return "one NVIDIA GPU"
