"""Executions on a real local Ray cluster: a head and a second node on this machine, each with one
pretend GPU. Sessions run as subprocesses that connect to it with --weirdml-ray."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import GOOD_SCRIPT, read_iterations, read_plans, session_dir, write_replay, write_tiny_task

from pytest_weirdml.errors import SandboxError
from pytest_weirdml.sandbox import Limits
from pytest_weirdml.sandbox.local import bwrap_works
from pytest_weirdml.sandbox.pool import overlapping, read_leases
from pytest_weirdml.sandbox.ray_cluster import NODE_CACHE_ENV, RaySandbox, node_cache
from pytest_weirdml.tasks import build_data, load_task

ray = pytest.importorskip("ray", reason="the Ray tests need Ray: pip install 'pytest-weirdml[ray]'")
from ray.cluster_utils import Cluster  # noqa: E402

# Small nodes: this runs beside other jobs on a 2-core machine. Four CPUs are declared, not used: a
# node keeps as many idle Ray workers as it has CPUs, and each session worker keeps one on each.
NODE = {"num_cpus": 4, "num_gpus": 1, "object_store_memory": 100 << 20}
pytestmark = pytest.mark.xdist_group("ray")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    cache = tmp_path_factory.mktemp("ray-node-cache")
    with pytest.MonkeyPatch.context() as mp:
        # The nodes' processes inherit it: each node's data cache lives in the test's directory.
        mp.setenv(NODE_CACHE_ENV, str(cache))
        # The nodes are not xdist workers, even when this test runs in one.
        mp.delenv("PYTEST_XDIST_WORKER", raising=False)
        mp.delenv("PYTEST_XDIST_WORKER_COUNT", raising=False)
        # The head's GCS takes a free port: other clusters may run on this machine.
        cluster = Cluster(initialize_head=True, head_node_args={**NODE, "include_dashboard": False})
        try:
            cluster.add_node(**NODE)
            cluster.wait_for_nodes()
            cluster.connect(namespace="weirdml-tests")
            yield cluster
        finally:
            ray.shutdown()
            cluster.shutdown()


@pytest.fixture
def ray_args(cluster: Cluster, base_args: list[str]) -> list[str]:
    return [f"--weirdml-ray={cluster.address}", "--weirdml-sandbox=local", *base_args]


def _records(pytester: pytest.Pytester) -> list[dict[str, Any]]:
    return read_iterations(session_dir(pytester) / "records.jsonl")


def test_executions_land_on_both_nodes_and_gpu_leases_never_overlap(
    pytester: pytest.Pytester, tiny: Path, ray_args: list[str]
) -> None:
    script = "import os, time\nprint('CUDA=' + os.environ['CUDA_VISIBLE_DEVICES'])\ntime.sleep(1.0)\n" + GOOD_SCRIPT
    replay = write_replay(pytester.path / "gpu.json", [script, script])
    result = pytester.runpytest_subprocess(
        "-n", "4", f"--weirdml-model=replay:{replay}", "--weirdml-runs=4", *ray_args, timeout=300
    )
    result.assert_outcomes(passed=4)
    records = _records(pytester)
    assert len(records) == 8 and all(r["score"] == 1.0 for r in records)
    assert len({r["node"] for r in records}) == 2, [r["node"] for r in records]
    assert all("CUDA=0" in r["output"] for r in records)  # each node's one pretend GPU
    held = read_leases(session_dir(pytester))
    assert len(held) == 8 and {lease["node"] for lease in held} == {r["node"] for r in records}
    assert overlapping(held) == []
    # The public files reached each node once, and the answers never did.
    cache = Path(os.environ[NODE_CACHE_ENV])
    copies = sorted(p for p in cache.glob("*/data/*") if p.is_dir())
    assert sorted(p.parent.parent.name[:8] for p in copies) == sorted(
        n.split(":")[1] for n in {r["node"] for r in records}
    )
    assert sorted(q.name for q in copies[0].iterdir()) == ["test_x.npy", "train_x.npy", "train_y.npy"]
    assert not [p for p in cache.rglob("*") if "answers" in p.name or p.name == "hidden"]


def test_results_equal_a_local_sessions_for_the_reference(
    pytester: pytest.Pytester, tiny: Path, base_args: list[str], ray_args: list[str]
) -> None:
    args = ["--weirdml-model=reference", "--weirdml-runs=1"]
    pytester.runpytest(*args, "--weirdml-sandbox=local", *base_args).assert_outcomes(passed=1)
    (local_session,) = (pytester.path / "reports").iterdir()
    local = read_iterations(local_session / "records.jsonl")
    local_plans = read_plans(local_session / "records.jsonl")
    local_session.rename(pytester.path / "local-session")
    pytester.runpytest_subprocess(*args, *ray_args, timeout=300).assert_outcomes(passed=1)
    remote = _records(pytester)
    keys = ("iteration", "code", "output", "exit_code", "timed_out", "score", "zero_reason")
    assert [{k: r[k] for k in keys} for r in remote] == [{k: r[k] for k in keys} for r in local]
    # The sandbox is a condition of the run: its plan says it, once.
    remote_plans = read_plans(session_dir(pytester) / "records.jsonl")
    assert [p["sandbox"] for p in remote_plans] == [p["sandbox"] for p in local_plans] == ["local"]
    assert [r["score"] for r in remote] == [1.0]
    assert all(r["node"] for r in remote) and not any(r["node"] for r in local)


def test_on_a_cluster_without_gpus_each_script_gets_a_share_of_a_nodes_cores(tmp_path: Path, cluster: Cluster) -> None:
    data = build_data(load_task(write_tiny_task(tmp_path)), tmp_path / "cache")
    sandbox = RaySandbox(cluster.address, backend="local", gpus=False, cores_per_script=1, session_dir=tmp_path)
    assert sandbox.environment().device == "CPU only (1 core), no GPU"
    script = "import os\nprint('CPUS', len(os.sched_getaffinity(0)), os.environ['CUDA_VISIBLE_DEVICES'] or '-')\n"
    result = sandbox.run(script + GOOD_SCRIPT, data.public_dir, Limits(time_s=30))
    assert result.exit_code == 0 and "CPUS 1 -" in result.output and result.predictions
    assert result.node.split(":")[1] in {node["NodeID"][:8] for node in ray.nodes()}
    (lease,) = read_leases(tmp_path)
    assert lease["node"] == result.node and lease["slot"] in {"cpus0", "cpus1"}


@ray.remote(num_gpus=1, num_cpus=0)
def _hold_gpu(release: str) -> None:
    while not os.path.exists(release):
        time.sleep(0.1)


def _free_gpus() -> float:
    return float(ray.available_resources().get("GPU", 0))


def _wait_for(condition: Any, what: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def _script_runs_with(data: Path) -> bool:
    """Whether a sandboxed script runs with this node's copy of the data: the bubblewrap command
    binds it (without bubblewrap, whether the copy is there)."""
    if not bwrap_works()[0]:
        return any(data.glob("data/*"))
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            argv = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        if b"solution.py" in argv and any(arg.startswith(bytes(data)) for arg in argv):
            return True
    return False


def test_a_node_killed_mid_execution_is_an_infrastructure_error_and_the_run_goes_on(
    pytester: pytest.Pytester, tiny: Path, cluster: Cluster, ray_args: list[str]
) -> None:
    # Both GPUs of the cluster are held, so the script can only run on a third node: the victim.
    release = pytester.path / "release"
    holders = [_hold_gpu.remote(str(release)) for _ in range(2)]
    _wait_for(lambda: _free_gpus() == 0, "the two holders to start")
    victim = cluster.add_node(**NODE)
    cluster.wait_for_nodes()
    script = "import time\ntime.sleep(6)\n" + GOOD_SCRIPT
    # A second submission: its prompt is the feedback the model read on the first.
    replay = write_replay(pytester.path / "slow.json", [script, GOOD_SCRIPT])
    command = [sys.executable, "-m", "pytest", f"--weirdml-model=replay:{replay}", "--weirdml-runs=1", *ray_args]
    command += ["--weirdml-iterations=2", "-p", "no:xdist"]
    session = subprocess.Popen(command, cwd=pytester.path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        # Killed once its script runs there: never before the execution reached it (Ray's view of
        # free GPUs lags), nor after the script ended.
        _wait_for(lambda: _script_runs_with(node_cache(victim.node_id)), "the script to start on the victim node")
        cluster.remove_node(victim, allow_graceful=False)
        release.touch()
        out, _ = session.communicate(timeout=240)
    finally:
        release.touch()
        session.kill()
        ray.get(holders)
    text = out.decode(errors="replace")
    assert "1 passed" in text, text[-3000:]
    record, after = _records(pytester)
    assert record["score"] == 1.0 and record["zero_reason"] is None
    # The records say what happened to the cluster; the model's feedback is about its script only.
    (note,) = record["harness_notes"]
    assert "infrastructure error, not the script's" in note, note
    assert record["node"] in {lease["node"] for lease in read_leases(session_dir(pytester))}
    victim_id = victim.node_id[:8]
    assert victim_id not in record["node"] and victim_id in note
    assert f"it ran again on {record['node']}" in note
    assert "infrastructure error" not in record["output"] and victim_id not in record["output"]
    assert after["prompt"] and "infrastructure error" not in after["prompt"] and victim_id not in after["prompt"]
    assert after["harness_notes"] == []


def test_ray_client_addresses_are_refused_naming_the_fix() -> None:
    with pytest.raises(SandboxError, match=r"Ray Client addresses are not supported; run the session on a node"):
        RaySandbox("ray://head:10001")


def test_the_node_cache_is_a_private_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_weirdml.errors import SandboxError
    from pytest_weirdml.sandbox.ray_cluster import node_cache

    fresh = tmp_path / "fresh"
    monkeypatch.setenv(NODE_CACHE_ENV, str(fresh))
    assert node_cache("abcdef0123456789ffff") == fresh / "abcdef0123456789"
    assert (fresh.stat().st_mode & 0o777) == 0o700
    # A node id never becomes more than a name inside it.
    assert node_cache("../../etc") == fresh / "etc"
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)
    monkeypatch.setenv(NODE_CACHE_ENV, str(shared))
    with pytest.raises(SandboxError, match=r"is not a private directory .*mode 0700, not a link"):
        node_cache("abc")
    planted = tmp_path / "planted"
    planted.symlink_to(fresh)
    monkeypatch.setenv(NODE_CACHE_ENV, str(planted))
    with pytest.raises(SandboxError, match="is not a private directory"):
        node_cache("abc")
