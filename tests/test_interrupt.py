"""A session stopped by SIGTERM (``timeout``, CI runners, container stops) ends as Ctrl-C ends it:
the open queue request is cancelled, the run in flight ends unscored ("the session ended first"),
the summary and the reports are written for what finished, and pytest exits with status 2.

Real sessions in their own process, signalled from here while they wait for an answer or run a
script.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import read_jsonl, session_dir, write_replay, write_tiny_task

ANSWER_TIMEOUT_S = 600  # far longer than any of these tests wait


def _start(pytester: pytest.Pytester, args: list[str], **env: str) -> subprocess.Popen[bytes]:
    with (pytester.path / "session.log").open("wb") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "pytest", *args],
            cwd=pytester.path,
            stdout=log,
            stderr=subprocess.STDOUT,
            # Its own process group: a signal to the group reaches it and its xdist workers only.
            start_new_session=True,
            env={**os.environ, **env},
        )


def _log(pytester: pytest.Pytester) -> str:
    return (pytester.path / "session.log").read_text(errors="replace")


def _wait_for(
    pytester: pytest.Pytester, session: subprocess.Popen[bytes], what: str, found: Callable[[], bool]
) -> None:
    deadline = time.monotonic() + 180
    while not found():
        if session.poll() is not None or time.monotonic() > deadline:
            os.killpg(session.pid, signal.SIGKILL)
            session.wait()
            pytest.fail(f"the session never got to {what}:\n{_log(pytester)[-3000:]}")
        time.sleep(0.1)


def _stop(pytester: pytest.Pytester, session: subprocess.Popen[bytes], *, group: bool = False) -> str:
    """SIGTERM, to the session or to its process group; what it printed."""
    if group:
        os.killpg(session.pid, signal.SIGTERM)
    else:
        session.send_signal(signal.SIGTERM)
    try:
        session.wait(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(session.pid, signal.SIGKILL)
        session.wait()
        pytest.fail(f"the session did not end after SIGTERM:\n{_log(pytester)[-3000:]}")
    return _log(pytester)


def _assert_ended_unscored(
    pytester: pytest.Pytester, session: subprocess.Popen[bytes], out: str, tasks: list[str]
) -> str:
    """Exit status 2, and a summary that lists every run in flight as not finished, unscored."""
    assert session.returncode == 2, out[-3000:]
    where = session_dir(pytester)
    summary = json.loads((where / "summary.json").read_text())
    assert summary["runs"] == [] and summary["errors"] == []
    (model,) = {i["model"] for i in summary["incomplete"]}
    assert sorted((i["task"], i["run"], i["iterations"]) for i in summary["incomplete"]) == [(t, 0, 0) for t in tasks]
    assert summary["unscored"] == {model: {"the session ended first": len(tasks)}}
    assert (where / "report.html").is_file() and (where / "results.csv").is_file()
    records = read_jsonl(where / "records.jsonl")
    assert sorted(r["task"] for r in records if r["kind"] == "run_start") == tasks
    # The run in flight has no end: it is the summary's "did not end", as after Ctrl-C.
    assert [r for r in records if r["kind"] == "run_end"] == []
    assert "did not end (session interrupted)" in out and "received SIGTERM" in out
    return str(model)


def _queue_args(queue: Path, base_args: list[str]) -> list[str]:
    return [
        f"--weirdml-model=queue:{queue}",
        "--weirdml-runs=1",
        f"--weirdml-answer-timeout={ANSWER_TIMEOUT_S}",
        "--weirdml-allow-unisolated",
        *base_args,
    ]


def _cancelled(queue: Path, count: int) -> None:
    requests = sorted(queue.glob("*.request.json"))
    assert len(requests) == count, requests
    for request in requests:
        cancelled = request.with_name(request.name.replace(".request.json", ".cancelled"))
        assert "the harness stopped waiting (Terminated)" in cancelled.read_text()


def test_sigterm_while_a_queue_request_waits(pytester: pytest.Pytester, tiny: Path, base_args: list[str]) -> None:
    queue = pytester.path / "queue"
    session = _start(pytester, _queue_args(queue, base_args))
    _wait_for(pytester, session, "its first request", lambda: any(queue.glob("*.request.json")))
    out = _stop(pytester, session)
    assert _assert_ended_unscored(pytester, session, out, ["tiny"]) == "queue:queue"
    _cancelled(queue, 1)


@pytest.mark.parametrize("group", [False, True], ids=["controller-only", "process-group"])
def test_sigterm_under_xdist_cancels_every_workers_request(
    pytester: pytest.Pytester, tiny: Path, base_args: list[str], group: bool
) -> None:
    """A container stop signals the controller alone, ``timeout`` the whole process group."""
    write_tiny_task(pytester.path, "second")
    queue = pytester.path / "queue"
    session = _start(pytester, ["-n", "2", *_queue_args(queue, base_args)])
    _wait_for(pytester, session, "a request from each worker", lambda: len(list(queue.glob("*.request.json"))) == 2)
    out = _stop(pytester, session, group=group)
    assert _assert_ended_unscored(pytester, session, out, ["second", "tiny"]) == "queue:queue"
    _cancelled(queue, 2)


def test_sigterm_while_a_script_runs(pytester: pytest.Pytester, tiny: Path, base_args: list[str]) -> None:
    temp = pytester.path / "tmp"
    temp.mkdir()
    replay = write_replay(pytester.path / "slow.json", ["import time\ntime.sleep(300)\n"])
    session = _start(pytester, [f"--weirdml-model=replay:{replay}", "--weirdml-runs=1", *base_args], TMPDIR=str(temp))

    def running() -> bool:
        # After its run started (the sandbox's own probe of its environment runs a script too).
        started = any("run_start" in p.read_text() for p in (pytester.path / "reports").glob("*/records.jsonl"))
        return started and any(temp.glob("weirdml-run-*/solution.py"))

    _wait_for(pytester, session, "running its script", running)
    time.sleep(0.5)
    out = _stop(pytester, session)
    assert _assert_ended_unscored(pytester, session, out, ["tiny"]) == "replay:slow.json"
    # The script died with the run (no process names its run directory), and the directory is gone.
    assert list(temp.glob("weirdml-run-*")) == []
    assert not [p for p in Path("/proc").iterdir() if p.name.isdigit() and _cmdline_has(p, str(temp))]


def _cmdline_has(proc: Path, marker: str) -> bool:
    try:
        return marker.encode() in (proc / "cmdline").read_bytes()
    except OSError:
        return False
