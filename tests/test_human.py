"""The human model, played the way a person plays it: in a terminal (tmux), with keystrokes."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import GOOD_SCRIPT, needs_bwrap, read_iterations, session_dir, write_tiny_task

from pytest_weirdml.models import Message, Request
from pytest_weirdml.models.human import HumanModel, render
from pytest_weirdml.tasks import load_task

# The terminal a person plays in, and an editor they might set: scripts/setup.sh installs both.
VIM = shutil.which("vim") or shutil.which("vim.tiny")
needs_tmux = pytest.mark.skipif(
    shutil.which("tmux") is None or VIM is None, reason="needs tmux and vim (scripts/setup.sh installs them)"
)
THINK_S = 1.5


class Tmux:
    """A private tmux server (its own socket) with one session."""

    def __init__(self, socket: Path) -> None:
        self.socket = socket

    def __call__(self, *args: str) -> str:
        done = subprocess.run(["tmux", "-S", str(self.socket), *args], capture_output=True, text=True, check=True)
        return done.stdout

    def screen(self, target: str) -> str:
        # -J joins the lines the pane wrapped, so long paths come back whole.
        return self("capture-pane", "-p", "-J", "-t", target)

    def wait_for(self, target: str, seen: Callable[[str], bool], timeout: float = 120) -> str:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            text = self.screen(target)
            if seen(text):
                return text
            time.sleep(0.2)
        raise AssertionError(f"not seen within {timeout} s; the pane shows:\n{self.screen(target)}")

    def type_lines(self, target: str, lines: list[str]) -> None:
        for line in lines:
            self("send-keys", "-t", target, "-l", line)
            self("send-keys", "-t", target, "Enter")


@needs_tmux
@needs_bwrap
def test_a_person_plays_a_run_in_a_terminal_with_the_editor_and_with_a_saved_file(
    pytester: pytest.Pytester, tiny: Path, base_args: list[str]
) -> None:
    human = pytester.path / "human"
    # A socket's path must be short (108 bytes), which pytester's directories are not.
    tmux = Tmux(Path(tempfile.mkdtemp(prefix="weirdml-tmux-")) / "socket")
    command = shlex.join(
        [sys.executable, "-m", "pytest", f"--weirdml-model=human:{human}", "--weirdml-runs=1", *base_args]
    )
    tmux("new-session", "-d", "-s", "play", "-x", "200", "-y", "50", "-c", str(pytester.path), "bash --norc")
    try:
        # The person's own terminal: an editor they chose, then the session.
        tmux.type_lines("play", [f"export EDITOR='{VIM} -u NONE -N -n'; {command}; echo session-ended-$?"])
        # Submission 1: the harness opens the editor on the draft; the request is above the line.
        tmux.wait_for("play", lambda text: "# WeirdML task tiny: run 0, submission 1" in text)
        time.sleep(THINK_S)
        tmux("send-keys", "-t", "play", "G", "o")
        tmux.type_lines("play", ["My first try.", "", "```python", *GOOD_SCRIPT.splitlines(), "```"])
        tmux("send-keys", "-t", "play", "Escape")
        tmux.type_lines("play", [":wq"])
        # Submission 2: the person leaves the editor without writing and saves a file from another shell.
        tmux.wait_for("play", lambda text: "# WeirdML task tiny: run 0, submission 2" in text)
        tmux.type_lines("play", [":q!"])
        screen = tmux.wait_for("play", lambda text: "nothing written below the line" in text)
        answer = re.findall(r"save your answer to (\S+\.answer\.md)", screen)[-1]
        assert re.fullmatch(rf"{re.escape(str(human))}/000002-[0-9a-f]{{10}}-i2\.answer\.md", answer), answer
        tmux("new-window", "-t", "play", "-n", "shell", "-c", str(pytester.path), "bash --norc")
        time.sleep(THINK_S)
        tmux.type_lines("play:shell", [f"cat > {answer} <<'END'", "I keep my first script.", "END"])
        ended = tmux.wait_for("play:0", lambda text: re.search(r"^session-ended-\d+", text, re.MULTILINE) is not None)
        assert re.search(r"^session-ended-0", ended, re.MULTILINE), ended
    finally:
        subprocess.run(["tmux", "-S", str(tmux.socket), "kill-server"], check=False)
        shutil.rmtree(tmux.socket.parent, ignore_errors=True)

    (first_request_file,) = human.glob("000001-*.request.md")
    first_request = first_request_file.read_text()
    assert "## System prompt" in first_request and "## Task" in first_request
    second = Path(answer.replace(".answer.md", ".request.md")).read_text()
    assert "## Your answer 1\n\nMy first try." in second and "## Feedback on submission 1" in second
    first, last = read_iterations(session_dir(pytester) / "records.jsonl")
    assert first["model"] == last["model"] == "human:human"
    assert first["response"].startswith("My first try.") and first["score"] == 1.0
    assert last["response"] == "I keep my first script.\n" and last["score"] == 0.0
    for record in (first, last):
        # The clock runs from the request to the answer read: at least the person's pause.
        assert THINK_S <= record["usage"]["think_s"] < 120, record["usage"]
        assert record["usage"]["cost_usd"] == 0.0


def test_the_request_reads_as_markdown_with_the_feedback_so_far(tmp_path: Path) -> None:
    task = load_task(write_tiny_task(tmp_path))
    model = HumanModel(str(tmp_path / "h"))
    messages = (
        Message("system", "SYSTEM"),
        Message("user", task.prompt),
        Message("assistant", "ANSWER ONE"),
        Message("user", "FEEDBACK ONE"),
        Message("assistant", "ANSWER TWO"),
        Message("user", "FEEDBACK TWO"),
    )
    request = Request(messages=messages, task=task, run=0, iteration=3)
    ticket = model.submit(request)
    text = render(request, ticket, model.settle_s)
    assert (tmp_path / "h" / f"{ticket.id}.request.md").read_text() == text
    assert str(ticket.answer) in text.splitlines()[4]
    titles = re.findall(r"^## (.+)$", text, re.MULTILINE)
    assert titles == [
        "System prompt",
        "Task",
        "Your answer 1",
        "Feedback on submission 1",
        "Your answer 2",
        "Feedback on submission 2",
    ]
    assert text.index("FEEDBACK TWO") > text.index("ANSWER TWO") > text.index("FEEDBACK ONE")
