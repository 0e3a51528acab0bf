"""The model interface, and the registries that name its implementations.

A model gets the conversation so far and returns its text with a ``records.Usage`` (tokens,
cost, latency, retries), which goes unchanged into the iteration record.

``OFFLINE`` holds the models that need no network (``reference``, ``baseline``, ``replay:PATH``,
``queue:DIR``, ``human``), each a factory of the text after its ``NAME:`` prefix; ``PROVIDERS``
the API providers, each a ``ProviderModel`` class built from a ``ModelConfig``. Both discover
the modules of this package.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from pytest_weirdml.records import Usage
from pytest_weirdml.registry import Registry

if TYPE_CHECKING:
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
    # The run's opaque key (``RunPlan.conversation``): models answered through files name the run by it.
    conversation: str = ""


@dataclass(frozen=True)
class Response:
    """A model's answer, and what it used and cost."""

    text: str
    usage: Usage = field(default_factory=Usage)


class Model(abc.ABC):
    """A model client.

    ``generate`` raises ``pytest_weirdml.errors.ModelError`` when the provider fails (the item
    errors; the model is not scored). ``max_iterations`` caps the submissions per run for
    models that need fewer (a fixed script gains nothing from feedback).
    """

    name: str
    max_iterations: int | None = None
    # The output-token cap its answers are asked under (``None``: it has none); in the run's plan.
    max_output_tokens: int | None = None
    # One line for the user when the output cap is a fallback (the server states no limit).
    cap_note: str | None = None
    # Who answers, as the status line says it: "waiting for the model (iteration 2)".
    waiting_for: str = "the model"

    @abc.abstractmethod
    def generate(self, request: Request) -> Response: ...

    def identity(self) -> dict[str, Any] | None:
        """What, besides the conversation, decides this model's answers (the response cache key).

        ``None`` (the default) means the answers are not worth caching.
        """
        return None

    def deprecation(self) -> str | None:
        """One line for the user when the provider is retiring this model (naming a
        replacement), else ``None``."""
        return None

    def close(self) -> None:  # noqa: B027 - optional hook for clients that hold connections
        """Release connections; the default holds none."""


def label(spec: str) -> str:
    """A short, stable name for a model spec: ``replay:/some/dir/run.json`` -> ``replay:run.json``."""
    prefix, sep, arg = spec.partition(":")
    return prefix + sep + (arg.rstrip("/").rsplit("/", 1)[-1] if "/" in arg else arg)


OfflineFactory = Callable[[str], Model]
OFFLINE: Registry[OfflineFactory] = Registry("offline model", "pytest_weirdml.models")
# Values are ProviderModel subclasses (typed loosely here: that class lives in models.provider).
PROVIDERS: Registry[Any] = Registry("provider", "pytest_weirdml.models")
