"""Hardware: which GPUs this host has, how its cores are cut into shares, and how the system
prompt names them.

``--weirdml-gpus=0,1`` names the GPUs scripts may use; ``auto`` uses every GPU that
``nvidia-smi`` lists, ``none`` runs on the CPU. Each script holds one of them only while it runs
(``pool.py``), with its own share of the cores: two scripts never fight over one core (a script
that believes it owns every core slows to a crawl when its threads share them with another's).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path


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


def _worker() -> tuple[int, int]:
    """(this xdist worker's index, the number of workers); (0, 1) outside xdist."""
    name = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    index = int(name[2:]) if name.startswith("gw") and name[2:].isdigit() else 0
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
    return index, max(count, 1)


def cpu_share(index: int | None = None, count: int | None = None) -> tuple[int, ...]:
    """This worker's cores: the usable cores cut into ``count`` contiguous shares (round-robin
    when there are more workers than cores)."""
    if index is None or count is None:
        index, count = _worker()
    cores = sorted(os.sched_getaffinity(0))
    if count <= 1:
        return tuple(cores)
    if count >= len(cores):
        return (cores[index % len(cores)],)
    size, extra = divmod(len(cores), count)
    start = index * size + min(index, extra)
    return tuple(cores[start : start + size + (1 if index < extra else 0)])


def describe_cpus(cores: tuple[int, ...]) -> str:
    return f"CPU only ({len(cores)} core{'s' if len(cores) != 1 else ''}), no GPU"


# The driver's nodes every CUDA process opens, whichever GPU it uses.
GPU_CONTROL_NODES = ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset")


DEV = Path("/dev")


def gpu_device_nodes(gpu: str, dev: Path = DEV) -> list[Path]:
    """The device nodes a script leased ``gpu`` (an index) may open: ``/dev/nvidia<index>``, the
    control nodes and ``nvidia-caps``; a GPU named otherwise (a UUID) gets every node, as the
    index of its node is unknown."""
    if not gpu.isdigit():
        return sorted(dev.glob("nvidia*"))
    wanted = [dev / f"nvidia{int(gpu)}", *(dev / name for name in GPU_CONTROL_NODES), dev / "nvidia-caps"]
    return [path for path in wanted if path.exists()]
