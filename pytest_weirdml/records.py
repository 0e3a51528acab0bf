"""The records a session keeps: what one model call cost, one submission, the end of a run.

A session's ``records.jsonl`` holds one JSON object per line, of two kinds (the ``kind`` key):
``iteration`` (an ``IterationRecord``, appended the moment a submission is scored) and
``run_end`` (a ``RunEnd``: the run finished, or a harness error stopped it). Lines are written
from these dataclasses and read back into them, so a field added to a dataclass is one line
here and nothing else changes; unknown keys in old or newer files are ignored. Every line read
back is checked against its dataclass's schema first (``pytest_weirdml.schema``): a records file
may come from anyone.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any, Literal

from pytest_weirdml import schema
from pytest_weirdml.redact import redact_values
from pytest_weirdml.untrusted import valid_unicode

SCHEMA_VERSION = 2
ITERATION = "iteration"
RUN_END = "run_end"

FINISHED = "finished"
ERROR = "error"
# A run with records but no end: its session was killed or interrupted mid-run.
INCOMPLETE = "incomplete"
Status = Literal["finished", "error", "incomplete"]


@dataclass(frozen=True)
class Usage:
    """What one model call used and cost; travels untouched from the provider to the record.

    ``input_tokens`` counts the whole prompt, ``cached_tokens`` the part of it read from the
    provider's prompt cache; ``output_tokens`` counts everything generated, ``reasoning_tokens``
    the hidden part of it. ``cost_usd`` is ``None`` when the model has no price. ``retries``
    lists the failed attempts before the answer, each ``{"attempt", "error", "wait_s"}``.
    ``stop_reason`` is why the provider says the answer ended, in its own words (``end_turn``,
    ``length``, ``MAX_TOKENS``); ``truncated`` that it ended at ``max_output_tokens``, the output
    cap the call ran under (``None`` when the provider was given none). ``think_s`` is the measured
    time from writing a request to reading its answer, for a model answered from outside the
    harness (``human``, ``queue:DIR``); ``None`` for the others.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    cached_tokens: int = 0
    cost_usd: float | None = None
    latency_s: float = 0.0
    retries: tuple[dict[str, Any], ...] = ()
    stop_reason: str | None = None
    truncated: bool = False
    max_output_tokens: int | None = None
    think_s: float | None = None

    def redacted(self) -> Usage:
        """A copy whose retry messages (a provider's error text) hold no secret."""
        return dataclasses.replace(self, retries=tuple(redact_values(dict(r)) for r in self.retries))

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> Usage:
        schema.check_usage(raw, _annotations(cls))
        known = _known(cls, raw)
        known["retries"] = tuple(dict(r) for r in known.get("retries", ()))
        return cls(**known)


# Records of schema 1 kept the usage fields flat in the iteration, the latency under this name.
_FLAT_USAGE = {f.name: f.name for f in dataclasses.fields(Usage)} | {"model_latency_s": "latency_s"}


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
    usage: Usage = field(default_factory=Usage)
    started_at: str = ""
    wall_s: float = 0.0
    sandbox: str = ""
    # How the script was isolated: bwrap+cgroups, bwrap, docker or none ("" before it was recorded).
    isolation: str = ""
    # The Ray node that ran the script ("" for this machine).
    node: str = ""
    session: str = ""
    # Records from before this field existed were all made under the disclosing prompt.
    protocol: str = "informed"
    # The data identity: the seed the task's data was built from and its cache key
    # (data version, seed, builder hash).
    data_seed: int | None = None
    data_key: str = ""
    # What the run was allowed: its number of submissions and the time limit per script.
    iterations_planned: int = 0
    time_limit_s: float = 0.0
    # How the system prompt named the hardware the script ran on.
    hardware: str = ""
    system_prompt: str | None = None
    # The task's [time_estimates] (horizons.estimates), once per run like the system prompt.
    time_estimates: dict[str, Any] | None = None
    kind: str = ITERATION
    schema: int = SCHEMA_VERSION

    @property
    def failed(self) -> bool:
        """The submission produced no usable predictions (crash, timeout, no code, bad file)."""
        return self.zero_reason is not None

    @property
    def code_lines(self) -> int:
        return len(self.code.splitlines()) if self.code else 0

    def to_json(self) -> str:
        # A lone surrogate (a provider's JSON may carry one) cannot be written as UTF-8.
        return valid_unicode(json.dumps(dataclasses.asdict(self), ensure_ascii=False))

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> IterationRecord:
        schema.check_record(raw, _annotations(cls))
        known = _known(cls, raw)
        if isinstance(raw.get("usage"), dict):
            known["usage"] = Usage.from_dict(raw["usage"])
        else:
            flat = {new: raw[old] for old, new in _FLAT_USAGE.items() if old in raw}
            known["usage"] = Usage.from_dict(flat)
        known.setdefault("schema", 1)
        return cls(**known)


@dataclass
class RunEnd:
    """A run ended: ``finished`` (every submission made) or ``error`` (the harness, the sandbox
    or the provider broke; the run is not scored). The last end of a run wins, unless an
    iteration of the run was recorded after it (a resumed session went on)."""

    task: str
    model: str
    run: int
    status: str
    error: str | None = None
    ended_at: str = ""
    session: str = ""
    kind: str = RUN_END
    schema: int = SCHEMA_VERSION

    def to_json(self) -> str:
        # A lone surrogate (a provider's JSON may carry one) cannot be written as UTF-8.
        return valid_unicode(json.dumps(dataclasses.asdict(self), ensure_ascii=False))

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> RunEnd:
        schema.check_record(raw, _annotations(cls))
        return cls(**_known(cls, raw))


Record = IterationRecord | RunEnd


def parse_record(line: str | bytes) -> Record:
    """One line of a records file; ``ValueError`` for a line that is not a record."""
    raw = json.loads(line)
    if not isinstance(raw, dict):
        raise ValueError(f"not a record: {str(line)[:80]!r}")
    try:
        if raw.get("kind", ITERATION) == RUN_END:
            return RunEnd.from_dict(raw)
        return IterationRecord.from_dict(raw)
    except TypeError as exc:  # a required field is missing
        raise ValueError(f"not a record ({exc}): {str(line)[:80]!r}") from None


@dataclass
class RunRecord:
    """One (task, model, run): its iterations in order and how it ended; the run score is the
    best iteration's accuracy."""

    task: str
    model: str
    run: int
    iterations: list[IterationRecord] = field(default_factory=list)
    session: str = ""
    status: str = FINISHED
    error: str | None = None
    ended_at: str = ""

    @property
    def score(self) -> float:
        return max((it.score for it in self.iterations), default=0.0)

    @property
    def scored(self) -> bool:
        """Only finished runs count; a harness error or a killed session is not the model's doing."""
        return self.status == FINISHED

    def summary(self) -> dict[str, Any]:
        """The run as plain JSON data, the unit the statistics aggregate."""
        its = self.iterations
        costs = [it.usage.cost_usd for it in its if it.usage.cost_usd is not None]
        return {
            "session": self.session,
            "task": self.task,
            "model": self.model,
            "run": self.run,
            "status": self.status,
            "score": self.score,
            "scores": [it.score for it in its],
            "zero_reasons": [it.zero_reason for it in its],
            "exec_s": [round(it.duration_s, 3) for it in its if it.code is not None],
            "code_lines": [it.code_lines for it in its if it.code is not None],
            "output_tokens": [it.usage.output_tokens for it in its],
            "cost_usd": sum(costs) if costs else None,
            **self.conditions(),
        }

    def conditions(self) -> dict[str, Any]:
        """What the run was made under (from its first submission): the protocol, the data identity,
        the planned submissions and time limit, the sandbox and the hardware."""
        first = self.iterations[0] if self.iterations else None
        return {
            "protocol": first.protocol if first else "",
            "data": first.data_key if first else "",
            "data_seed": first.data_seed if first else None,
            "iterations_planned": first.iterations_planned if first else 0,
            "time_limit_s": first.time_limit_s if first else 0.0,
            "sandbox": first.sandbox if first else "",
            "isolation": ",".join(sorted({it.isolation or "unknown" for it in self.iterations})),
            "hardware": first.hardware if first else "",
        }


def _annotations(cls: type) -> dict[str, str]:
    return {f.name: str(f.type) for f in dataclasses.fields(cls)}


def _known(cls: type, raw: dict[str, Any]) -> dict[str, Any]:
    names = {f.name for f in dataclasses.fields(cls)}
    return {k: v for k, v in raw.items() if k in names}
