"""The records a session keeps: the plan of a run, what one model call cost, one submission, the
end of a run.

A session's ``records.jsonl`` holds one JSON object per line, of three kinds (the ``kind`` key):
``run_start`` (a ``RunStart``: the run's ``RunPlan``, the conditions it is made under, written
once before its first model call), ``iteration`` (an ``IterationRecord``, appended the moment a
submission is scored; only what differs per submission) and ``run_end`` (a ``RunEnd``: the run
finished, or a harness error stopped it). Lines are written from these dataclasses and read back
into them, so a field added to a dataclass is one line here and nothing else changes; unknown
keys in old or newer files are ignored. Every record's ``to_json`` fits one line the reader reads
(``pytest_weirdml.linecap``): texts too long for it are cut, and ``cut`` names them.

Schema 3 has the run start. Schemas 1 and 2 copied the conditions into every iteration; they are
read back into the same ``RunPlan`` (``IterationRecord.legacy_plan``), so a run reads alike
whichever schema wrote it. Every line read back is checked
against its dataclass's schema first (``pytest_weirdml.schema``): a records file may come from
anyone.
"""

from __future__ import annotations

import dataclasses
import json
import secrets
from dataclasses import dataclass, field
from typing import Any, Literal

from pytest_weirdml import schema
from pytest_weirdml.linecap import record_line
from pytest_weirdml.redact import redact_values
from pytest_weirdml.untrusted import valid_unicode

SCHEMA_VERSION = 3
RUN_START = "run_start"
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
    # Replayed from the response cache (--weirdml-cache): no call was made for it in this session.
    cached_response: bool = False

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


@dataclass(frozen=True)
class RunPlan:
    """What a run is made under, worked out once by the loop (``loop.plan_run``) before its first
    model call: the gate, the baselines and the summary read their conditions from it."""

    # What the run is allowed: its number of submissions, the time limit, memory, output and
    # results caps per script, and the model's output-token cap (``None``: the model has none).
    iterations_planned: int = 0
    time_limit_s: float = 0.0
    memory_bytes: int = 0
    output_bytes: int = 0
    results_bytes: int = 0
    max_output_tokens: int | None = None
    # Records from before this field existed were all made under the disclosing prompt.
    protocol: str = "informed"
    # The data identity: the seed the task's data was built from and its cache key
    # (data version, seed, builder hash).
    data_seed: int | None = None
    data_key: str = ""
    # Where the scripts run, how that sandbox isolates them (``Sandbox.isolation``: bwrap+cgroups,
    # bwrap, docker or none; each iteration says how its own script was), and how the system
    # prompt named the hardware.
    sandbox: str = ""
    isolation: str = ""
    hardware: str = ""
    # The exact system prompt: what the model was told of hardware and packages.
    system_prompt: str | None = None
    # The task's [time_estimates] (horizons.estimates), for the time horizons.
    time_estimates: dict[str, Any] | None = None
    # The run's opaque key on a queue (``queue:DIR``, ``human``): random, kept so a resumed run goes on in it.
    conversation: str = field(default_factory=lambda: secrets.token_hex(5), compare=False)

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> RunPlan:
        schema.check_plan(raw, _annotations(cls))
        return cls(**_known(cls, raw))


@dataclass
class RunStart:
    """A run began under ``plan``; the twin of ``RunEnd``. The first start of a run is its plan
    (a resumed run keeps the conditions it started with)."""

    task: str
    model: str
    run: int
    plan: RunPlan = field(default_factory=RunPlan)
    started_at: str = ""
    session: str = ""
    # The texts cut to fit a record line (``linecap``): their paths and lengths before the cut.
    cut: dict[str, int] = field(default_factory=dict)
    kind: str = RUN_START
    schema: int = SCHEMA_VERSION

    def to_json(self) -> str:
        return valid_unicode(record_line(dataclasses.asdict(self)))

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> RunStart:
        schema.check_record(raw, _annotations(cls))
        known = _known(cls, raw)
        plan = raw.get("plan")
        if not isinstance(plan, dict):
            raise TypeError("a run start needs its plan")
        known["plan"] = RunPlan.from_dict(plan)
        return cls(**known)


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
    # How the script was isolated: bwrap+cgroups, bwrap, docker or none ("" before it was recorded);
    # per iteration, as the backend that ran it says (Ray nodes may differ).
    isolation: str = ""
    # The Ray node that ran the script ("" for this machine).
    node: str = ""
    # What the harness noted about the execution for the records only, never for the model (an
    # execution that ran again after a Ray node failed).
    harness_notes: tuple[str, ...] = ()
    session: str = ""
    # The texts cut to fit a record line (``linecap``): their paths and lengths before the cut.
    cut: dict[str, int] = field(default_factory=dict)
    kind: str = ITERATION
    schema: int = SCHEMA_VERSION
    # Schemas 1 and 2: the run's conditions as this iteration carried them (never written).
    legacy_plan: RunPlan | None = field(default=None, compare=False, repr=False)

    @property
    def failed(self) -> bool:
        """The submission produced no usable predictions (crash, timeout, no code, bad file)."""
        return self.zero_reason is not None

    @property
    def code_lines(self) -> int:
        return len(self.code.splitlines()) if self.code else 0

    def to_json(self) -> str:
        fields = dataclasses.asdict(self)
        del fields["legacy_plan"]
        # A lone surrogate (a provider's JSON may carry one) cannot be written as UTF-8.
        return valid_unicode(record_line(fields))

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> IterationRecord:
        schema.check_record(raw, _annotations(cls))
        known = _known(cls, raw)
        known.pop("legacy_plan", None)
        known["harness_notes"] = tuple(known.get("harness_notes", ()))
        if isinstance(raw.get("usage"), dict):
            known["usage"] = Usage.from_dict(raw["usage"])
        else:
            flat = {new: raw[old] for old, new in _FLAT_USAGE.items() if old in raw}
            known["usage"] = Usage.from_dict(flat)
        known.setdefault("schema", 1)
        if known["schema"] < 3:
            known["legacy_plan"] = RunPlan.from_dict(raw)
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
    # The texts cut to fit a record line (``linecap``): their paths and lengths before the cut.
    cut: dict[str, int] = field(default_factory=dict)
    kind: str = RUN_END
    schema: int = SCHEMA_VERSION

    def to_json(self) -> str:
        # A lone surrogate (a provider's JSON may carry one) cannot be written as UTF-8.
        return valid_unicode(record_line(dataclasses.asdict(self)))

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> RunEnd:
        schema.check_record(raw, _annotations(cls))
        return cls(**_known(cls, raw))


Record = RunStart | IterationRecord | RunEnd


def parse_record(line: str | bytes) -> Record:
    """One line of a records file; ``ValueError`` for a line that is not a record."""
    raw = json.loads(line)
    if not isinstance(raw, dict):
        raise ValueError(f"not a record: {str(line)[:80]!r}")
    try:
        kind = raw.get("kind", ITERATION)
        if kind == RUN_END:
            return RunEnd.from_dict(raw)
        if kind == RUN_START:
            return RunStart.from_dict(raw)
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
    # What the run was made under; ``None`` only for a run whose start was never recorded.
    plan: RunPlan | None = None

    @property
    def protocol(self) -> str:
        return self.plan.protocol if self.plan else ""

    @property
    def system_prompt(self) -> str | None:
        return self.plan.system_prompt if self.plan else None

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
            "cached_responses": sum(it.usage.cached_response for it in its),
            **self.conditions(),
        }

    def isolation(self) -> str:
        """How the run's scripts were isolated, as its iterations say (several, comma-separated,
        where they differ; ``unknown`` for records from before isolation was recorded); the plan's
        isolation for a run without iterations."""
        if not self.iterations:
            return self.plan.isolation if self.plan else ""
        return ",".join(sorted({it.isolation or "unknown" for it in self.iterations}))

    def conditions(self) -> dict[str, Any]:
        """What the run was made under (from its plan): the protocol, the data identity, the planned
        submissions and time limit, the sandbox and the hardware."""
        plan = self.plan
        return {
            "protocol": plan.protocol if plan else "",
            "data": plan.data_key if plan else "",
            "data_seed": plan.data_seed if plan else None,
            "iterations_planned": plan.iterations_planned if plan else 0,
            "time_limit_s": plan.time_limit_s if plan else 0.0,
            "sandbox": plan.sandbox if plan else "",
            "isolation": self.isolation(),
            "hardware": plan.hardware if plan else "",
        }


def legacy_plan(iterations: list[IterationRecord]) -> RunPlan | None:
    """The plan of a run recorded before run starts (schemas 1 and 2): the conditions its first
    iteration carried, with the system prompt that only one iteration held."""
    plans = [it.legacy_plan for it in iterations if it.legacy_plan is not None]
    if not plans:
        return None
    prompt = next((plan.system_prompt for plan in plans if plan.system_prompt), None)
    estimates = next((plan.time_estimates for plan in plans if plan.time_estimates), None)
    return dataclasses.replace(plans[0], system_prompt=prompt, time_estimates=estimates)


def _annotations(cls: type) -> dict[str, str]:
    return {f.name: str(f.type) for f in dataclasses.fields(cls)}


def _known(cls: type, raw: dict[str, Any]) -> dict[str, Any]:
    names = {f.name for f in dataclasses.fields(cls)}
    return {k: v for k, v in raw.items() if k in names}
