"""Where a long session stands: the iteration lines' place, the status line (in a real terminal
under tmux, and in a log), data builds announcing themselves."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import GOOD_SCRIPT, write_replay, write_tiny_task

from pytest_weirdml.activity import Board, Doing, read_boards
from pytest_weirdml.progress import status_text
from pytest_weirdml.tasks import build_data, load_task

STATUS = re.compile(r"weirdml status: (\d+)/(\d+) done · elapsed (\d+):(\d\d)")


def test_status_text_counts_estimates_and_spends() -> None:
    doing = [Doing("tiny[gpt-0]", "running the script (iteration 2)", 100.0)]
    text = status_text(3, 12, doing, 90.0, 1.23456, 5.0, now=112.0)
    assert text == (
        "weirdml status: 3/12 done · elapsed 1:30 · about 4:30 left · $1.2346 spent of --weirdml-max-cost=$5"
        " · 1 in flight (tiny[gpt-0] running the script (iteration 2) 12 s)"
    )
    # Nothing done yet: no estimate; all done: none needed.
    assert "left" not in status_text(0, 12, [], 3600.0, 0.0, None, now=0.0)
    assert status_text(12, 12, [], 3725.0, 0.0, None, now=0.0) == (
        "weirdml status: 12/12 done · elapsed 1:02:05 · $0.0000 spent"
    )


def test_a_workers_board_reaches_the_controller_through_its_file(tmp_path: Path) -> None:
    board = Board(tmp_path / "gw0.json")
    board.set("t/task.toml::tiny[a-0]", "tiny[a-0]", "waiting for the model (iteration 1)")
    board.set("t/task.toml::tiny[a-1]", "tiny[a-1]", "building tiny data (seed 0)")
    (tmp_path / "gw1.json").write_text('[{"item": "torn')  # a worker that went away mid-write
    board.say("building tiny data (seed 0)")
    doing, said = read_boards(tmp_path)
    assert [(d.item, d.what) for d in doing] == [
        ("tiny[a-0]", "waiting for the model (iteration 1)"),
        ("tiny[a-1]", "building tiny data (seed 0)"),
    ]
    assert said == ["building tiny data (seed 0)"]
    board.clear("t/task.toml::tiny[a-0]")
    assert [d.item for d in read_boards(tmp_path)[0]] == ["tiny[a-1]"]


def test_a_data_build_announces_itself_with_the_last_builds_time(tmp_path: Path) -> None:
    spec = load_task(write_tiny_task(tmp_path))
    heard: list[str] = []
    build_data(spec, tmp_path / "cache", on_build=heard.append)
    build_data(spec, tmp_path / "cache", on_build=heard.append)  # built already: nothing to say
    build_data(spec, tmp_path / "cache", seed=3, on_build=heard.append)
    assert heard[0] == "building tiny data (seed 0)"
    assert re.fullmatch(r"building tiny data \(seed 3\), about \d+ s", heard[1]) and len(heard) == 2


def _session(root: Path, *args: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        "-p",
        "no:benchmark",
        f"--weirdml-data-cache={root / 'cache'}",
        f"--weirdml-reports={root / 'reports'}",
        *args,
    ]


def test_quiet_keeps_only_the_status_line_in_a_log(tmp_path: Path) -> None:
    write_tiny_task(tmp_path)
    result = subprocess.run(
        _session(tmp_path, "-q", "--weirdml-model=reference", "--weirdml-runs=2"),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    # One status line as each item ends; no iteration lines and no build lines.
    status = [line for line in lines if line.startswith("weirdml status:")]
    assert [STATUS.match(line).groups()[:2] for line in status] == [("1", "2"), ("2", "2")]  # type: ignore[union-attr]
    assert not [line for line in lines if line.startswith(("weirdml tiny", "weirdml building"))]
    # And none at all without the terminal.
    silent = subprocess.run(
        _session(tmp_path, "-p", "no:terminal", "--weirdml-model=reference", "--weirdml-runs=1"),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert silent.returncode == 0 and "weirdml" not in silent.stdout


TMUX = shutil.which("tmux")


@pytest.mark.skipif(TMUX is None, reason="needs tmux (apt-get install tmux; scripts/setup.sh installs it)")
def test_under_tmux_the_status_line_updates_while_scripts_run(tmp_path: Path) -> None:
    pytest.importorskip("xdist")
    write_tiny_task(tmp_path, time_limit=60)
    write_replay(tmp_path / "slow.json", ["import time\ntime.sleep(8)\n" + GOOD_SCRIPT])
    command = _session(tmp_path, "-n", "2", "--weirdml-model=replay:slow.json", "--weirdml-runs=4")
    command += ["--weirdml-iterations=1"]
    log = tmp_path / "exit"
    shell = " ".join(f"'{part}'" for part in command) + f"; echo $? > {log}; sleep 600"
    socket = f"weirdml-test-{os.getpid()}"
    tmux = [TMUX, "-L", socket]
    # The pane's width, whatever the calling environment says (a COLUMNS=80 there would reach
    # the session through tmux and cut the line before the runs in flight).
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "COLUMNS": "300", "LINES": "60"}
    subprocess.run(
        [*tmux, "new-session", "-d", "-x", "300", "-y", "60", "-c", str(tmp_path), shell],
        check=True,
        env=environment,
    )
    try:

        def pane() -> list[str]:
            out = subprocess.run(
                [*tmux, "capture-pane", "-p", "-J", "-S", "-"], capture_output=True, text=True, check=True
            )
            return out.stdout.splitlines()

        def status(lines: list[str]) -> re.Match[str] | None:
            found = [m for line in lines if (m := STATUS.search(line))]
            return found[-1] if found else None

        def wait(condition: object, what: str, timeout: float = 300) -> list[str]:
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                lines = pane()
                if condition(lines):  # type: ignore[operator]
                    return lines
                time.sleep(0.25)
            pytest.fail(f"timed out waiting for {what}; the pane shows:\n" + "\n".join(pane()))

        first = wait(
            lambda lines: (s := status(lines)) is not None and "running the script" in s.string, "a script to run"
        )
        before = status(first)
        assert before is not None, first
        # The script sleeps 8 s: a few seconds later the same runs are still running, time went on.
        time.sleep(3.5)
        second = pane()
        during = status(second)
        assert during is not None and "running the script" in during.string, second
        assert during.group(1) == before.group(1)
        assert (int(during.group(3)), int(during.group(4))) != (int(before.group(3)), int(before.group(4)))
        later = wait(
            lambda lines: (s := status(lines)) is not None and s.group(1) != before.group(1), "an item to finish"
        )
        after = status(later)
        assert after is not None and int(after.group(1)) > int(before.group(1)) and after.group(2) == "4"
        done = wait(lambda lines: log.is_file(), "the session to end", timeout=300)
        assert log.read_text().strip() == "0", "\n".join(done)
        text = "\n".join(pane())
        places = re.findall(r"weirdml tiny · replay:slow.json · run \d · iteration 1: acc 1.0000 .* \[(\d)/4\]", text)
        assert len(places) == 4 and places == sorted(places), text
        assert "weirdml building tiny data (seed 0)" in text
    finally:
        subprocess.run([*tmux, "kill-server"], check=False)
