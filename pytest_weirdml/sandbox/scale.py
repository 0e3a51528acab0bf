"""Where a session's scripts run: on this host, each holding a slot of the session's pool while
it runs, or as tasks on a Ray cluster (``--weirdml-ray``).

How to choose ``-n``: a worker spends its time either waiting on its model (latency L) or on its
script (run time E), so W workers keep about ``W * E / (L + E)`` slots busy. To keep G GPUs busy
take ``-n`` of at least ``G * (L + E) / E`` plus a few: 2G+2 when the model takes as long as the
script, more for slow reasoning models. Extra workers only wait for a slot; they hold nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pytest_weirdml.errors import SandboxError
from pytest_weirdml.isolation import unisolated_refusal
from pytest_weirdml.sandbox import Sandbox
from pytest_weirdml.sandbox.choose import open_sandbox
from pytest_weirdml.sandbox.leased import LeasedSandbox
from pytest_weirdml.sandbox.pool import SlotPool, cpu_slots, default_shares, gpu_slots


@dataclass(frozen=True)
class SandboxSettings:
    """The session's part for its sandbox: the backend, the local interpreter, the hardware."""

    backend: str = "local"
    session_dir: Path = Path("reports")
    # --weirdml-python: the local sandbox's interpreter (None: its own environment).
    python: str | None = None
    gpus: tuple[str, ...] = ()
    cores_per_script: int | None = None
    # --weirdml-ray: the cluster's address (None: scripts run on this host).
    ray: str | None = None
    # The session's models: one answered from outside the user's control (a provider, an outside
    # agent) never has its scripts run unisolated unless --weirdml-allow-unisolated.
    models: tuple[str, ...] = ()
    allow_unisolated: bool = False


def local_pool(settings: SandboxSettings) -> SlotPool:
    """The session's slots on this host: its GPUs, else shares of its cores."""
    slots = gpu_slots(settings.gpus) if settings.gpus else cpu_slots(default_shares(settings.cores_per_script))
    return SlotPool(settings.session_dir, slots)


def open_session_sandbox(settings: SandboxSettings) -> Sandbox:
    """The sandbox the session's items share; raises ``SandboxError`` naming the fix."""
    if settings.ray:
        from pytest_weirdml.sandbox.ray_cluster import RaySandbox

        return RaySandbox(
            settings.ray,
            backend=settings.backend,
            python=settings.python,
            cores_per_script=settings.cores_per_script or 1,
            session_dir=settings.session_dir,
        )
    box = open_sandbox(settings.backend, python=settings.python)
    # ``auto`` may have fallen back to a local sandbox that cannot isolate.
    if box.isolation == "none" and not settings.allow_unisolated:
        refusal = unisolated_refusal(settings.models, getattr(box, "why_not_isolated", "") or "isolation is off")
        if refusal is not None:
            box.close()
            raise SandboxError(refusal)
    return LeasedSandbox(box, local_pool(settings))
