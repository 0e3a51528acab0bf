"""SIGTERM ends a session as Ctrl-C does.

``timeout``, CI runners and container stops send SIGTERM, whose default ends the process at
once: no summary or report for the runs that finished, and a ``queue:`` request left open. A
session turns its first SIGTERM into a ``KeyboardInterrupt`` (``Terminated``) in the main
thread, which takes Ctrl-C's path: the open request is cancelled (the queue model writes its
``.cancelled`` file), the run in flight is left without an end and counted as not finished
("the session ended first"), the summary and the reports are written from the records of what
finished, and pytest exits with status 2 (interrupted).

Under xdist every process installs the handler (a signal sent to the process group, as
``timeout`` sends it, reaches each one), and the controller passes a SIGTERM sent to it alone (a
container stop) on to its workers, so each cancels its own request. Later SIGTERMs are ignored
while the session ends (SIGKILL still ends it at once). A handler someone else installed is left
alone, and a process forked from the session (a data builder's pool worker) ends on SIGTERM as
it would without the handler.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from pathlib import Path
from types import FrameType

import pytest


class Terminated(KeyboardInterrupt):
    """The session received SIGTERM; handled as Ctrl-C is."""


def interrupt_on_sigterm(config: pytest.Config) -> None:
    """Install the handler for this pytest process until it unconfigures."""
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return
    received: list[int] = []
    owner = os.getpid()

    def on_sigterm(signum: int, frame: FrameType | None) -> None:
        if os.getpid() != owner:
            # A process forked from the session (a data builder's pool worker) inherits this
            # handler: there SIGTERM keeps its default, or a worker stopped while it holds its
            # pool's queue lock leaves its siblings, and the session, waiting forever.
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)
            return
        if received:
            return  # the session is already ending
        received.append(signum)
        if config.pluginmanager.has_plugin("dsession"):
            _forward_to_children()
        raise Terminated("the session received SIGTERM")

    def restore() -> None:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)

    signal.signal(signal.SIGTERM, on_sigterm)
    os.register_at_fork(after_in_child=_default_in_child)
    config.add_cleanup(restore)


def _default_in_child() -> None:
    """A process forked from the session (a data builder's pool worker) ends on SIGTERM at once,
    as it would without the session's handler: raising there, where it may hold its pool's queue
    lock, would leave its siblings and the session waiting forever."""
    if signal.getsignal(signal.SIGTERM) not in (signal.SIG_DFL, signal.SIG_IGN):
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _forward_to_children() -> None:
    """SIGTERM to this process's children: an xdist controller's are its workers."""
    me = str(os.getpid())
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            parent = Path(entry.path, "stat").read_text().rsplit(")", 1)[1].split()[1]
        except (OSError, IndexError):
            continue
        if parent == me:
            with contextlib.suppress(OSError):
                os.kill(int(entry.name), signal.SIGTERM)
