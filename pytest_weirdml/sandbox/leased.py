"""A sandbox whose runs each hold a slot of a ``SlotPool`` (a GPU, or a share of the cores)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from pytest_weirdml.sandbox import Environment, ExecResult, Limits, Sandbox
from pytest_weirdml.sandbox.pool import SlotPool


class LeasedSandbox(Sandbox):
    """Runs scripts in ``inner``, each on the slot it leased for exactly that run.

    The system prompt is written before any slot is chosen, so it names what the pool holds
    (``SlotPool.describe``) rather than one GPU.
    """

    def __init__(self, inner: Sandbox, pool: SlotPool) -> None:
        self.inner = inner
        self.pool = pool
        self.name = inner.name
        self.isolated = inner.isolated

    def run(self, code: str, data_dir: Path, limits: Limits, gpu: str | None = None) -> ExecResult:
        with self.pool.lease() as slot:
            return self.inner.run(code, data_dir, replace(limits, cpus=slot.cpus), gpu=slot.gpu)

    @property
    def isolation(self) -> str:
        return self.inner.isolation

    def environment(self) -> Environment:
        return replace(self.inner.environment(), device=self.pool.describe())

    def close(self) -> None:
        self.inner.close()
