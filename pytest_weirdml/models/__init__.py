"""The model interface and the registry that turns a ``--weirdml-model`` name into a client.

A model gets the conversation so far and returns its text with token usage. Providers live one
module each in this package; the offline ones (``reference``, ``baseline``, ``replay:``) need no
network and drive the tests.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from pytest_weirdml.tasks import TaskSpec

Role = Literal["system", "user", "assistant"]


@dataclass(frozen=True)
class Message:
    role: Role
    content: str


@dataclass(frozen=True)
class Request:
    """What a model is asked: the conversation, and where in the benchmark it stands."""

    messages: Sequence[Message]
    task: TaskSpec
    run: int
    iteration: int


@dataclass(frozen=True)
class Response:
    text: str
    input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    cost_usd: float | None = None
    latency_s: float = 0.0


class Model(abc.ABC):
    """A model client.

    ``generate`` raises ``pytest_weirdml.errors.ModelError`` when the provider fails (the item
    errors; the model is not scored). ``max_iterations`` caps the submissions per run for
    models that need fewer (a fixed script gains nothing from feedback).
    """

    name: str
    max_iterations: int | None = None

    @abc.abstractmethod
    def generate(self, request: Request) -> Response: ...

    def close(self) -> None:  # noqa: B027 - optional hook for clients that hold connections
        """Release connections; the default holds none."""


Factory = Callable[[str], Model]
_FACTORIES: dict[str, tuple[Factory, str]] = {}


def register(prefix: str, factory: Factory, usage: str) -> None:
    """Make ``prefix`` (a name like ``reference``, or ``replay`` for ``replay:<arg>``) resolvable."""
    _FACTORIES[prefix] = (factory, usage)


def known_models() -> list[str]:
    _load_builtin()
    return [usage for _, usage in _FACTORIES.values()]


def resolve(spec: str) -> Model:
    """Build the client for a model spec; raise ``ValueError`` naming the known models."""
    _load_builtin()
    prefix, _, arg = spec.partition(":")
    entry = _FACTORIES.get(prefix)
    if entry is None:
        raise ValueError(f"unknown model '{spec}'; known models: {', '.join(known_models())}")
    return entry[0](arg)


def label(spec: str) -> str:
    """A short, stable name for a model spec: ``replay:/some/dir/run.json`` -> ``replay:run.json``."""
    prefix, sep, arg = spec.partition(":")
    return prefix + sep + (arg.rstrip("/").rsplit("/", 1)[-1] if "/" in arg else arg)


def _load_builtin() -> None:
    if not _FACTORIES:
        from pytest_weirdml.models import offline

        offline.register_all()
