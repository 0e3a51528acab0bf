"""Models that need no network: the reference solution, the prompt's example, replays, and the
models answered through files (``queue:DIR``, ``human``).

They call no API, so their answers cost nothing (a known zero, not an unknown price); only what
an outside agent on the queue spends is unknown to the harness.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

from pytest_weirdml.errors import ModelError
from pytest_weirdml.extract import code_blocks
from pytest_weirdml.models.base import OFFLINE, Model, Request, Response, label
from pytest_weirdml.models.human import HumanModel
from pytest_weirdml.models.queue import QueueModel
from pytest_weirdml.records import IterationRecord, Usage
from pytest_weirdml.session import read_records

FREE = Usage(cost_usd=0.0)


def _fence(code: str) -> str:
    return f"```python\n{code.rstrip()}\n```\n"


class ReferenceModel(Model):
    """Submits the task's ``reference.py``: the ceiling a strong solution reaches here."""

    name = "reference"
    max_iterations = 1

    def generate(self, request: Request) -> Response:
        path = request.task.reference_path
        if not path.is_file():
            raise ModelError(f"{path}: not found; the 'reference' model needs the task's reference.py")
        return Response("The task's reference solution.\n\n" + _fence(path.read_text(encoding="utf-8")), FREE)


class BaselineModel(Model):
    """Submits the example script from the task prompt: the floor (about chance)."""

    name = "baseline"
    max_iterations = 1

    def generate(self, request: Request) -> Response:
        blocks = code_blocks(request.task.prompt)
        if not blocks:
            raise ModelError(f"{request.task.directory / 'prompt.md'}: no example script for the 'baseline' model")
        return Response("The prompt's example script.\n\n" + _fence(max(blocks, key=len)), FREE)


class ReplayModel(Model):
    """Answers from recorded responses, at no cost.

    The file is either a session's ``records.jsonl`` (answers looked up by task, run and
    iteration) or a JSON list of response texts given in order at every run of every task.
    """

    def __init__(self, path: str) -> None:
        if not path:
            raise ValueError("replay needs a file: --weirdml-model=replay:PATH (a records.jsonl or a JSON list)")
        self.path = Path(path).expanduser()
        self.name = label(f"replay:{path}")
        if not self.path.is_file():
            raise ValueError(f"replay file not found: {self.path}")
        self._by_key: dict[tuple[str, int, int], str] = {}
        self._ordered: list[str] = []
        if self.path.suffix == ".jsonl":
            for record in read_records(self.path):
                if isinstance(record, IterationRecord):
                    self._by_key[(record.task, record.run, record.iteration)] = record.response
        else:
            try:
                data = json.loads(self.path.read_text(encoding="utf-8"))
            except json.JSONDecodeError as exc:
                raise ValueError(f"replay file {self.path} is not valid JSON: {exc}") from None
            if not isinstance(data, list) or not all(isinstance(x, str) for x in data):
                raise ValueError(f"replay file {self.path} must be a JSON list of response strings")
            self._ordered = data
            self.max_iterations = len(data)
        self._calls: defaultdict[tuple[str, int], int] = defaultdict(int)

    def generate(self, request: Request) -> Response:
        if self._ordered:
            index = request.iteration - 1
            if index >= len(self._ordered):
                raise ModelError(f"{self.path}: no recorded response for iteration {request.iteration}")
            return Response(self._ordered[index], FREE)
        key = (request.task.name, request.run, request.iteration)
        if key not in self._by_key:
            raise ModelError(f"{self.path}: no recorded response for task {key[0]} run {key[1]} iteration {key[2]}")
        return Response(self._by_key[key], FREE)


# Each factory gets the text after "NAME:". The models answered from outside the harness (through
# files, by an agent or a person) live in queue.py and human.py and are registered here, after these.
OFFLINE.add("reference", lambda _arg: ReferenceModel())
OFFLINE.add("baseline", lambda _arg: BaselineModel())
OFFLINE.add("replay", ReplayModel, usage="replay:PATH")
OFFLINE.add("queue", QueueModel, usage="queue:DIR")
OFFLINE.add("human", HumanModel, usage="human[:DIR]")
