"""The models config: aliases, per-model settings and prices, from ``models.toml`` and the user's.

The shipped ``models.toml`` beside this module holds the defaults. A project extends or
overrides them in ``[tool.weirdml]`` of its ``pyproject.toml`` or in a ``weirdml.toml`` (both
at the rootdir; ``weirdml.toml`` wins), with the same layout::

    [providers.anthropic]             # defaults for every anthropic model
    max_output_tokens = 64000

    [models."anthropic:claude-sonnet-5-5"]   # settings of one provider model (prices here)
    price_input = 3.0                 # USD per million input tokens
    price_output = 15.0
    price_checked = "2026-11-30"      # when the prices were read off the provider's page

    [models.claude]                   # an alias: its settings on top of its model's
    model = "anthropic:claude-sonnet-5-5"
    thinking_budget = 16000

A name resolves to: the provider's defaults, then the ``provider:model-id`` entry, then each
alias on the way, the nearest last; ``--weirdml-max-output-tokens`` and ``--weirdml-base-url``
override every model's. Which providers exist, and which settings each one takes
besides the common ones, the provider modules say (``base.PROVIDERS``, ``ProviderModel.options``).
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any

from pytest_weirdml.models.base import PROVIDERS
from pytest_weirdml.records import Usage

# Settings every provider understands, with the TOML types they accept.
_COMMON: dict[str, tuple[type, ...]] = {
    "max_output_tokens": (int,),
    "temperature": (int, float),
    "price_input": (int, float),
    "price_output": (int, float),
    "price_cached_input": (int, float),
    "iterations": (int,),
    "base_url": (str,),
    "api_key_env": (str, list),
    "timeout_s": (int, float),
    "max_retries": (int,),
    "max_retry_wait_s": (int, float),
    "retry_initial_s": (int, float),
    # Answers arrive as a stream (the default); false for a server that cannot stream.
    "stream": (bool,),
    # When the prices were read off the provider's page ("2025-11"); shown beside every price.
    "price_checked": (str,),
    # The provider retires the model on this date (as it states it); use ``replacement`` instead.
    "retires": (str,),
    "replacement": (str,),
}

# A provider's output cap when neither the models config nor the provider sets one.
FALLBACK_MAX_OUTPUT_TOKENS = 16384
# The longest wait for the next piece of a streamed answer: the SDKs' own default timeout.
STREAM_IDLE_TIMEOUT_S = 600.0


def answer_timeout_s(max_output_tokens: int) -> float:
    """How long to wait for a whole (non-streamed) answer of up to ``max_output_tokens``.

    The Anthropic SDK's own estimate: up to an hour per 128k output tokens, and never less than
    its 10-minute default. A shorter timeout would cut, and retry, exactly the long answers the
    cap allows.
    """
    return max(600.0, 3600.0 * max_output_tokens / 128_000)


def _specific(provider: str) -> dict[str, tuple[type, ...]]:
    """The settings only this provider takes (reasoning knobs differ per API; a knob given to
    the wrong provider is a mistake worth naming)."""
    return dict(PROVIDERS.lookup(provider).options)


def _all_keys() -> set[str]:
    return {"model", *_COMMON, *(key for name in PROVIDERS.names() for key in _specific(name))}


@dataclass(frozen=True)
class ModelConfig:
    """Everything a provider client needs to know about one model name."""

    name: str
    provider: str
    model: str
    # None: the provider's own default (openai-compatible asks its server).
    max_output_tokens: int | None = None
    temperature: float | None = None
    thinking_budget: int | str | None = None
    effort: str | None = None
    reasoning_effort: str | None = None
    thinking_level: str | None = None
    extra_body: Mapping[str, Any] | None = None
    price_input: float | None = None
    price_output: float | None = None
    price_cached_input: float | None = None
    price_checked: str | None = None
    retires: str | None = None
    replacement: str | None = None
    iterations: int | None = None
    base_url: str | None = None
    api_key_env: tuple[str, ...] = ()
    # The key names are the shipped config's, for the provider's own server: no user config named
    # them, so they are not sent to another base URL.
    api_key_env_shipped: bool = False
    # Streamed: the longest wait for the next chunk (None: ``STREAM_IDLE_TIMEOUT_S``); not
    # streamed: for the whole answer (None: ``answer_timeout_s`` of the output cap).
    timeout_s: float | None = None
    stream: bool = True
    max_retries: int = 6
    max_retry_wait_s: float = 600.0
    retry_initial_s: float = 1.0

    @property
    def spec(self) -> str:
        return f"{self.provider}:{self.model}"

    @property
    def output_cap(self) -> int:
        return self.max_output_tokens or FALLBACK_MAX_OUTPUT_TOKENS

    @property
    def request_timeout_s(self) -> float:
        """Seconds to wait for one answer: ``timeout_s``, else long enough for the output cap."""
        return self.timeout_s if self.timeout_s is not None else answer_timeout_s(self.output_cap)

    @property
    def read_timeout_s(self) -> float:
        """The read timeout of a call: between two chunks of a stream (idle), or for a whole answer."""
        if not self.stream:
            return self.request_timeout_s
        return self.timeout_s if self.timeout_s is not None else STREAM_IDLE_TIMEOUT_S

    def timeout_text(self) -> str:
        """What a timeout of one call means, for its retry record and error."""
        if self.stream:
            return f"timeout: nothing from the server for {self.read_timeout_s:g} s"
        return f"timeout: no complete answer within {self.read_timeout_s:g} s"

    def identity(self) -> dict[str, Any]:
        """The settings that shape answers (not prices, retries or keys; the provider model adds
        the server, ``ProviderModel.identity``)."""
        return {
            "provider": self.provider,
            "model": self.model,
            "max_output_tokens": self.max_output_tokens,
            "temperature": self.temperature,
            "thinking_budget": self.thinking_budget,
            "effort": self.effort,
            "reasoning_effort": self.reasoning_effort,
            "thinking_level": self.thinking_level,
            "extra_body": dict(self.extra_body) if self.extra_body else None,
        }

    def cost(self, usage: Usage) -> float | None:
        """USD for one call from the price table; ``None`` when the model has no prices."""
        if self.price_input is None or self.price_output is None:
            return None
        cached_price = self.price_input if self.price_cached_input is None else self.price_cached_input
        fresh = max(usage.input_tokens - usage.cached_tokens, 0)
        return (
            fresh * self.price_input + usage.cached_tokens * cached_price + usage.output_tokens * self.price_output
        ) / 1e6

    def price_text(self) -> str:
        """``$3.00 / $15.00 per M tokens (checked 2025-11)``, or ``cost unknown``."""
        if self.price_input is None or self.price_output is None:
            return "cost unknown"
        checked = f" (checked {self.price_checked})" if self.price_checked else " (date checked unknown)"
        return f"${self.price_input:.2f} / ${self.price_output:.2f} per M tokens in / out{checked}"


@dataclass(frozen=True)
class Catalog:
    """Provider defaults and model entries, merged from the shipped file and the user's."""

    providers: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    models: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    base_url: str | None = None
    sources: tuple[str, ...] = ()
    max_output_tokens: int | None = None
    # The tables ("providers.openai", "models.gpt") whose api_key_env only the shipped file sets.
    shipped_keys: frozenset[str] = frozenset()

    @classmethod
    def load(
        cls, rootdir: Path | None = None, *, base_url: str | None = None, max_output_tokens: int | None = None
    ) -> Catalog:
        """The shipped defaults, extended by ``rootdir``'s pyproject.toml and weirdml.toml.

        ``base_url`` (``--weirdml-base-url``) overrides every model's server,
        ``max_output_tokens`` (``--weirdml-max-output-tokens``) every model's output cap. Raises
        ``ValueError`` naming the file and the problem.
        """
        shipped = resources.files("pytest_weirdml.models").joinpath("models.toml")
        layers: list[tuple[str, Mapping[str, Any]]] = [(str(shipped), tomllib.loads(shipped.read_text("utf-8")))]
        if rootdir is not None:
            pyproject = rootdir / "pyproject.toml"
            if pyproject.is_file():
                table = _read(pyproject).get("tool", {}).get("weirdml", {})
                layers.append((f"{pyproject} [tool.weirdml]", table))
            own = rootdir / "weirdml.toml"
            if own.is_file():
                layers.append((str(own), _read(own)))
        providers: dict[str, dict[str, Any]] = {}
        models: dict[str, dict[str, Any]] = {}
        shipped_keys: set[str] = set()
        for index, (source, layer) in enumerate(layers):
            for name, entry in _tables(source, layer, "providers").items():
                if PROVIDERS.get(name) is None:
                    raise ValueError(
                        f"{source}: unknown provider [providers.{name}]; providers are {', '.join(PROVIDERS.names())}"
                    )
                _check(source, f"providers.{name}", entry, name)
                providers.setdefault(name, {}).update(entry)
                _note_keys(shipped_keys, f"providers.{name}", entry, shipped=index == 0)
            for name, entry in _tables(source, layer, "models").items():
                _check(source, f"models.{name}", entry, None)
                models.setdefault(name, {}).update(entry)
                _note_keys(shipped_keys, f"models.{name}", entry, shipped=index == 0)
        sources = tuple(source for source, _ in layers)
        return cls(providers, models, base_url, sources, max_output_tokens, frozenset(shipped_keys))

    def with_base_url(self, base_url: str | None) -> Catalog:
        return replace(self, base_url=base_url)

    def known(self) -> list[str]:
        aliases = sorted(name for name, entry in self.models.items() if "model" in entry)
        return aliases + [f"{provider}:MODEL" for provider in PROVIDERS.names()]

    def knows(self, name: str) -> bool:
        try:
            self._chain(name)
        except LookupError:
            return False
        return True

    def lookup(self, name: str) -> ModelConfig:
        """The merged settings of an alias or a ``provider:model-id``; ``ValueError`` if unusable."""
        try:
            provider, model_id, named = self._chain(name)
        except LookupError as exc:
            raise ValueError(f"unknown model '{name}': {exc}") from None
        merged: dict[str, Any] = dict(self.providers.get(provider, {}))
        # Where the api_key_env in effect was set: the last table in merge order that sets it.
        tables = [(f"providers.{provider}", self.providers.get(provider, {}))]
        tables += [(f"models.{entry_name}", entry) for entry_name, entry in reversed(named)]
        key_table = next((table for table, entry in reversed(tables) if "api_key_env" in entry), None)
        for _, layer in reversed(named):
            merged.update(layer)
        merged.pop("model", None)
        if self.base_url:
            merged["base_url"] = self.base_url
        if self.max_output_tokens:
            merged["max_output_tokens"] = self.max_output_tokens
        own = _specific(provider)
        wrong = sorted(set(merged) - set(_COMMON) - set(own))
        if wrong:
            raise ValueError(
                f"model '{name}' ({provider}) has settings {wrong} that {provider} does not use; "
                f"its own are {sorted(own)}"
            )
        keys = merged.pop("api_key_env", [])
        merged["api_key_env"] = tuple([keys] if isinstance(keys, str) else keys)
        merged["api_key_env_shipped"] = key_table in self.shipped_keys
        for key in ("temperature", "price_input", "price_output", "price_cached_input", "timeout_s"):
            if key in merged:
                merged[key] = float(merged[key])
        return ModelConfig(name=name, provider=provider, model=model_id, **merged)

    def _chain(self, name: str) -> tuple[str, str, list[tuple[str, Mapping[str, Any]]]]:
        """Follow aliases to a ``provider:model-id``; the entries met on the way (with their
        names), nearest first."""
        layers: list[tuple[str, Mapping[str, Any]]] = []
        seen: list[str] = []
        current = name
        while True:
            entry = self.models.get(current)
            if entry is not None and entry.get("model", current) != current:
                if current in seen:
                    raise LookupError(f"aliases loop: {' -> '.join([*seen, current])}")
                seen.append(current)
                layers.append((current, entry))
                current = entry["model"]
                continue
            if entry is not None:
                layers.append((current, entry))
            provider, sep, model_id = current.partition(":")
            if not sep or not model_id or PROVIDERS.get(provider) is None:
                raise LookupError(
                    f"'{current}' is neither an alias nor provider:model-id with a provider among "
                    f"{', '.join(PROVIDERS.names())}"
                )
            return provider, model_id, layers


def _note_keys(shipped_keys: set[str], table: str, entry: Mapping[str, Any], *, shipped: bool) -> None:
    """Keep track of the tables whose ``api_key_env`` the shipped file set and no user file did."""
    if "api_key_env" not in entry:
        return
    if shipped:
        shipped_keys.add(table)
    else:
        shipped_keys.discard(table)


def _read(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{path}: invalid TOML: {exc}") from None


def _tables(source: str, layer: Mapping[str, Any], key: str) -> Mapping[str, Mapping[str, Any]]:
    tables = layer.get(key, {})
    if not isinstance(tables, dict) or not all(isinstance(v, dict) for v in tables.values()):
        raise ValueError(f"{source}: [{key}] must hold one table per name, e.g. [{key}.NAME]")
    return tables


def _check(source: str, where: str, entry: Mapping[str, Any], provider: str | None) -> None:
    known = _all_keys()
    unknown = sorted(set(entry) - known - ({"model"} if provider is None else set()))
    if provider is not None and "model" in entry:
        unknown.append("model")
    if unknown:
        raise ValueError(f"{source}: [{where}] has unknown settings {unknown}; known: {sorted(known - {'model'})}")
    specific = [_specific(name) for name in PROVIDERS.names()]
    for key, value in entry.items():
        kinds = _COMMON.get(key) or next((s[key] for s in specific if key in s), (str,))
        if (isinstance(value, bool) and bool not in kinds) or not isinstance(value, kinds):
            names = " or ".join("list of str" if k is list else k.__name__ for k in kinds)
            raise ValueError(f"{source}: [{where}] {key} must be {names}, got {value!r}")
    if "model" in entry and not isinstance(entry["model"], str):
        raise ValueError(f"{source}: [{where}] model must be a string such as 'anthropic:claude-sonnet-5-5'")
