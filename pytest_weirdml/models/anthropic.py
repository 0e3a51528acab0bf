"""Anthropic's Messages API (``pip install 'pytest-weirdml[anthropic]'``).

Settings: ``thinking_budget`` (extended thinking: a token budget, or ``"adaptive"``),
``effort`` (``output_config.effort``), ``temperature`` (for the models that still take it),
``extra_body`` (fields merged into the request body). Answers are streamed through the SDK's
``messages.stream`` and its final message (usage and stop reason as in a whole answer); with
``stream = false`` the SDK's refusal of long non-streaming calls is avoided by always passing
our own timeout (``timeout_s``).

The SDK warns (``DeprecationWarning``) on every call to a model in its deprecation table; the
harness says it once per session instead (``deprecation``), so that warning is silenced here.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from pytest_weirdml.models.base import PROVIDERS, Message, Response
from pytest_weirdml.models.provider import (
    Failure,
    ProviderModel,
    StreamCut,
    import_sdk,
    sdk_failure,
    split_system,
)
from pytest_weirdml.records import Usage


@PROVIDERS.register("anthropic", usage="anthropic:MODEL")
class AnthropicModel(ProviderModel):
    provider = "anthropic"
    extra = "anthropic"
    options: ClassVar[Mapping[str, tuple[type, ...]]] = {
        "thinking_budget": (int, str),
        "effort": (str,),
        "extra_body": (dict,),
    }
    default_base_url = "https://api.anthropic.com"

    def _connect(self, api_key: str | None) -> Any:
        self._sdk = import_sdk("anthropic", self.provider, self.extra)
        return self._sdk.Anthropic(
            # Both named: without them the SDK reads ANTHROPIC_API_KEY (or a token) and
            # ANTHROPIC_BASE_URL from the environment, whichever server the config names.
            api_key=api_key or "no-key",
            base_url=self.config.base_url or self.default_base_url,
            timeout=self.config.read_timeout_s,
            max_retries=0,  # tenacity retries, so each one is counted and recorded
        )

    def retirement(self) -> str | None:
        try:
            from anthropic._data import DEPRECATED_MODELS  # the SDK's own table (model -> date)
        except ImportError:
            return None
        return DEPRECATED_MODELS.get(self.config.model)

    def _call(self, messages: Sequence[Message]) -> Response:
        config = self.config
        system, turns = split_system(messages)
        kwargs: dict[str, Any] = {
            "model": config.model,
            "max_tokens": config.output_cap,
            "messages": [{"role": m.role, "content": m.content} for m in turns],
            "timeout": config.read_timeout_s,
        }
        if system:
            kwargs["system"] = system
        extra = dict(config.extra_body or {})
        if config.temperature is not None:
            # Sent in the body: recent SDKs dropped the argument, older models still take the field.
            extra.setdefault("temperature", config.temperature)
        if config.thinking_budget == "adaptive":
            kwargs["thinking"] = {"type": "adaptive"}
        elif isinstance(config.thinking_budget, int) and config.thinking_budget > 0:
            kwargs["thinking"] = {"type": "enabled", "budget_tokens": config.thinking_budget}
        if config.effort:
            kwargs["output_config"] = {"effort": config.effort}
        if extra:
            kwargs["extra_body"] = extra
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=r"The model '.*' is deprecated", category=DeprecationWarning)
            message = self._streamed(kwargs) if config.stream else self._client.messages.create(**kwargs)
        text = "".join(block.text for block in message.content if getattr(block, "type", None) == "text")
        usage = message.usage
        cached = usage.cache_read_input_tokens or 0
        # Anthropic counts cache reads and writes apart from input_tokens; ours is the whole prompt.
        prompt = usage.input_tokens + cached + (usage.cache_creation_input_tokens or 0)
        details = getattr(usage, "output_tokens_details", None)
        thinking = getattr(details, "thinking_tokens", 0) or 0
        reason = message.stop_reason
        return Response(
            text,
            Usage(
                prompt,
                usage.output_tokens,
                thinking,
                cached,
                stop_reason=reason,
                # A full context window cuts the answer as surely as max_tokens does.
                truncated=reason in ("max_tokens", "model_context_window_exceeded"),
                max_output_tokens=config.output_cap,
            ),
        )

    def _streamed(self, kwargs: dict[str, Any]) -> Any:
        """The final message of a stream, accumulated by the SDK; ``StreamCut`` when it stops early."""
        received = 0
        with self._client.messages.stream(**kwargs) as stream:
            try:
                for event in stream:
                    if event.type == "text":
                        received += len(event.text)
            except Exception as exc:
                raise StreamCut(received, exc) from None
            message = stream.get_final_message()
        if message.stop_reason is None:
            raise StreamCut(received)
        return message

    def _classify(self, exc: BaseException) -> Failure | None:
        return sdk_failure(exc, self._sdk, self.config.timeout_text())
