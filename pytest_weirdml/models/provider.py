"""What every API provider shares: the SDK import, the API key, retries, accounting, redaction.

A provider module subclasses ``ProviderModel`` with three methods: ``_connect`` (build the SDK
client), ``_call`` (one request, no retries, returning the text and its token counts as a
``Usage``, with the stop reason and whether the answer ended at the output cap; streamed through
the SDK's own streaming helper unless the models config says ``stream = false``) and
``_classify`` (is this exception worth a retry, what does the provider say, how long does it ask
us to wait), declares the settings only it takes (``options``), and registers
itself in ``base.PROVIDERS``: adding a provider is adding its module. Retries are tenacity's, with
the SDK's own turned off, so every retry is counted, bounded and recorded in one place; the
cost, latency and retries complete the call's ``Usage``. A stream that stops before its answer
ends (``StreamCut``) is retried as a dropped connection is, and recorded as a retry.

The key goes to a server other than the provider's own (``default_base_url``) only when the
user's models config names ``api_key_env`` for that model or provider: the shipped config names
the keys of the providers' own servers (``ModelConfig.api_key_env_shipped``).
"""

from __future__ import annotations

import abc
import email.utils
import importlib
import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from types import ModuleType
from typing import Any, ClassVar

from pytest_weirdml import redact
from pytest_weirdml.errors import ModelError
from pytest_weirdml.models.base import Message, Model, Request, Response, label
from pytest_weirdml.models.catalog import FALLBACK_MAX_OUTPUT_TOKENS, ModelConfig
from pytest_weirdml.untrusted import printable

log = logging.getLogger("pytest_weirdml.models")

# Statuses a provider uses for "try again later": timeout, conflict, rate limit, and any 5xx
# (Anthropic's overload is 529, Google's is 503).
RETRY_STATUSES = frozenset({408, 409, 429})
BACKOFF_MAX_S = 60.0


@dataclass(frozen=True)
class Failure:
    """A failed call as the harness sees it."""

    retryable: bool
    message: str
    retry_after_s: float | None = None


class StreamCut(Exception):
    """A streamed answer that stopped before its end, after ``received`` characters: by an error
    of the connection (``cause``), or with the stream over and no stop reason (``cause=None``)."""

    def __init__(self, received: int, cause: BaseException | None = None) -> None:
        super().__init__(f"the stream stopped after {received} characters")
        self.received = received
        self.cause = cause


def http_library() -> ModuleType:
    """The HTTP library the SDKs raise transport errors from (httpx2 in new releases, httpx before)."""
    for name in ("httpx2", "httpx"):
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    raise ValueError("the provider SDKs need httpx: pip install 'pytest-weirdml[providers]'")


def http_failure(exc: BaseException, http: ModuleType, timeout_text: str) -> Failure | None:
    """A transport error of the HTTP library itself (the SDKs pass these on in a stream)."""
    if isinstance(exc, http.TimeoutException):
        return Failure(True, timeout_text)
    if isinstance(exc, http.TransportError):
        return Failure(True, f"connection error: {type(exc).__name__}: {exc}")
    return None


def import_sdk(module: str, provider: str, extra: str) -> ModuleType:
    """Import an optional SDK, or say which extra installs it (``ValueError`` -> usage error)."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ValueError(
            f"the {provider} provider needs the {module} SDK ({exc}); install it with: "
            f"pip install 'pytest-weirdml[{extra}]'"
        ) from None


def retry_after(headers: Mapping[str, str] | None) -> float | None:
    """Seconds the server asks us to wait: ``retry-after-ms``, or ``retry-after`` as seconds or a date."""
    if not headers:
        return None
    millis = headers.get("retry-after-ms")
    if millis:
        try:
            return max(float(millis) / 1000, 0.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(when.timestamp() - time.time(), 0.0)


def status_failure(status: int, message: str, headers: Mapping[str, str] | None) -> Failure:
    retryable = status in RETRY_STATUSES or status >= 500
    return Failure(retryable, f"HTTP {status}: {message}", retry_after(headers) if retryable else None)


class ProviderModel(Model):
    """A model behind a provider's API. Raises ``ModelError`` when the provider fails for good."""

    provider: ClassVar[str]
    extra: ClassVar[str]
    key_required: ClassVar[bool] = True
    # The provider's own server, where its SDK sends requests without a base URL (None: none).
    default_base_url: ClassVar[str | None] = None
    # Settings only this provider takes, with the TOML types they accept.
    options: ClassVar[Mapping[str, tuple[type, ...]]] = {}

    def __init__(self, config: ModelConfig, *, sleep: Callable[[float], None] = time.sleep) -> None:
        self.config = config
        self.name = label(config.name)
        self.max_iterations = config.iterations
        self._sleep = sleep
        self._secret = self._api_key()
        # Whatever the variable's name, its value is redacted from every text the harness writes.
        redact.register(self._secret)
        self._client = self._connect(self._secret)
        if config.max_output_tokens is None:
            self.config = replace(config, max_output_tokens=self._default_cap())
        self.max_output_tokens = self.config.output_cap

    # What a provider module implements ---------------------------------------------------------

    @abc.abstractmethod
    def _connect(self, api_key: str | None) -> Any:
        """The SDK client, with its own retries off and our timeout."""

    @abc.abstractmethod
    def _call(self, messages: Sequence[Message]) -> Response:
        """One request for the conversation: the text and the provider's token counts; raises
        the SDK's exceptions as they come."""

    @abc.abstractmethod
    def _classify(self, exc: BaseException) -> Failure | None:
        """What an exception from ``_call`` means; ``None`` for one the provider did not raise."""

    def _default_cap(self) -> int:
        """The output cap when the models config sets none (the shipped one sets it for every
        provider but openai-compatible, whose server says its own)."""
        return FALLBACK_MAX_OUTPUT_TOKENS

    # Shared -------------------------------------------------------------------------------------

    def identity(self) -> dict[str, Any]:
        """The answer settings, and the server the answers come from (the response cache's key)."""
        return {**self.config.identity(), "base_url": self.server()}

    def server(self) -> str | None:
        """The base URL of the server asked, ``None`` for the provider's own."""
        url = (self.config.base_url or "").rstrip("/")
        own = (self.default_base_url or "").rstrip("/")
        return url if url and url != own else None

    def retirement(self) -> str | None:
        """When the provider retires this model, as its SDK states it (``None``: not known to)."""
        return None

    def deprecation(self) -> str | None:
        config = self.config
        when = config.retires or self.retirement()
        if when is None:
            return None
        instead = f"; use {config.replacement} instead" if config.replacement else "; choose a current model"
        return (
            f"model {config.name} ({config.spec}) is deprecated: {config.provider} retires it on {when}{instead} "
            "(`weirdml models` lists the current aliases)"
        )

    def _api_key(self) -> str | None:
        names = self.config.api_key_env
        if names and self.config.api_key_env_shipped and self.server() is not None:
            raise ValueError(self._key_elsewhere())
        for name in names:
            value = os.environ.get(name)
            if value:
                return value
        if names and self.key_required:
            choices = " or ".join(names)
            raise ValueError(
                f"{self.config.name} ({self.config.spec}) needs an API key: set {choices} in the environment"
            )
        return None

    def _key_elsewhere(self) -> str:
        """Why the shipped key of the provider is not sent to another server, and the fix."""
        config = self.config
        names = " or ".join(config.api_key_env)
        return printable(
            f"{config.name} ({config.spec}) would send {names} to {_shown_url(self.server() or '')}, which is not "
            f"{config.provider}'s own server; a key goes to another server only when the models config names it "
            f'for that model: set api_key_env = "{config.api_key_env[0]}" (or the variable holding that server\'s '
            f'key), or api_key_env = [] to send none, under [tool.weirdml.models."{config.name}"] in '
            f"pyproject.toml (or [tool.weirdml.providers.{config.provider}])"
        )

    def _failure(self, exc: BaseException) -> Failure:
        if isinstance(exc, StreamCut):
            if exc.cause is None:
                return Failure(True, f"the stream ended after {exc.received} characters without the answer's end")
            inner = self._failure(exc.cause)
            if not exc.received:
                return inner
            message = f"stream cut mid-answer after {exc.received} characters: {inner.message}"
            return Failure(inner.retryable, message, inner.retry_after_s)
        failure = self._classify(exc)
        if failure is None:
            failure = Failure(False, f"{type(exc).__name__}: {exc}")
        return Failure(failure.retryable, self._redact(failure.message), failure.retry_after_s)

    def _redact(self, text: str) -> str:
        # Providers do not echo keys, but a proxy or an SDK message might; records must never hold one.
        return redact.redact(text)

    def generate(self, request: Request) -> Response:
        import tenacity

        config = self.config
        retries: list[dict[str, Any]] = []
        backoff = tenacity.wait_exponential_jitter(
            initial=config.retry_initial_s, max=BACKOFF_MAX_S, jitter=config.retry_initial_s
        )

        def wait(state: tenacity.RetryCallState) -> float:
            asked = self._failure(_exception(state)).retry_after_s
            return asked if asked is not None else backoff(state)

        def stop(state: tenacity.RetryCallState) -> bool:
            return state.attempt_number > config.max_retries or (
                state.idle_for + state.upcoming_sleep > config.max_retry_wait_s
            )

        def before_sleep(state: tenacity.RetryCallState) -> None:
            error = self._failure(_exception(state)).message
            wait_s = round(state.upcoming_sleep, 3)
            retries.append({"attempt": state.attempt_number, "error": error, "wait_s": wait_s})
            log.warning("%s: attempt %d failed (%s); retry in %.1f s", self.name, state.attempt_number, error, wait_s)

        def attempt() -> tuple[Response, float]:
            clock = time.monotonic()
            reply = self._call(request.messages)
            return reply, time.monotonic() - clock

        retrying = tenacity.Retrying(
            stop=stop,
            wait=wait,
            retry=tenacity.retry_if_exception(lambda exc: self._failure(exc).retryable),
            before_sleep=before_sleep,
            sleep=self._sleep,
            reraise=True,
        )
        try:
            reply, latency = retrying(attempt)
        except Exception as exc:
            failure = self._failure(exc)
            tries = f" (gave up after {len(retries)} retries)" if retries else ""
            # No exception chaining: the SDK's exception holds the request, headers included.
            raise ModelError(f"{config.provider} error for {config.spec}: {failure.message}{tries}") from None
        usage = replace(reply.usage, cost_usd=config.cost(reply.usage), latency_s=latency, retries=tuple(retries))
        return replace(reply, usage=usage)

    def close(self) -> None:
        close = getattr(self._client, "close", None)
        if callable(close):
            close()


def _exception(state: Any) -> BaseException:
    outcome = state.outcome
    exc = outcome.exception() if outcome is not None else None
    return exc if exc is not None else RuntimeError("no exception")


def _shown_url(url: str) -> str:
    """A server's URL without any user or password in it, safe to print."""
    scheme, sep, rest = url.partition("://")
    host, slash, path = rest.partition("/")
    return printable(redact.redact(scheme + sep + host.rsplit("@", 1)[-1] + slash + path))


def split_system(messages: Sequence[Message]) -> tuple[str, list[Message]]:
    """The system prompt apart from the turns, for APIs that take it as its own field."""
    system = "\n\n".join(m.content for m in messages if m.role == "system")
    return system, [m for m in messages if m.role != "system"]


def sdk_failure(exc: BaseException, sdk: ModuleType, timeout_text: str) -> Failure | None:
    """Classify an exception of the Anthropic or OpenAI SDK (both share one exception layout), or
    of the HTTP library under it."""
    if isinstance(exc, sdk.APIStatusError):
        body = exc.body
        error = body.get("error", body) if isinstance(body, dict) else {}
        error = error if isinstance(error, dict) else {}
        message = str(error.get("message") or exc.message)
        kind = error.get("type")
        text = f"{kind}: {message}" if isinstance(kind, str) and kind and kind not in message else message
        return status_failure(exc.status_code, text, exc.response.headers)
    if isinstance(exc, sdk.APITimeoutError):
        return Failure(True, timeout_text)
    if isinstance(exc, sdk.APIConnectionError):
        cause = exc.__cause__ or exc.__context__
        return Failure(True, f"connection error: {cause or exc.message}")
    return http_failure(exc, http_library(), timeout_text)
