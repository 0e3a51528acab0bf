"""OpenAI's Chat Completions API, and any server that speaks it (``pip install 'pytest-weirdml[openai]'``).

``openai:MODEL`` talks to OpenAI (``reasoning_effort``, ``max_completion_tokens``);
``openai-compatible:MODEL`` to vLLM, Ollama, llama.cpp, OpenRouter and the like at a base URL
(``--weirdml-base-url`` or ``base_url`` in the models config), sending the older
``max_tokens`` that those servers all accept and no key unless ``api_key_env`` names one.

Without a ``max_output_tokens`` of its own, an openai-compatible model takes its output cap from
the server's ``GET /models`` (asked once per process and server): an output limit it lists
(OpenRouter's ``top_provider.max_completion_tokens``) is sent as ``max_tokens``; a context length
alone (vLLM's ``max_model_len``, OpenRouter's ``context_length``) is the cap of prompt and answer
together, so the request carries no ``max_tokens`` and the answer may fill what the prompt leaves
(vLLM refuses a ``max_tokens`` over that room; without one it grants all of it). A server that
lists neither gets 8192 and the session says so.

Answers are streamed through the SDK's ``chat.completions.stream`` with the usage asked for in
the final chunk (``stream_options.include_usage``, which vLLM, Ollama and OpenRouter honour);
``stream = false`` in the models config sends one whole request instead.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, ClassVar

from pytest_weirdml.models.base import PROVIDERS, Message, Response
from pytest_weirdml.models.catalog import ModelConfig
from pytest_weirdml.models.provider import Failure, ProviderModel, StreamCut, import_sdk, sdk_failure
from pytest_weirdml.records import Usage


@PROVIDERS.register("openai", usage="openai:MODEL")
class OpenAIModel(ProviderModel):
    provider = "openai"
    extra = "openai"
    options: ClassVar[Mapping[str, tuple[type, ...]]] = {"reasoning_effort": (str,), "extra_body": (dict,)}
    max_tokens_field = "max_completion_tokens"
    default_base_url: ClassVar[str | None] = "https://api.openai.com/v1"
    # The server's context length when it is the cap (no max_tokens sent); see the module doc.
    _room: int | None = None

    def _connect(self, api_key: str | None) -> Any:
        self._sdk = import_sdk("openai", self.provider, self.extra)
        return self._sdk.OpenAI(
            # Passed explicitly, so an OPENAI_API_KEY in the environment never goes to another server.
            api_key=api_key or "no-key",
            # Named, so an OPENAI_BASE_URL in the environment never moves the provider's key elsewhere.
            base_url=self.config.base_url or self.default_base_url,
            timeout=self.config.read_timeout_s,
            max_retries=0,  # tenacity retries, so each one is counted and recorded
        )

    def _call(self, messages: Sequence[Message]) -> Response:
        config = self.config
        kwargs: dict[str, Any] = {
            "model": config.model,
            "messages": [{"role": m.role, "content": m.content} for m in messages],
            "timeout": config.read_timeout_s,
        }
        if self._room is None:
            kwargs[self.max_tokens_field] = config.output_cap
        if config.temperature is not None:
            kwargs["temperature"] = config.temperature
        if config.reasoning_effort:
            kwargs["reasoning_effort"] = config.reasoning_effort
        if config.extra_body:
            kwargs["extra_body"] = dict(config.extra_body)
        completion = self._streamed(kwargs) if config.stream else self._client.chat.completions.create(**kwargs)
        if not completion.choices:
            raise _NoChoices(f"the server answered with no choices (model {config.model})")
        choice = completion.choices[0]
        text = choice.message.content or ""
        reason = choice.finish_reason
        usage = completion.usage
        prompt = (usage.prompt_tokens or 0) if usage else 0
        # Where the context is the cap, this answer had what its prompt left of it.
        cap = config.output_cap if self._room is None else max(self._room - prompt, 0)
        stop = Usage(stop_reason=reason, truncated=reason == "length", max_output_tokens=cap)
        if usage is None:
            return Response(text, stop)
        prompt_details = getattr(usage, "prompt_tokens_details", None)
        output_details = getattr(usage, "completion_tokens_details", None)
        return Response(
            text,
            replace(
                stop,
                input_tokens=prompt,
                output_tokens=usage.completion_tokens or 0,
                reasoning_tokens=getattr(output_details, "reasoning_tokens", 0) or 0,
                cached_tokens=getattr(prompt_details, "cached_tokens", 0) or 0,
            ),
        )

    def _streamed(self, kwargs: dict[str, Any]) -> Any:
        """The completion a stream adds up to (the SDK's snapshot); ``StreamCut`` when it stops early."""
        received = 0
        with self._client.chat.completions.stream(**kwargs, stream_options={"include_usage": True}) as stream:
            try:
                for event in stream:
                    if event.type == "content.delta":
                        received += len(event.delta)
            except Exception as exc:
                raise StreamCut(received, exc) from None
            try:
                completion = stream.current_completion_snapshot
            except AssertionError:  # the stream ended before its first chunk
                raise StreamCut(received) from None
        if completion.choices and completion.choices[0].finish_reason is None:
            raise StreamCut(received)
        return completion

    def _classify(self, exc: BaseException) -> Failure | None:
        if isinstance(exc, _NoChoices):
            return Failure(False, str(exc))
        return sdk_failure(exc, self._sdk, self.config.timeout_text())


@PROVIDERS.register("openai-compatible", usage="openai-compatible:MODEL")
class OpenAICompatibleModel(OpenAIModel):
    provider = "openai-compatible"
    extra = "openai"
    max_tokens_field = "max_tokens"
    key_required = True
    default_base_url = None

    def __init__(self, config: ModelConfig) -> None:
        if not config.base_url:
            raise ValueError(
                f"{config.name} needs the server's base URL: pass --weirdml-base-url=http://127.0.0.1:8000/v1 "
                "or set base_url under [tool.weirdml.providers.openai-compatible] (or the model's own table)"
            )
        super().__init__(config)

    def _default_cap(self) -> int:
        config = self.config
        key = (str(config.base_url), config.model)
        with _LIMITS_LOCK:
            if key not in _SERVER_LIMITS:
                _SERVER_LIMITS[key] = self._server_limits()
        output, context, why = _SERVER_LIMITS[key]
        if output:
            return output
        if context:
            self._room = context
            return context
        self.cap_note = (
            f"{config.name}: the server at {config.base_url} states no output or context limit for "
            f"{config.model} ({why}); answers are capped at {FALLBACK_COMPATIBLE_CAP} tokens: set "
            "max_output_tokens in the models config or pass --weirdml-max-output-tokens"
        )
        return FALLBACK_COMPATIBLE_CAP

    def _server_limits(self) -> tuple[int | None, int | None, str]:
        """(output limit, context length, why neither) from the server's model listing."""
        try:
            listed = [model.model_dump() for model in self._client.models.list(timeout=30)]
        except Exception as exc:
            return None, None, f"GET /models failed: {self._failure(exc).message}"
        entry = next((m for m in listed if m.get("id") == self.config.model), None)
        if entry is None:
            return None, None, "GET /models does not list it"
        provider = entry.get("top_provider")
        output = _positive(provider.get("max_completion_tokens") if isinstance(provider, dict) else None)
        output = output or _positive(entry.get("max_completion_tokens"))
        context = _positive(entry.get("max_model_len")) or _positive(entry.get("context_length"))
        return output, context, "GET /models lists no max_model_len or context_length"


# What each server said, per (base URL, model): asked once per process, however many clients.
_SERVER_LIMITS: dict[tuple[str, str], tuple[int | None, int | None, str]] = {}
_LIMITS_LOCK = threading.Lock()
FALLBACK_COMPATIBLE_CAP = 8192


def _positive(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


class _NoChoices(Exception):
    pass
