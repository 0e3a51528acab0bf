"""What each run in flight is doing right now: building data, waiting for the model, running a script.

A process keeps one ``Board``: the runs it has in flight, each with what it does and since when,
and what it announced (``say``: a data build starting), for the controller to print once.
In a single process the controller's status line reads that board itself. An xdist worker's
board also writes itself, whole, to ``<directory>/<worker>.json`` at every change (written
aside and renamed into place, so a reader never sees half a file), and the controller reads
every worker's file (``read_boards``): as with the records file, the workers need no channel
to the controller beyond the session's own files.

No pytest here.
"""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path


@dataclass(frozen=True)
class Doing:
    """One run in flight: its item's name, what it does, since when (seconds since the epoch)."""

    item: str
    what: str
    since: float


class Board:
    """The runs in flight in this process; with ``path``, mirrored to that file at each change."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._doing: dict[str, Doing] = {}
        self._said: list[str] = []

    def set(self, nodeid: str, item: str, what: str) -> None:
        with self._lock:
            self._doing[nodeid] = Doing(item, what, time.time())
            self._save()

    def clear(self, nodeid: str) -> None:
        with self._lock:
            if self._doing.pop(nodeid, None) is not None:
                self._save()

    def say(self, text: str) -> None:
        with self._lock:
            self._said.append(text)
            self._save()

    def entries(self) -> list[Doing]:
        with self._lock:
            return list(self._doing.values())

    def said(self) -> list[str]:
        with self._lock:
            return list(self._said)

    def _save(self) -> None:
        if self.path is None:
            return
        aside = self.path.with_name(f".{self.path.name}.{os.getpid()}")
        try:
            state = {"doing": [asdict(d) for d in self._doing.values()], "said": self._said}
            aside.write_text(json.dumps(state), encoding="utf-8")
            os.replace(aside, self.path)
        except OSError:
            pass  # the status line misses one update; the run goes on


def read_boards(directory: Path) -> tuple[list[Doing], list[str]]:
    """Every worker's runs in flight and announcements, from the files their boards write."""
    doing: list[Doing] = []
    said: list[str] = []
    for path in sorted(directory.glob("*.json")):
        try:
            state = json.loads(path.read_text(encoding="utf-8"))
            found = [Doing(str(e["item"]), str(e["what"]), float(e["since"])) for e in state["doing"]]
            told = [str(text) for text in state["said"]]
        except (OSError, ValueError, TypeError, KeyError):
            continue  # unreadable: its worker writes it whole again at its next change
        doing += found
        said += told
    return doing, said
