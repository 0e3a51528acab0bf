"""Google's Gemini API through the maintained ``google-genai`` SDK (``pip install 'pytest-weirdml[google]'``).

Settings: ``thinking_budget`` (tokens; -1 lets the model decide, 0 turns thinking off where the
model allows), ``thinking_level``, ``temperature``. Thought tokens are billed as output, so
``output_tokens`` counts them and ``reasoning_tokens`` says how many they were. Answers are
streamed (``generate_content_stream``): the text is the chunks' parts, the stop reason and the
usage those of the last chunk that carries them; ``stream = false`` asks for a whole answer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, ClassVar

from pytest_weirdml.models.base import PROVIDERS, Message, Response
from pytest_weirdml.models.provider import (
    Failure,
    ProviderModel,
    StreamCut,
    http_failure,
    http_library,
    import_sdk,
    split_system,
    status_failure,
)
from pytest_weirdml.records import Usage


@PROVIDERS.register("google", usage="google:MODEL")
class GoogleModel(ProviderModel):
    provider = "google"
    extra = "google"
    options: ClassVar[Mapping[str, tuple[type, ...]]] = {"thinking_budget": (int,), "thinking_level": (str,)}
    default_base_url = "https://generativelanguage.googleapis.com/"

    def _connect(self, api_key: str | None) -> Any:
        genai = import_sdk("google.genai", self.provider, self.extra)
        self._types = import_sdk("google.genai.types", self.provider, self.extra)
        self._errors = import_sdk("google.genai.errors", self.provider, self.extra)
        # The HTTP library the SDK raises transport errors from (httpx2 in new releases, httpx before).
        self._httpx = http_library()
        # No retry_options: the SDK then never retries, and tenacity does it here, recorded.
        options = self._types.HttpOptions(
            base_url=self.config.base_url or self.default_base_url, timeout=int(self.config.read_timeout_s * 1000)
        )
        # A key named even when there is none: without one the SDK reads GOOGLE_API_KEY or
        # GEMINI_API_KEY from the environment, whichever server the config names.
        return genai.Client(api_key=api_key or "no-key", http_options=options)

    def _call(self, messages: Sequence[Message]) -> Response:
        types, config = self._types, self.config
        system, turns = split_system(messages)
        contents = [
            types.Content(role="model" if m.role == "assistant" else "user", parts=[types.Part(text=m.content)])
            for m in turns
        ]
        thinking = None
        if config.thinking_budget is not None or config.thinking_level:
            thinking = types.ThinkingConfig(
                thinking_budget=config.thinking_budget, thinking_level=config.thinking_level
            )
        settings = types.GenerateContentConfig(
            system_instruction=system or None,
            max_output_tokens=config.output_cap,
            temperature=config.temperature,
            thinking_config=thinking,
        )
        if config.stream:
            text, finish, usage = self._streamed(config.model, contents, settings)
        else:
            response = self._client.models.generate_content(model=config.model, contents=contents, config=settings)
            first = (response.candidates or [None])[0]
            text, finish, usage = _text(first), first.finish_reason if first else None, response.usage_metadata
        # An enum of the SDK (FinishReason.MAX_TOKENS), or its plain text for values it does not know.
        reason = None if finish is None else str(getattr(finish, "value", finish))
        stop = Usage(stop_reason=reason, truncated=reason == "MAX_TOKENS", max_output_tokens=config.output_cap)
        if usage is None:
            return Response(text, stop)
        thoughts = usage.thoughts_token_count or 0
        return Response(
            text,
            replace(
                stop,
                input_tokens=usage.prompt_token_count or 0,
                output_tokens=(usage.candidates_token_count or 0) + thoughts,
                reasoning_tokens=thoughts,
                cached_tokens=usage.cached_content_token_count or 0,
            ),
        )

    def _streamed(self, model: str, contents: Any, settings: Any) -> tuple[str, Any, Any]:
        """The text, stop reason and usage of a streamed answer; ``StreamCut`` when it stops early."""
        pieces: list[str] = []
        finish = usage = None
        try:
            for chunk in self._client.models.generate_content_stream(model=model, contents=contents, config=settings):
                first = (chunk.candidates or [None])[0]
                pieces.append(_text(first))
                finish = (first.finish_reason if first else None) or finish
                usage = chunk.usage_metadata or usage
        except Exception as exc:
            raise StreamCut(sum(map(len, pieces)), exc) from None
        if finish is None:
            raise StreamCut(sum(map(len, pieces)))
        return "".join(pieces), finish, usage

    def _classify(self, exc: BaseException) -> Failure | None:
        if isinstance(exc, self._errors.APIError):
            response = getattr(exc, "response", None)
            headers = getattr(response, "headers", None)
            message = f"{exc.status}: {exc.message}" if exc.status else str(exc.message or exc)
            return status_failure(int(exc.code or 0), message, headers)
        return http_failure(exc, self._httpx, self.config.timeout_text())


def _text(candidate: Any) -> str:
    """A candidate's answer: its text parts, thoughts left out."""
    parts = (candidate.content.parts if candidate and candidate.content else None) or []
    return "".join(part.text for part in parts if part.text and not part.thought)
