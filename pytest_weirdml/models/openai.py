"""OpenAI's Chat Completions API, and any server that speaks it (``pip install 'pytest-weirdml[openai]'``).

``openai:MODEL`` talks to OpenAI (``reasoning_effort``, ``max_completion_tokens``);
``openai-compatible:MODEL`` to vLLM, Ollama, llama.cpp, OpenRouter and the like at a base URL
(``--weirdml-base-url`` or ``base_url`` in the models config), sending the older
``max_tokens`` that those servers all accept and no key unless ``api_key_env`` names one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from pytest_weirdml.models.base import PROVIDERS, Message, Response
from pytest_weirdml.models.catalog import ModelConfig
from pytest_weirdml.models.provider import Failure, ProviderModel, import_sdk, sdk_failure
from pytest_weirdml.records import Usage


@PROVIDERS.register("openai", usage="openai:MODEL")
class OpenAIModel(ProviderModel):
    provider = "openai"
    extra = "openai"
    options: ClassVar[Mapping[str, tuple[type, ...]]] = {"reasoning_effort": (str,), "extra_body": (dict,)}
    max_tokens_field = "max_completion_tokens"

    def _connect(self, api_key: str | None) -> Any:
        self._sdk = import_sdk("openai", self.provider, self.extra)
        return self._sdk.OpenAI(
            # Passed explicitly, so an OPENAI_API_KEY in the environment never goes to another server.
            api_key=api_key or "no-key",
            base_url=self.config.base_url,
            timeout=self.config.timeout_s,
            max_retries=0,  # tenacity retries, so each one is counted and recorded
        )

    def _call(self, messages: Sequence[Message]) -> Response:
        config = self.config
        kwargs: dict[str, Any] = {
            "model": config.model,
            "messages": [{"role": m.role, "content": m.content} for m in messages],
            self.max_tokens_field: config.max_output_tokens,
            "timeout": config.timeout_s,
        }
        if config.temperature is not None:
            kwargs["temperature"] = config.temperature
        if config.reasoning_effort:
            kwargs["reasoning_effort"] = config.reasoning_effort
        if config.extra_body:
            kwargs["extra_body"] = dict(config.extra_body)
        completion = self._client.chat.completions.create(**kwargs)
        if not completion.choices:
            raise _NoChoices(f"the server answered with no choices (model {config.model})")
        text = completion.choices[0].message.content or ""
        usage = completion.usage
        if usage is None:
            return Response(text)
        prompt_details = getattr(usage, "prompt_tokens_details", None)
        output_details = getattr(usage, "completion_tokens_details", None)
        return Response(
            text,
            Usage(
                input_tokens=usage.prompt_tokens or 0,
                output_tokens=usage.completion_tokens or 0,
                reasoning_tokens=getattr(output_details, "reasoning_tokens", 0) or 0,
                cached_tokens=getattr(prompt_details, "cached_tokens", 0) or 0,
            ),
        )

    def _classify(self, exc: BaseException) -> Failure | None:
        if isinstance(exc, _NoChoices):
            return Failure(False, str(exc))
        return sdk_failure(exc, self._sdk, self.config.timeout_s)


@PROVIDERS.register("openai-compatible", usage="openai-compatible:MODEL")
class OpenAICompatibleModel(OpenAIModel):
    provider = "openai-compatible"
    extra = "openai"
    max_tokens_field = "max_tokens"
    key_required = True

    def __init__(self, config: ModelConfig) -> None:
        if not config.base_url:
            raise ValueError(
                f"{config.name} needs the server's base URL: pass --weirdml-base-url=http://127.0.0.1:8000/v1 "
                "or set base_url under [tool.weirdml.providers.openai-compatible] (or the model's own table)"
            )
        super().__init__(config)


class _NoChoices(Exception):
    pass
