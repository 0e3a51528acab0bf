"""Executions as tasks on a Ray cluster (``--weirdml-ray``); the model calls stay in the session.

Each script runs as one Ray task that asks for one GPU (or ``cores_per_script`` CPUs on a
cluster without GPUs) and runs the chosen backend (docker or local) on whichever node Ray
places it. The session's xdist workers keep calling the models and scoring.

- **Data:** the public files go to a node once per data identity (a hash of their content),
  through Ray's object store, into a cache on the node (``$WEIRDML_RAY_CACHE``, else
  ``/tmp/weirdml-ray-<uid>``, one directory per node). The cache must be a private directory
  (owned by the session's user, mode 0700, not a link), or it is refused: on a shared ``/tmp``
  another user could otherwise plant the data a script reads. The hidden answers never leave this machine:
  scoring stays here, and a node returns the ``ExecResult`` with its predictions (capped).
- **Where:** each result names the node that ran it, and each GPU's busy interval is appended to
  the session's ``leases.jsonl`` like a local lease.
- **Failures:** a node (or its Ray worker, or its sandbox) that fails mid-execution is an
  infrastructure error, never the model's 0: the execution runs once more, on another node when
  there is one, and the result notes it for the records (``ExecResult.harness_notes``, never in
  the model's feedback); a second failure raises ``SandboxError``.

Every node needs Ray, this plugin, and what its backend needs: the sandbox image for docker,
an interpreter with the sandbox's packages for local.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import shutil
import socket
import stat
import tempfile
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from filelock import FileLock

from pytest_weirdml.errors import SandboxError
from pytest_weirdml.sandbox import Environment, ExecResult, Limits, Sandbox, leases
from pytest_weirdml.sandbox.pool import SlotPool, cpu_slots, describe_cores, describe_gpus, record_lease

NODE_CACHE_ENV = "WEIRDML_RAY_CACHE"
NODE_ID_LABEL = "ray.io/node-id"
# Beyond the script's own limit: the backend's kill, reading results, the trip back.
RESULT_GRACE_S = 60.0
# How often a queued execution checks that some live node can still take it.
PLACEMENT_CHECK_S = 20.0


class _NodeFailure(Exception):
    """An attempt failed for a reason of the node's, not the script's."""

    def __init__(self, node: str, node_id: str | None, why: str) -> None:
        super().__init__(f"{node or 'a Ray node'}: {why}")
        self.node_id = node_id


def connect(address: str) -> Any:
    """``ray`` connected to the cluster at ``address`` (``auto``: this machine's or $RAY_ADDRESS)."""
    if address.startswith("ray://"):
        raise SandboxError(
            f"--weirdml-ray={address}: Ray Client addresses are not supported; run the session on a "
            "node of the cluster and pass --weirdml-ray=auto or the head's HOST:PORT"
        )
    try:
        import ray
    except ImportError as exc:
        raise SandboxError("--weirdml-ray needs Ray: pip install 'pytest-weirdml[ray]'") from exc
    if not ray.is_initialized():
        try:
            ray.init(address=address, namespace="weirdml", log_to_driver=False, logging_level=logging.WARNING)
        except Exception as exc:
            raise SandboxError(
                f"no Ray cluster at {address} ({exc}); start one with `ray start --head` and "
                "`ray start --address=HEAD:6379` on every other node, or pass --weirdml-ray=HOST:PORT"
            ) from exc
    return ray


def data_identity(data_dir: Path) -> str:
    """A hash of the public files' names and contents."""
    digest = hashlib.sha256()
    for path in sorted(p for p in data_dir.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(data_dir)).encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()[:24]


def _public_files(data_dir: Path) -> dict[str, bytes]:
    return {str(p.relative_to(data_dir)): p.read_bytes() for p in sorted(data_dir.rglob("*")) if p.is_file()}


class RaySandbox(Sandbox):
    """Runs each script as a Ray task on the cluster at ``address``."""

    def __init__(
        self,
        address: str,
        *,
        backend: str = "local",
        python: str | None = None,
        cores_per_script: int = 1,
        session_dir: Path | None = None,
        gpus: bool | None = None,
    ) -> None:
        """``gpus``: one GPU per script (the default on a cluster that has GPUs), else a CPU share."""
        self.ray = connect(address)
        self.address = address
        self.backend = backend
        self.python = python
        self.cores = cores_per_script
        self.session_dir = session_dir
        self.name = backend
        self.isolated = backend == "docker"  # until the nodes' sandboxes say (environment)
        self._isolation = "docker" if self.isolated else "unknown"
        self.gpus = self.ray.cluster_resources().get("GPU", 0) >= 1 if gpus is None else gpus
        remote = self.ray.remote(max_retries=0, max_calls=0)
        # Workers are kept between runs: the scripts hold the GPU, in their own processes.
        self._execute = remote(_execute)
        self._probe = remote(_probe)
        self._start = remote(_start)
        self._warming: list[Any] = []
        self._shipped: dict[str, Any] = {}
        self._identities: dict[Path, str] = {}
        self._environment: Environment | None = None

    def _resources(self) -> dict[str, float]:
        return {"num_gpus": 1, "num_cpus": 0} if self.gpus else {"num_cpus": self.cores}

    def _live_nodes(self, avoid: str | None = None) -> list[dict[str, Any]]:
        need = ("GPU", 1) if self.gpus else ("CPU", self.cores)
        return [
            node
            for node in self.ray.nodes()
            if node["Alive"] and node["NodeID"] != avoid and node["Resources"].get(need[0], 0) >= need[1]
        ]

    # Data -------------------------------------------------------------------------------------

    def _ship(self, data_dir: Path) -> tuple[str, Any]:
        data_dir = data_dir.resolve()
        key = self._identities.get(data_dir)
        if key is None:
            key = self._identities[data_dir] = data_identity(data_dir)
        if key not in self._shipped:
            self._shipped[key] = self.ray.put(_public_files(data_dir))
        return key, self._shipped[key]

    # Running ------------------------------------------------------------------------------------

    def run(self, code: str, data_dir: Path, limits: Limits, gpu: str | None = None) -> ExecResult:
        key, ref = self._ship(data_dir)
        job = {"code": code, "data": key, "limits": limits, "backend": self.backend, "python": self.python}
        job["cores"] = self.cores
        failures: list[_NodeFailure] = []
        for _ in range(2):
            avoid = failures[-1].node_id if failures else None
            try:
                result, lease = self._attempt(job, [ref], limits, avoid)
            except _NodeFailure as exc:
                failures.append(exc)
                continue
            if self.session_dir is not None:
                record_lease(self.session_dir, **lease)
            if failures:
                # For the records only: the model's feedback is about its script, not the cluster.
                note = f"infrastructure error, not the script's: {failures[0]}; it ran again on {result.node}"
                result = replace(result, harness_notes=(*result.harness_notes, note))
            return result
        raise SandboxError(f"the script's execution failed twice on the Ray cluster: {failures[0]}; {failures[1]}")

    def _attempt(
        self, job: dict[str, Any], box: list[Any], limits: Limits, avoid: str | None
    ) -> tuple[ExecResult, dict[str, Any]]:
        ray = self.ray
        options: dict[str, Any] = self._resources()
        if avoid is not None and self._live_nodes(avoid):
            options["label_selector"] = {NODE_ID_LABEL: f"!{avoid}"}
        # The data ref travels inside a list, so Ray does not fetch it where the cache has it.
        stream = self._execute.options(**options).remote(job, box)
        node, node_id = "", None
        try:
            # Queued behind other executions for as long as it takes, while some node can take it.
            while not ray.wait([stream], timeout=PLACEMENT_CHECK_S)[0]:
                if not self._live_nodes(avoid if "label_selector" in options else None):
                    ray.cancel(stream, force=True)
                    what = "a GPU" if self.gpus else f"{self.cores} CPUs"
                    raise SandboxError(f"no live node of the Ray cluster at {self.address} offers {what}")
            node, node_id = ray.get(next(stream))
            ray.get(next(stream))  # the data is on the node, the script starts
            if not ray.wait([stream], timeout=limits.time_s + RESULT_GRACE_S)[0]:
                ray.cancel(stream, force=True)
                raise _NodeFailure(node, node_id, f"no result {RESULT_GRACE_S:g} s after the time limit")
            result, lease = ray.get(next(stream))
        except ray.exceptions.RayTaskError as exc:
            cause = exc.cause if isinstance(exc.cause, BaseException) else exc
            if isinstance(cause, SandboxError):
                raise _NodeFailure(node, node_id, f"its sandbox failed: {cause}") from exc
            raise SandboxError(f"the Ray task failed on {node or 'a node'}: {cause!r}") from exc
        except ray.exceptions.RayError as exc:
            raise _NodeFailure(node, node_id, f"{type(exc).__name__}: {str(exc).splitlines()[0]}") from exc
        return result, lease

    @property
    def isolation(self) -> str:
        """The nodes' isolation (several, comma-separated, where they differ); each result says its own."""
        return self._isolation

    def environment(self) -> Environment:
        """What every node offers: the same interpreter and packages on all, or ``SandboxError``."""
        if self._environment is not None:
            return self._environment
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        nodes = self._live_nodes()
        if not nodes:
            what = "a GPU" if self.gpus else f"{self.cores} CPUs"
            raise SandboxError(f"no live node of the Ray cluster at {self.address} offers {what}")
        probes = [
            self._probe.options(
                num_cpus=0, scheduling_strategy=NodeAffinitySchedulingStrategy(node["NodeID"], soft=False)
            ).remote(self.backend, self.python, int(node["Resources"].get("GPU", 0)) if self.gpus else 0)
            for node in nodes
        ]
        try:
            found = self.ray.get(probes)
        except self.ray.exceptions.RayError as exc:
            raise SandboxError(f"could not probe the Ray nodes' sandboxes: {exc}") from exc
        self.isolated = all(isolation != "none" for _, _, _, isolation in found)
        self._isolation = ",".join(sorted({isolation for _, _, _, isolation in found}))
        envs = {(env.python, tuple(sorted(env.packages.items()))): label for label, env, _, _ in found}
        if len(envs) > 1:
            lines = "; ".join(f"{label}: Python {py}, {dict(pk)}" for (py, pk), label in envs.items())
            raise SandboxError(
                f"the Ray nodes' sandboxes differ ({lines}); give every node the same sandbox image "
                "or interpreter, so the system prompt is true wherever a script runs"
            )
        env = found[0][1]
        gpus = [description for _, _, descriptions, _ in found for description in descriptions]
        device = describe_gpus(gpus) if self.gpus else describe_cores([self.cores])
        self._environment = replace(env, device=device)
        self._warm(nodes)
        return self._environment

    def _warm(self, nodes: list[dict[str, Any]]) -> None:
        """Start this session's Ray worker on every node while the first model call is out.

        Ray keeps workers per driver (each xdist worker) and does not lend a worker that ran a
        task without a GPU to a task with one, so the first execution on each node would wait
        for a worker process to start (seconds) while holding its GPU. A no-op task of the same
        shape starts it now; nobody waits for it.
        """
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        for node in nodes:
            strategy = NodeAffinitySchedulingStrategy(node["NodeID"], soft=False)
            self._warming.append(
                self._start.options(**self._resources(), scheduling_strategy=strategy).remote(self.backend, self.python)
            )


# On the nodes -------------------------------------------------------------------------------------

_backends: dict[tuple[str, str | None], Sandbox] = {}
_node_gpus: dict[str, int] = {}


def _backend(name: str, python: str | None) -> Sandbox:
    """This Ray worker's backend, opened once: opening one probes the host."""
    if (name, python) not in _backends:
        from pytest_weirdml.sandbox.choose import open_sandbox

        _backends[name, python] = open_sandbox(name, python=python)
    return _backends[name, python]


def _node() -> tuple[str, str]:
    import ray

    node_id = ray.get_runtime_context().get_node_id()
    return f"{socket.gethostname()}:{node_id[:8]}", node_id


def node_cache(node_id: str) -> Path:
    """This node's cache directory, inside a private root (made 0700, or checked to be)."""
    root = Path(os.environ.get(NODE_CACHE_ENV) or Path(tempfile.gettempdir()) / f"weirdml-ray-{os.getuid()}")
    with contextlib.suppress(FileExistsError):
        os.mkdir(root, 0o700)
    info = os.lstat(root)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or stat.S_IMODE(info.st_mode) & 0o077:
        raise SandboxError(
            f"the Ray node cache {root} is not a private directory (a directory owned by uid {os.getuid()}, "
            f"mode 0700, not a link); remove it, or point ${NODE_CACHE_ENV} at a private directory"
        )
    return root / "".join(c for c in node_id[:16] if c.isalnum())


def _node_data(node_id: str, key: str, box: list[Any]) -> Path:
    """The public files of ``key`` in this node's cache, fetched from the object store once."""
    import ray

    root = node_cache(node_id) / "data"
    final = root / key
    if _real_dir(final):
        return final
    root.mkdir(parents=True, exist_ok=True)
    with FileLock(str(final) + ".lock"):
        if _real_dir(final):
            return final
        files: dict[str, bytes] = ray.get(box[0])
        staging = root / f".{key}.tmp-{os.getpid()}"
        shutil.rmtree(staging, ignore_errors=True)
        for name, content in files.items():
            if Path(name).is_absolute() or ".." in Path(name).parts:
                raise SandboxError(f"a public file named {name!r} would leave the node's cache")
            path = staging / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content)
            path.chmod(0o444)
        staging.mkdir(exist_ok=True)
        for directory in sorted((p for p in staging.rglob("*") if p.is_dir()), reverse=True):
            directory.chmod(0o555)
        staging.chmod(0o555)
        os.rename(staging, final)
    return final


def _real_dir(path: Path) -> bool:
    """A directory, not a link to one (a link in the cache is never followed)."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except FileNotFoundError:
        return False


def _node_gpu_count(node_id: str) -> int:
    if node_id not in _node_gpus:
        import ray

        node = next(n for n in ray.nodes() if n["NodeID"] == node_id)
        _node_gpus[node_id] = max(1, int(node["Resources"].get("GPU", 1)))
    return _node_gpus[node_id]


def _execute(job: dict[str, Any], box: list[Any]) -> Iterator[Any]:
    """One execution on the node Ray chose; yields where it is, then that the data is there,
    then (the result, the GPU's or cores' lease)."""
    import ray

    start = time.time()
    node, node_id = _node()
    yield node, node_id
    data = _node_data(node_id, job["data"], box)
    yield True
    inner = _backend(job["backend"], job["python"])
    limits: Limits = job["limits"]
    gpu_ids = ray.get_gpu_ids()
    if gpu_ids:
        gpu = str(gpu_ids[0])
        count = _node_gpu_count(node_id)
        cpus = leases.cpu_share(int(gpu) % count if gpu.isdigit() else 0, count)
        result = inner.run(job["code"], data, replace(limits, cpus=cpus), gpu=gpu)
        lease = {"node": node, "slot": f"gpu{gpu}", "start": start, "end": time.time()}
    else:
        # Ray counts CPUs but does not say which: a pool on the node picks the cores.
        cores = job["cores"]
        shares = max(1, len(os.sched_getaffinity(0)) // cores)
        pool = SlotPool(node_cache(node_id) / f"cores-{cores}", cpu_slots(shares), node=node)
        with pool.lease() as slot:
            begun = time.time()
            result = inner.run(job["code"], data, replace(limits, cpus=slot.cpus))
            lease = {"node": node, "slot": slot.name, "start": begun, "end": time.time()}
    yield replace(result, node=node), lease


def _start(backend: str, python: str | None) -> None:
    """Nothing but what every execution needs first: this worker process and its backend."""
    _backend(backend, python)


def _probe(backend: str, python: str | None, gpus: int) -> tuple[str, Environment, list[str], str]:
    """This node's sandbox environment, the description of each of its GPUs, and how its
    sandbox isolates scripts."""
    node, _ = _node()
    inner = _backend(backend, python)
    return node, inner.environment(), [leases.describe(str(i)) for i in range(gpus)], inner.isolation
