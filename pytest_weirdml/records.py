"""Run and iteration records, and the JSON-lines store every finished iteration goes to."""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from filelock import FileLock

RECORDS_FILE = "records.jsonl"
SCHEMA_VERSION = 1


@dataclass
class IterationRecord:
    """One submission: what was asked, what came back, how the script ran and scored."""

    task: str
    model: str
    run: int
    iteration: int
    prompt: str
    response: str
    code: str | None
    output: str
    output_bytes: int
    exit_code: int | None
    timed_out: bool
    duration_s: float
    score: float
    zero_reason: str | None
    input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    cached_tokens: int = 0
    cost_usd: float | None = None
    model_latency_s: float = 0.0
    # Failed model calls before the answer, each {"attempt", "error", "wait_s"}.
    retries: list[dict[str, Any]] = field(default_factory=list)
    started_at: str = ""
    wall_s: float = 0.0
    sandbox: str = ""
    # The Ray node that ran the script ("" for this machine).
    node: str = ""
    session: str = ""
    schema: int = SCHEMA_VERSION

    @property
    def failed(self) -> bool:
        """The submission produced no usable predictions (crash, timeout, no code, bad file)."""
        return self.zero_reason is not None

    @property
    def code_lines(self) -> int:
        return len(self.code.splitlines()) if self.code else 0

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), ensure_ascii=False)

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> IterationRecord:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in raw.items() if k in names})


@dataclass
class RunRecord:
    """One (task, model, run): its iterations in order; the run score is their maximum."""

    task: str
    model: str
    run: int
    iterations: list[IterationRecord] = field(default_factory=list)

    @property
    def score(self) -> float:
        return max((it.score for it in self.iterations), default=0.0)

    def summary(self) -> dict[str, Any]:
        """Plain JSON types only: this travels from xdist workers in ``user_properties``."""
        its = self.iterations
        costs = [it.cost_usd for it in its if it.cost_usd is not None]
        return {
            "task": self.task,
            "model": self.model,
            "run": self.run,
            "score": self.score,
            "scores": [it.score for it in its],
            "zero_reasons": [it.zero_reason for it in its],
            "exec_s": [round(it.duration_s, 3) for it in its if it.code is not None],
            "code_lines": [it.code_lines for it in its if it.code is not None],
            "output_tokens": [it.output_tokens for it in its],
            "cost_usd": sum(costs) if costs else None,
        }


class RecordStore:
    """Appends iterations to ``records.jsonl``; safe for several processes (xdist workers)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self.path = directory / RECORDS_FILE
        self._lock = FileLock(str(self.path) + ".lock")
        self._drop_torn_tail()

    def _drop_torn_tail(self) -> None:
        """A session killed mid-write leaves half a line; new lines must not be glued to it."""
        with self._lock:
            if not self.path.is_file():
                return
            with open(self.path, "rb+") as fh:
                data = fh.read()
                if data and not data.endswith(b"\n"):
                    fh.truncate(data.rfind(b"\n") + 1)

    def finished(self, task: str, model: str, run: int) -> list[IterationRecord]:
        """The iterations this directory already holds for one run, in order (for resuming)."""
        if not self.path.is_file():
            return []
        found = {r.iteration: r for r in read_records(self.path) if (r.task, r.model, r.run) == (task, model, run)}
        # Only an unbroken prefix 1..k can be continued.
        prefix: list[IterationRecord] = []
        while len(prefix) + 1 in found:
            prefix.append(found[len(prefix) + 1])
        return prefix

    def append(self, record: IterationRecord) -> None:
        line = record.to_json() + "\n"
        with self._lock, open(self.path, "a", encoding="utf-8") as fh:
            fh.write(line)
            fh.flush()
            # A session killed right after this call must still find the line on disk.
            os.fsync(fh.fileno())

    def write_transcript(self, run: RunRecord) -> Path:
        path = self.directory / "transcripts" / run.task / f"{_safe(run.model)}-{run.run}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(render_transcript(run), encoding="utf-8")
        return path


def read_records(path: Path) -> Iterator[IterationRecord]:
    """Every complete line of a records file (a torn last line from a crash is skipped)."""
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if not line.endswith("\n"):
                break
            yield IterationRecord.from_dict(json.loads(line))


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)


def render_transcript(run: RunRecord) -> str:
    """A readable Markdown transcript of a run."""
    lines = [f"# {run.task} · {run.model} · run {run.run}", "", f"Run score: {run.score:.4f}", ""]
    for it in run.iterations:
        verdict = f"{it.score:.4f}" + (f" ({it.zero_reason})" if it.zero_reason else "")
        lines += [
            f"## Iteration {it.iteration}: {verdict}",
            "",
            f"Script: exit {it.exit_code}, {it.duration_s:.1f} s" + (", timed out" if it.timed_out else ""),
            "",
            "### Prompt",
            "",
            it.prompt,
            "",
            "### Response",
            "",
            it.response,
            "",
            "### Output",
            "",
            "```text",
            it.output,
            "```",
            "",
        ]
    return "\n".join(lines)
