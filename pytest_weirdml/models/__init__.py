"""Model clients: turn a ``--weirdml-model`` name into a ``Model``.

A name is an offline model (``reference``, ``baseline``, ``replay:PATH``, ``queue:DIR``,
``human``), an alias of the
models config (``claude``, ``gpt``, ...) or ``PROVIDER:MODEL-ID``. Offline models and providers
each live in one module of this package and register themselves (``base.OFFLINE``,
``base.PROVIDERS``); the models config (``catalog``) holds aliases, settings and prices.
"""

from __future__ import annotations

from pathlib import Path

from pytest_weirdml.models.base import OFFLINE, PROVIDERS, Message, Model, Request, Response, label
from pytest_weirdml.models.catalog import Catalog, ModelConfig
from pytest_weirdml.models.queue import QueueModel
from pytest_weirdml.records import Usage

__all__ = [
    "Catalog",
    "Message",
    "Model",
    "ModelConfig",
    "Request",
    "Response",
    "Usage",
    "build_provider",
    "known_models",
    "label",
    "resolve",
]


def known_models(catalog: Catalog | None = None) -> list[str]:
    return [entry.usage for entry in OFFLINE.entries()] + (catalog or Catalog.load()).known()


def build_provider(config: ModelConfig) -> Model:
    """The client of a resolved model config. ``ValueError`` when its SDK or key is missing."""
    model: Model = PROVIDERS.lookup(config.provider)(config)
    return model


def resolve(
    spec: str, catalog: Catalog | None = None, *, cache: Path | None = None, answer_timeout_s: float | None = None
) -> Model:
    """Build the client for a model spec; raise ``ValueError`` naming the known models.

    Offline models come from ``OFFLINE``; the others (aliases and ``provider:model-id``) from
    ``catalog`` (the shipped ``models.toml`` when ``None``). A provider client checks its SDK
    and API key here, so a session fails before any work. With ``cache``, answers of
    cacheable models are stored in and replayed from that directory. ``answer_timeout_s`` is how
    long a model answered from outside (``human``, ``queue:DIR``) waits for each answer.
    """
    prefix, _, arg = spec.partition(":")
    offline = OFFLINE.get(prefix)
    if offline is not None:
        model = offline(arg)
        if answer_timeout_s is not None and isinstance(model, QueueModel):
            model.timeout_s = answer_timeout_s
    else:
        catalog = catalog or Catalog.load()
        if not catalog.knows(spec):
            raise ValueError(f"unknown model '{spec}'; known models: {', '.join(known_models(catalog))}")
        model = build_provider(catalog.lookup(spec))
    if cache is not None and model.identity() is not None:
        from pytest_weirdml.models.cache import CachedModel

        model = CachedModel(model, cache)
    return model
