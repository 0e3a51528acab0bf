"""The model interface and the registry that turns a ``--weirdml-model`` name into a client.

A model gets the conversation so far and returns its text with token usage. Providers live one
module each in this package; the offline ones (``reference``, ``baseline``, ``replay:``) need no
network and drive the tests.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pytest_weirdml.models.catalog import Catalog, ModelConfig
from pytest_weirdml.tasks import TaskSpec

__all__ = ["Catalog", "Message", "Model", "ModelConfig", "Request", "Response", "known_models", "label", "resolve"]

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
    """A model's answer and what it cost.

    ``input_tokens`` counts the whole prompt, ``cached_tokens`` the part of it read from the
    provider's prompt cache; ``output_tokens`` counts everything generated, ``reasoning_tokens``
    the hidden part of it. ``retries`` lists the failed attempts before this answer, each
    ``{"attempt", "error", "wait_s"}``.
    """

    text: str
    input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    cached_tokens: int = 0
    cost_usd: float | None = None
    latency_s: float = 0.0
    retries: tuple[dict[str, Any], ...] = field(default=())


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

    def identity(self) -> dict[str, Any] | None:
        """What, besides the conversation, decides this model's answers (the response cache key).

        ``None`` (the default) means the answers are not worth caching.
        """
        return None

    def close(self) -> None:  # noqa: B027 - optional hook for clients that hold connections
        """Release connections; the default holds none."""


Factory = Callable[[str], Model]
_FACTORIES: dict[str, tuple[Factory, str]] = {}


def register(prefix: str, factory: Factory, usage: str) -> None:
    """Make ``prefix`` (a name like ``reference``, or ``replay`` for ``replay:<arg>``) resolvable."""
    _FACTORIES[prefix] = (factory, usage)


def known_models(catalog: Catalog | None = None) -> list[str]:
    _load_builtin()
    return [usage for _, usage in _FACTORIES.values()] + (catalog or Catalog.load()).known()


def resolve(spec: str, catalog: Catalog | None = None, *, cache: Path | None = None) -> Model:
    """Build the client for a model spec; raise ``ValueError`` naming the known models.

    Offline models come from the registry; the others (aliases and ``provider:model-id``) from
    ``catalog`` (the shipped ``models.toml`` when ``None``). A provider client checks its SDK
    and API key here, so a session fails before any work. With ``cache``, answers of
    cacheable models are stored in and replayed from that directory.
    """
    _load_builtin()
    prefix, _, arg = spec.partition(":")
    entry = _FACTORIES.get(prefix)
    if entry is not None:
        model = entry[0](arg)
    else:
        catalog = catalog or Catalog.load()
        if not catalog.knows(spec):
            raise ValueError(f"unknown model '{spec}'; known models: {', '.join(known_models(catalog))}")
        from pytest_weirdml.models.provider import build

        model = build(catalog.lookup(spec))
    if cache is not None and model.identity() is not None:
        from pytest_weirdml.models.cache import CachedModel

        model = CachedModel(model, cache)
    return model


def label(spec: str) -> str:
    """A short, stable name for a model spec: ``replay:/some/dir/run.json`` -> ``replay:run.json``."""
    prefix, sep, arg = spec.partition(":")
    return prefix + sep + (arg.rstrip("/").rsplit("/", 1)[-1] if "/" in arg else arg)


def _load_builtin() -> None:
    if not _FACTORIES:
        from pytest_weirdml.models import offline

        offline.register_all()
