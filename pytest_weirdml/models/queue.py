"""A model answered from outside the harness, through files: ``queue:DIR``.

Every request is written to ``DIR/<id>.request.json``: the conversation in the OpenAI chat
format, where the run stands, and what the answerer must do (the answer's path, its format, the
size cap, the deadline). The answer is read from ``DIR/<id>.answer.md`` once that file exists
and has not changed for ``settle_s``. Ids are ``<sequence>-<conversation>-i<iteration>``: the
sequence is taken under a lock on the directory, so ids sort in request order and stay unique
across xdist workers and concurrent sessions that share ``DIR``; they are read from the
harness's own files only (a foreign name is ignored, one no queue writes with a warning). The
answerer gets what the published protocol gives a model, the conversation, and not the task's
name (a name such as ``hidden_parity`` would say what the task hides): ``conversation`` is an
opaque key of the run, a random token its plan keeps (``RunPlan.conversation``), the same for
each of its requests and for a resumed run. When the harness stops waiting (the timeout, an
interrupt) it writes ``DIR/<id>.cancelled``.

``DIR`` is the answerer's to write, so every file the harness writes there is created new and
renamed into place (``pytest_weirdml.atomic.write_atomic``), never written through a name an answerer could plant
a link at; every wait, the one for the directory's lock included, ends at the answer timeout.

The time from writing the request to reading the answer is the think time
(``Usage.think_s``). The answer is untrusted text: read through a descriptor that refuses
links, hard links and anything but a regular file, at most ``ANSWER_CAP_BYTES`` (a longer one is cut there
and marked truncated, as a provider's output cap would), decoded as UTF-8 with bad bytes replaced.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import stat
import time
import warnings
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from pytest_weirdml.atomic import write_atomic
from pytest_weirdml.errors import ModelError
from pytest_weirdml.models.base import Model, Request, Response, label
from pytest_weirdml.records import Usage

# An outside agent or a person may take long over one answer; a dead answerer is caught by this.
DEFAULT_TIMEOUT_S = 8 * 3600.0
ANSWER_CAP_BYTES = 1 << 20
SETTLE_S = 1.0
POLL_S = 0.2
REQUEST_SUFFIX = ".request.json"
ANSWER_SUFFIX = ".answer.md"
CANCELLED_SUFFIX = ".cancelled"
FORMAT = "weirdml-queue-request/1"
# An id: the sequence (six digits, more once a million requests are passed), the conversation
# token, the iteration. Only the harness's own files (requests, cancellations) give sequences.
_ID = r"(\d{6,18})-[0-9a-f]{10}-i\d{1,6}"
_OWN = re.compile(_ID + "(?:" + re.escape(REQUEST_SUFFIX) + "|" + re.escape(CANCELLED_SUFFIX) + ")")
_NUMBERED = re.compile(r"(\d+)-")
_TOKEN = re.compile(r"[0-9a-f]{10}")


class QueueNameWarning(UserWarning):
    """A file in the queue directory is named like a request the harness wrote, but is none."""


@dataclass(frozen=True)
class Ticket:
    """One request on the queue: its id and its files."""

    id: str
    request: Path
    answer: Path
    cancelled: Path
    written_at: datetime
    deadline: datetime


def decode_answer(data: bytes) -> str:
    """Untrusted bytes as text: UTF-8 with bad bytes replaced, no byte-order mark, no NUL."""
    return data.decode("utf-8", errors="replace").removeprefix("\ufeff").replace("\x00", "\ufffd")


def read_answer(path: Path, cap: int = ANSWER_CAP_BYTES) -> tuple[bytes, bool]:
    """At most ``cap`` bytes of a regular file, never through a link or a hard link (another name
    of a file someone else wrote: what the harness may read, the answerer may not); and whether
    it held more."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise ModelError(f"{path}: cannot be read ({exc.strerror}); write the answer as a plain file there") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ModelError(f"{path}: not a regular file; write the answer as a plain file there")
        if info.st_nlink > 1:
            raise ModelError(
                f"{path}: a hard link ({info.st_nlink} names of one file); write the answer as a plain file there"
            )
        chunks: list[bytes] = []
        left = cap + 1
        while left > 0 and (chunk := os.read(fd, min(left, 1 << 16))):
            chunks.append(chunk)
            left -= len(chunk)
    finally:
        os.close(fd)
    data = b"".join(chunks)
    return data[:cap], len(data) > cap


class QueueModel(Model):
    """Writes each request to a directory and waits for the answer file beside it."""

    kind = "queue"
    # An outside agent's spending is not known to the harness.
    cost_usd: float | None = None

    def __init__(
        self,
        directory: str,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        settle_s: float = SETTLE_S,
        poll_s: float = POLL_S,
        name: str | None = None,
    ) -> None:
        if not directory:
            raise ValueError(f"{self.kind} needs a directory: --weirdml-model={self.kind}:DIR")
        self.directory = Path(directory).expanduser().resolve()
        self.name = name or label(f"{self.kind}:{directory}")
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ValueError(f"{self.kind}:{directory}: cannot use {self.directory} ({exc.strerror})") from None
        self.timeout_s = timeout_s
        self.settle_s = settle_s
        self.poll_s = poll_s
        # Conversation tokens of requests that bring none (a model driven outside the loop).
        self._conversations: dict[tuple[str, int], str] = {}
        self._warned: set[str] = set()

    def generate(self, request: Request) -> Response:
        clock = time.monotonic()
        ticket = self.submit(request)
        try:
            text, truncated = self.answer(ticket, clock)
        except BaseException as exc:  # a timeout, an interrupt: tell the answerer to stop
            self._cancel(ticket, exc)
            raise
        think = time.monotonic() - clock
        usage = Usage(
            cost_usd=self.cost_usd,
            latency_s=think,
            think_s=think,
            truncated=truncated,
            stop_reason=f"answer over {ANSWER_CAP_BYTES} bytes, cut there" if truncated else None,
        )
        return Response(text, usage)

    def submit(self, request: Request) -> Ticket:
        """Write the request under the next id, taken and written under the directory's lock
        (waited for at most the answer timeout: whoever holds it cannot hold the session)."""
        written_at = datetime.now(UTC)
        deadline = written_at + timedelta(seconds=self.timeout_s)
        who = self.conversation(request)
        lock = self.directory / ".ids.lock"
        try:
            with FileLock(lock, timeout=self.timeout_s):
                ident = f"{self.next_sequence():06d}-{who}-i{request.iteration}"
                ticket = Ticket(
                    ident,
                    self.directory / f"{ident}{REQUEST_SUFFIX}",
                    self.directory / f"{ident}{ANSWER_SUFFIX}",
                    self.directory / f"{ident}{CANCELLED_SUFFIX}",
                    written_at,
                    deadline,
                )
                write_atomic(ticket.request, json.dumps(self.payload(request, ticket), indent=2, ensure_ascii=False))
        except Timeout:
            raise ModelError(
                f"{lock} stayed locked by another process for {self.timeout_s:g} s (--weirdml-answer-timeout); "
                "no request was written"
            ) from None
        except OSError as exc:
            raise ModelError(f"cannot write a request in {self.directory} ({exc.strerror or exc})") from None
        return ticket

    def next_sequence(self) -> int:
        """One past the highest sequence of the harness's own files in the directory. Other names
        are the answerer's and are ignored; one that is numbered as no queue numbers its files (a
        sequence of over 18 digits, or a request or cancellation that is not named as an id) is
        ignored with a warning, once per name."""
        taken = 0
        for name in os.listdir(self.directory):
            own = _OWN.fullmatch(name)
            if own is not None:
                taken = max(taken, int(own.group(1)))
                continue
            numbered = _NUMBERED.match(name)
            odd = numbered is not None and (
                len(numbered.group(1)) > 18 or name.endswith((REQUEST_SUFFIX, CANCELLED_SUFFIX))
            )
            if odd and name not in self._warned:
                self._warned.add(name)
                shown = ascii(name if len(name) <= 60 else name[:40] + "..." + name[-12:])
                warnings.warn(
                    QueueNameWarning(f"{self.directory}: {shown} is not a file this queue wrote; ignored"), stacklevel=2
                )
        return taken + 1

    def conversation(self, request: Request) -> str:
        """The run's key on the queue, blind to the task's name: the random token of the run's plan
        (``Request.conversation``), the same for each of its requests and when the run is resumed.
        A request without a well-formed token gets a random one per task and run, kept for this
        model's life."""
        if _TOKEN.fullmatch(request.conversation):
            return request.conversation
        return self._conversations.setdefault((request.task.name, request.run), secrets.token_hex(5))

    def payload(self, request: Request, ticket: Ticket) -> dict[str, Any]:
        """The request file: everything an answerer needs, and nothing else to read."""
        return {
            "format": FORMAT,
            "id": ticket.id,
            "instructions": (
                "You are the model in a WeirdML benchmark run. `messages` is the conversation so far in the "
                "OpenAI chat format: the system prompt, the task, then each of your earlier answers and the "
                "harness's feedback on it. Reply with the next assistant message: Markdown with your complete "
                "Python script in one ```python fenced block (the harness runs the longest block fenced "
                "```python or bare ```). "
                f"Write the reply, as UTF-8 text, to `answer_path`, atomically: write it to a temporary file in "
                f"the same directory whose name does not end in {ANSWER_SUFFIX}, then rename it to `answer_path`. "
                f"The harness reads the answer once the file exists and has not changed for {self.settle_s:g} s, "
                f"at most {ANSWER_CAP_BYTES} bytes (a longer answer is cut there). It waits until `deadline` "
                f"({self.timeout_s:g} s after `requested_at`); then the run ends in an infrastructure error and "
                "`cancelled_path` appears. Answer each request once; a request whose answer or cancelled file "
                "exists, or whose deadline has passed, is done."
            ),
            "answer_path": str(ticket.answer),
            "cancelled_path": str(ticket.cancelled),
            "answer_format": "markdown, with the script in one ```python fenced block",
            "max_answer_bytes": ANSWER_CAP_BYTES,
            "settle_s": self.settle_s,
            "timeout_s": self.timeout_s,
            "requested_at": ticket.written_at.isoformat(timespec="seconds"),
            "deadline": ticket.deadline.isoformat(timespec="seconds"),
            "model": self.name,
            "conversation": self.conversation(request),
            "iteration": request.iteration,
            "messages": [{"role": m.role, "content": m.content} for m in request.messages],
        }

    def answer(self, ticket: Ticket, clock: float) -> tuple[str, bool]:
        """The answer once it has settled; ``ModelError`` naming the file at the deadline."""
        data, truncated = self.wait(ticket, clock + self.timeout_s)
        return decode_answer(data), truncated

    def wait(self, ticket: Ticket, until: float) -> tuple[bytes, bool]:
        """Poll ``ticket.answer`` until it exists and its size and time have not changed for ``settle_s``."""
        seen: tuple[int, int, int] | None = None
        since = 0.0
        while True:
            now = time.monotonic()
            try:
                info = os.lstat(ticket.answer)
            except FileNotFoundError:
                seen = None
            else:
                state = (info.st_ino, info.st_size, info.st_mtime_ns)
                if state != seen:
                    seen, since = state, now
                elif now - since >= self.settle_s:
                    return read_answer(ticket.answer)
            if now >= until:
                raise ModelError(
                    f"no answer in {ticket.answer} after {self.timeout_s:g} s (--weirdml-answer-timeout); "
                    f"the request is {ticket.request}"
                )
            time.sleep(min(self.poll_s, max(until - now, 0.0) + 0.01))

    def _cancel(self, ticket: Ticket, exc: BaseException) -> None:
        reason = str(exc) if isinstance(exc, ModelError) else f"the harness stopped waiting ({type(exc).__name__})"
        with contextlib.suppress(OSError):
            write_atomic(ticket.cancelled, reason + "\n")
