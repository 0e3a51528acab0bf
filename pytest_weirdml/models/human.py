"""A person as the model: ``human`` (or ``human:DIR``).

The queue protocol (``models/queue.py``) with a person at the other end. Each request is also
written as readable Markdown, ``DIR/<id>.request.md`` (the system prompt, the task prompt, the
earlier answers and the feedback so far), and announced on the terminal (``/dev/tty``, which
pytest's output capture leaves alone, also under xdist; standard error when there is no
terminal). The person saves the answer to ``DIR/<id>.answer.md`` with any editor; or, when the
terminal is interactive and ``$EDITOR`` is set, the harness opens ``$EDITOR`` on a draft that
holds the request above a marker line, and what the person writes below the line is the answer.
The clock runs from writing the request to reading the answer (``Usage.think_s``).

``DIR`` may be writable by others, so its files are written as the queue writes its own (created
new and renamed into place), and the draft lives in a directory of the harness's own: an editor
opens a path by name and would write through a link planted there. Waiting for the terminal
(another worker's request in the editor) and for the editor end at the answer timeout.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from pytest_weirdml.atomic import write_atomic
from pytest_weirdml.errors import ModelError
from pytest_weirdml.models.base import Request
from pytest_weirdml.models.queue import ANSWER_CAP_BYTES, QueueModel, Ticket, decode_answer, read_answer

DEFAULT_DIR = "weirdml-human"
MARKER = "<!-- Write your answer below this line. Everything above it is left out. -->"


def render(request: Request, ticket: Ticket, settle_s: float) -> str:
    """The request as a person reads it."""
    head = [
        f"# WeirdML task {request.task.name}: run {request.run}, submission {request.iteration}",
        "",
        "Save your answer (Markdown, with your whole script in one ```python block) to",
        "",
        f"    {ticket.answer}",
        "",
        f"The clock runs from {ticket.written_at:%Y-%m-%d %H:%M:%S} UTC until your answer is read, once the "
        f"file has not changed for {settle_s:g} s. The harness waits until {ticket.deadline:%Y-%m-%d %H:%M:%S} UTC.",
    ]
    sections = []
    for index, message in enumerate(request.messages):
        if message.role == "system":
            title = "System prompt"
        elif index == 1:
            title = "Task"
        elif message.role == "assistant":
            title = f"Your answer {index // 2}"
        else:
            title = f"Feedback on submission {index // 2}"
        sections.append(f"## {title}\n\n{message.content.rstrip()}\n")
    return "\n".join(head) + "\n\n" + "\n".join(sections)


@contextlib.contextmanager
def terminal() -> Iterator[int | None]:
    """A descriptor of the controlling terminal, or None when there is none."""
    try:
        fd = os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError:
        yield None
        return
    try:
        yield fd if os.isatty(fd) else None
    finally:
        os.close(fd)


def announce(text: str) -> None:
    with terminal() as tty:
        if tty is not None:
            os.write(tty, f"\n{text}\n".replace("\n", "\r\n").encode())
        else:
            sys.stderr.write(f"\n{text}\n")
            sys.stderr.flush()


class HumanModel(QueueModel):
    """Each request as a Markdown file and a line on the terminal; the answer from a file or ``$EDITOR``."""

    kind = "human"
    # The status line is not redrawn while a person may be at the terminal (progress.PERSON).
    waiting_for = "a person"
    # A person calls no API.
    cost_usd: float | None = 0.0

    def __init__(self, directory: str = "", **options: Any) -> None:
        super().__init__(directory or DEFAULT_DIR, name=None if directory else "human", **options)
        # Each open request as the person reads it (never read back from the directory).
        self._shown: dict[str, str] = {}

    def submit(self, request: Request) -> Ticket:
        ticket = super().submit(request)
        shown = ticket.request.with_name(f"{ticket.id}.request.md")
        text = render(request, ticket, self.settle_s)
        try:
            write_atomic(shown, text)
        except OSError as exc:
            error = ModelError(f"cannot write {shown} ({exc.strerror or exc})")
            self._cancel(ticket, error)
            raise error from None
        self._shown[ticket.id] = text
        announce(
            f"weirdml human: task {request.task.name}, run {request.run}, submission {request.iteration}: "
            f"read {shown}\nand save your answer to {ticket.answer} (waiting until {ticket.deadline:%H:%M} UTC)"
        )
        return ticket

    def answer(self, ticket: Ticket, clock: float) -> tuple[str, bool]:
        shown = self._shown.pop(ticket.id, "")
        editor = os.environ.get("EDITOR", "").strip()
        if editor:
            drafted = self._edit(ticket, editor, shown, clock + self.timeout_s)
            if drafted is not None:
                return drafted
        return super().answer(ticket, clock)

    def _edit(self, ticket: Ticket, editor: str, shown: str, until: float) -> tuple[str, bool] | None:
        """Open ``$EDITOR`` on a draft in a directory of the harness's own; the answer written below
        the marker, or None (no terminal, no editor, the deadline passed, nothing written: wait for
        the file)."""
        prefix = shown + f"\n{MARKER}\n\n"
        with tempfile.TemporaryDirectory(prefix="weirdml-draft-") as private:
            draft = Path(private) / f"{ticket.id}.draft.md"
            if not self._run_editor(editor, draft, prefix, ticket.answer, until) or os.path.lexists(ticket.answer):
                return None  # (an answer saved there from elsewhere meanwhile is read as such)
            data, cut = read_answer(draft, cap=ANSWER_CAP_BYTES + len(prefix.encode()))
        text = decode_answer(data)
        text = text.split(MARKER, 1)[1] if MARKER in text else text
        if not text.strip():
            announce(f"weirdml human: nothing written below the line; save your answer to {ticket.answer}")
            return None
        reply = text.lstrip("\n")
        try:
            write_atomic(ticket.answer, reply)
        except OSError as exc:
            raise ModelError(f"cannot write {ticket.answer} ({exc.strerror or exc})") from None
        data = reply.encode("utf-8")
        return decode_answer(data[:ANSWER_CAP_BYTES]), cut or len(data) > ANSWER_CAP_BYTES

    def _run_editor(self, editor: str, draft: Path, prefix: str, answer: Path, until: float) -> bool:
        """Write the draft and run the editor on it, one request at a time on the terminal; False
        when there is no terminal or editor, the answer was saved while waiting for the terminal,
        or the deadline passed (the editor is then closed)."""
        lock = self._take_terminal(answer, until)
        if lock is None:
            return False
        try:
            with terminal() as tty:
                if tty is None:
                    return False
                draft.write_text(prefix, encoding="utf-8")
                try:
                    editing = subprocess.Popen([*shlex.split(editor), str(draft)], stdin=tty, stdout=tty, stderr=tty)
                except OSError as exc:
                    announce(f"weirdml human: cannot start $EDITOR ({editor}: {exc.strerror}); save the answer instead")
                    return False
                try:
                    editing.wait(timeout=max(until - time.monotonic(), 0.0))
                except subprocess.TimeoutExpired:
                    _close(editing)
                    announce("weirdml human: the deadline passed; the editor was closed")
                    return False
                except BaseException:  # an interrupt: the editor goes with the session
                    _close(editing)
                    raise
        finally:
            lock.release()
        return True

    def _take_terminal(self, answer: Path, until: float) -> FileLock | None:
        """The terminal's lock, once no other request of this directory is in the editor; None when
        the answer is saved meanwhile, the deadline passes or the lock cannot be taken."""
        lock = FileLock(self.directory / ".terminal.lock")
        while True:
            try:
                lock.acquire(timeout=max(min(self.poll_s, until - time.monotonic()), 0.0))
                return lock
            except Timeout:
                if os.path.lexists(answer) or time.monotonic() >= until:
                    return None
            except OSError:  # a lock file that cannot be opened (not a regular file, say)
                return None


def _close(process: subprocess.Popen[bytes]) -> None:
    """End an editor still open (the deadline, an interrupt): asked first, so it restores the terminal."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
