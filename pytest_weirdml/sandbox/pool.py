"""A cross-process pool of execution slots: a GPU (with its share of the cores), or a share of
the cores on a CPU host. A script holds a slot only while it runs.

Model calls are I/O, so a session runs more xdist workers than it has GPUs; each execution takes
a free slot for its duration and gives it back, and a worker waiting on its model holds nothing.
A slot is an ``flock`` on a lock file in the session's directory: the kernel drops it when its
holder dies, however it dies, so a killed worker never keeps a GPU. Every lease is appended to
``leases.jsonl`` (slot, holder, start, end) so that anyone can check that no two overlapped.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_weirdml.sandbox import leases

LEASES_FILE = "leases.jsonl"
LOCKS_DIR = ".leases"
# How often a waiting execution looks for a free slot; small beside any script's run time.
POLL_S = 0.005


@dataclass(frozen=True)
class Slot:
    """What one execution gets: a GPU (or none) and the cores it is pinned to."""

    name: str
    gpu: str | None
    cpus: tuple[int, ...]


def gpu_slots(gpus: Sequence[str]) -> tuple[Slot, ...]:
    """One slot per GPU, each with its own share of this host's cores."""
    return tuple(Slot(f"gpu{gpu}", gpu, leases.cpu_share(i, len(gpus))) for i, gpu in enumerate(gpus))


def cpu_slots(shares: int) -> tuple[Slot, ...]:
    """``shares`` disjoint shares of this host's cores (fewer when there are fewer cores)."""
    shares = max(1, min(shares, len(os.sched_getaffinity(0))))
    return tuple(Slot(f"cpus{i}", None, leases.cpu_share(i, shares)) for i in range(shares))


def default_shares(cores_per_script: int | None, workers: int | None = None) -> int:
    """How many scripts run at once on a CPU host: ``cores // cores_per_script``; by default one
    per xdist worker (at most one per core), the cores split between the workers. ``workers``
    defaults to this process's xdist worker count (the controller passes its own)."""
    cores = len(os.sched_getaffinity(0))
    if cores_per_script:
        return max(1, cores // cores_per_script)
    if workers is None:
        workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
    return max(1, min(workers, cores))


def holder() -> str:
    return f"{os.environ.get('PYTEST_XDIST_WORKER', 'main')}/{os.getpid()}"


class SlotPool:
    """The slots of one session, shared by every process that opens the same ``directory``."""

    def __init__(self, directory: Path, slots: Sequence[Slot], *, node: str | None = None) -> None:
        if not slots:
            raise ValueError("a slot pool needs at least one slot")
        self.directory = directory
        self.slots = tuple(slots)
        self.node = node if node is not None else socket.gethostname()
        (directory / LOCKS_DIR).mkdir(parents=True, exist_ok=True)
        # Worker gwK looks at slot K first: with one worker per slot each keeps "its" GPU, as
        # before, and with more workers the first tries spread over the slots.
        worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
        self._first = int(worker[2:]) % len(self.slots) if worker[2:].isdigit() else 0

    def _path(self, slot: Slot) -> str:
        return str(self.directory / LOCKS_DIR / f"{slot.name}.lock")

    def _try(self) -> tuple[Slot, int] | None:
        n = len(self.slots)
        for k in range(n):
            slot = self.slots[(self._first + k) % n]
            # A fresh open file description per try: flock excludes it from every other one,
            # other threads of this process included.
            fd = os.open(self._path(slot), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            return slot, fd
        return None

    @contextlib.contextmanager
    def _queue(self) -> Iterator[None]:
        """First in line: one waiter looks for a free slot, the others sleep in the kernel."""
        fd = os.open(self.directory / LOCKS_DIR / "queue.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    @contextlib.contextmanager
    def lease(self) -> Iterator[Slot]:
        """Wait for a free slot and hold it for the ``with`` block."""
        asked = time.time()
        got = self._try()
        if got is None:
            with self._queue():
                while (got := self._try()) is None:
                    time.sleep(POLL_S)
        slot, fd = got
        start = time.time()
        try:
            yield slot
        finally:
            end = time.time()
            try:
                self.record(slot=slot.name, start=start, end=end, wait_s=round(start - asked, 4))
            finally:
                os.close(fd)  # releases the flock

    def record(self, **lease: Any) -> None:
        record_lease(self.directory, **{"node": self.node, **lease})

    def describe(self) -> str:
        """How the system prompt names what a script gets, before it is known which slot."""
        gpus = [slot.gpu for slot in self.slots if slot.gpu is not None]
        if gpus:
            return describe_gpus([leases.describe(gpu) for gpu in gpus])
        return describe_cores([len(slot.cpus) for slot in self.slots])


def record_lease(directory: Path, **lease: Any) -> None:
    """Append one lease to ``leases.jsonl`` (one short line, one append: whole on disk)."""
    line = json.dumps({"holder": holder(), **lease}) + "\n"
    # The session directory appears with its first record, which may come after the first lease.
    directory.mkdir(parents=True, exist_ok=True)
    fd = os.open(directory / LEASES_FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def describe_gpus(descriptions: Sequence[str]) -> str:
    """One description when every GPU is the same model; else each kind, said to be any of them."""
    kinds = list(dict.fromkeys(descriptions))
    if len(kinds) == 1:
        return kinds[0]
    return "one GPU, whichever is free when the script starts: " + " or ".join(
        kind.removeprefix("one ") for kind in kinds
    )


def describe_cores(counts: Sequence[int]) -> str:
    low, high = min(counts), max(counts)
    if low == high:
        return leases.describe_cpus(tuple(range(low)))
    return f"CPU only ({low} to {high} cores), no GPU"


def read_leases(directory: Path) -> list[dict[str, Any]]:
    path = directory / LEASES_FILE
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.endswith("}")]


def overlapping(leases_: Sequence[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Pairs of leases of the same slot on the same node whose intervals overlap (none, ever)."""
    by_slot: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for lease in leases_:
        by_slot.setdefault((lease["node"], lease["slot"]), []).append(lease)
    found = []
    for held in by_slot.values():
        held.sort(key=lambda lease: lease["start"])
        longest = held[0]  # of the leases so far, the one that ends last
        for lease in held[1:]:
            if lease["start"] < longest["end"]:
                found.append((longest, lease))
            if lease["end"] > longest["end"]:
                longest = lease
    return found
