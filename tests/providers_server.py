"""A scripted stand-in for the providers' HTTP APIs, served on 127.0.0.1 for the real SDKs.

``FakeProvider(wire)`` speaks enough of one wire protocol (``anthropic``: Messages,
``openai``: Chat Completions, ``google``: Gemini generateContent) for the SDK pointed at
``base_url`` to work, whole or streamed: a request that asks for a stream (``"stream": true``,
Gemini's ``:streamGenerateContent?alt=sse``) gets server-sent events in chunked transfer
encoding, the answer in pieces and the usage in the final event, as the providers send them.
Each request takes the next ``Planned`` answer from ``plan`` (an error status, a stall, a
dropped connection, an answer cut at the output cap, a stream cut halfway, pauses between
chunks); with the plan empty,
``responder`` writes the text from the conversation so far. Every request is kept in
``requests``. ``models`` is what ``GET /v1/models`` lists (openai wire; 404 when ``None``),
vLLM's way: ``[{"id": "tiny-llm", "max_model_len": 40960}]``.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

WIRES = ("anthropic", "openai", "google")


@dataclass
class Usage:
    input: int = 100  # the whole prompt, cached part included
    output: int = 50  # everything generated, reasoning included
    reasoning: int = 10
    cached: int = 20


@dataclass
class Planned:
    status: int = 200
    text: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    error: str = "planned failure"
    error_type: str = ""
    delay_s: float = 0.0
    drop: bool = False
    usage: Usage | None = None
    # The answer stopped at the request's output cap (each wire's own stop reason).
    cut: bool = False
    # Streamed: the connection closes after half the answer's events (no end of the body).
    cut_stream: bool = False
    # Streamed: the pause before each event after the first.
    chunk_delay_s: float = 0.0


@dataclass
class Seen:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    conversation: list[tuple[str, str]]
    stream: bool = False


Responder = Callable[[list[tuple[str, str]]], str]


class FakeProvider:
    def __init__(self, wire: str, responder: Responder | None = None, usage: Usage | None = None) -> None:
        assert wire in WIRES, wire
        self.wire = wire
        self.responder: Responder = responder or (lambda conversation: "I have no script for you.")
        self.usage = usage or Usage()
        self.plan: deque[Planned] = deque()
        self.requests: list[Seen] = []
        self.models: list[dict[str, Any]] | None = None
        self.listings: list[str] = []  # the GET paths asked, apart from the requests
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    @property
    def base_url(self) -> str:
        assert self._server is not None, "start the server first (use it as a context manager)"
        root = f"http://127.0.0.1:{self._server.server_address[1]}"
        return root + "/v1" if self.wire == "openai" else root

    def __enter__(self) -> FakeProvider:
        provider = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                provider._handle(self)

            def do_GET(self) -> None:
                provider._list_models(self)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.shutdown()
        self._server.server_close()

    # One request -------------------------------------------------------------------------------

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("content-length") or 0)
        body = json.loads(handler.rfile.read(length) or b"{}")
        conversation = _conversation(self.wire, body)
        stream = ":streamGenerateContent" in handler.path if self.wire == "google" else body.get("stream") is True
        with self._lock:
            self.requests.append(Seen(handler.path, dict(handler.headers.items()), body, conversation, stream))
            planned = self.plan.popleft() if self.plan else Planned()
        if planned.delay_s:
            time.sleep(planned.delay_s)
        if planned.drop:
            handler.close_connection = True
            return
        if planned.status == 200:
            text = planned.text if planned.text is not None else self.responder(conversation)
            if stream:
                events = self._events(body, text, planned.usage or self.usage, planned.cut)
                _send_stream(handler, events, planned)
                return
            payload = self._ok(body, text, planned.usage or self.usage, planned.cut)
        else:
            payload = self._error(planned)
        _send(handler, planned.status, payload, planned.headers)

    def _list_models(self, handler: BaseHTTPRequestHandler) -> None:
        with self._lock:
            self.listings.append(handler.path)
        if self.wire != "openai" or self.models is None or handler.path.rstrip("/") != "/v1/models":
            _send(handler, 404, {"error": {"message": "not found", "type": "not_found", "code": None}})
            return
        listed = [{"object": "model", "created": 0, "owned_by": "fake", **entry} for entry in self.models]
        _send(handler, 200, {"object": "list", "data": listed})

    def _ok(self, body: dict[str, Any], text: str, usage: Usage, cut: bool = False) -> dict[str, Any]:
        model = body.get("model", "")
        if self.wire == "anthropic":
            return {
                "id": "msg_fake",
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": [{"type": "text", "text": text}],
                "stop_reason": "max_tokens" if cut else "end_turn",
                "stop_sequence": None,
                "usage": {
                    # Anthropic counts cache reads apart from input_tokens.
                    "input_tokens": usage.input - usage.cached,
                    "cache_read_input_tokens": usage.cached,
                    "cache_creation_input_tokens": 0,
                    "output_tokens": usage.output,
                    "output_tokens_details": {"thinking_tokens": usage.reasoning},
                },
            }
        if self.wire == "openai":
            return {
                "id": "chatcmpl-fake",
                "object": "chat.completion",
                "created": 0,
                "model": model,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": text},
                        "finish_reason": "length" if cut else "stop",
                    }
                ],
                "usage": {
                    "prompt_tokens": usage.input,
                    "completion_tokens": usage.output,
                    "total_tokens": usage.input + usage.output,
                    "prompt_tokens_details": {"cached_tokens": usage.cached},
                    "completion_tokens_details": {"reasoning_tokens": usage.reasoning},
                },
            }
        return {
            "candidates": [
                {
                    "content": {"role": "model", "parts": [{"text": text}]},
                    "finishReason": "MAX_TOKENS" if cut else "STOP",
                    "index": 0,
                }
            ],
            "usageMetadata": {
                "promptTokenCount": usage.input,
                # Gemini counts thoughts apart from the candidates.
                "candidatesTokenCount": usage.output - usage.reasoning,
                "thoughtsTokenCount": usage.reasoning,
                "cachedContentTokenCount": usage.cached,
                "totalTokenCount": usage.input + usage.output,
            },
            "modelVersion": "fake",
        }

    def _events(self, body: dict[str, Any], text: str, usage: Usage, cut: bool) -> list[bytes]:
        """The answer as the wire streams it: server-sent events, the text in pieces, the stop
        reason and the usage at the end."""
        whole = self._ok(body, text, usage, cut)
        pieces = _pieces(text)
        if self.wire == "anthropic":
            start = {**whole, "content": [], "stop_reason": None, "usage": {**whole["usage"], "output_tokens": 1}}
            start["usage"].pop("output_tokens_details")
            events = [("message_start", {"type": "message_start", "message": start})]
            block = {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}
            events += [("content_block_start", block), ("ping", {"type": "ping"})]
            events += [
                (
                    "content_block_delta",
                    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": p}},
                )
                for p in pieces
            ]
            events.append(("content_block_stop", {"type": "content_block_stop", "index": 0}))
            final = {k: v for k, v in whole["usage"].items() if k != "cache_creation_input_tokens"}
            delta = {"stop_reason": whole["stop_reason"], "stop_sequence": None}
            events.append(("message_delta", {"type": "message_delta", "delta": delta, "usage": final}))
            events.append(("message_stop", {"type": "message_stop"}))
            return [f"event: {name}\ndata: {json.dumps(data)}\n\n".encode() for name, data in events]
        if self.wire == "openai":
            head = {k: whole[k] for k in ("id", "created", "model")} | {"object": "chat.completion.chunk"}
            finish = whole["choices"][0]["finish_reason"]
            chunks = [
                {
                    **head,
                    "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}],
                }
            ]
            chunks += [
                {**head, "choices": [{"index": 0, "delta": {"content": p}, "finish_reason": None}]} for p in pieces
            ]
            chunks.append({**head, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
            if (body.get("stream_options") or {}).get("include_usage"):
                chunks.append({**head, "choices": [], "usage": whole["usage"]})
            return [f"data: {json.dumps(c)}\n\n".encode() for c in chunks] + [b"data: [DONE]\n\n"]
        candidate = whole["candidates"][0]
        chunks = [
            {"candidates": [{"content": {"role": "model", "parts": [{"text": p}]}, "index": 0}], "modelVersion": "fake"}
            for p in pieces
        ]
        chunks[-1]["candidates"][0]["finishReason"] = candidate["finishReason"]
        chunks[-1]["usageMetadata"] = whole["usageMetadata"]
        return [f"data: {json.dumps(c)}\r\n\r\n".encode() for c in chunks]

    def _error(self, planned: Planned) -> dict[str, Any]:
        if self.wire == "anthropic":
            kind = planned.error_type or {401: "authentication_error", 429: "rate_limit_error"}.get(
                planned.status, "overloaded_error" if planned.status == 529 else "api_error"
            )
            return {"type": "error", "error": {"type": kind, "message": planned.error}}
        if self.wire == "openai":
            return {"error": {"message": planned.error, "type": planned.error_type or "server_error", "code": None}}
        status = planned.error_type or {401: "UNAUTHENTICATED", 429: "RESOURCE_EXHAUSTED"}.get(
            planned.status, "UNAVAILABLE"
        )
        return {"error": {"code": planned.status, "message": planned.error, "status": status}}


def _send(handler: BaseHTTPRequestHandler, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
    data = json.dumps(payload).encode()
    try:
        handler.send_response(status)
        handler.send_header("content-type", "application/json")
        handler.send_header("content-length", str(len(data)))
        for key, value in (headers or {}).items():
            handler.send_header(key, value)
        handler.end_headers()
        handler.wfile.write(data)
    except (BrokenPipeError, ConnectionResetError):
        pass  # the client gave up (a timeout test)


def _pieces(text: str, count: int = 6) -> list[str]:
    size = max(1, -(-len(text) // count))
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def _send_stream(handler: BaseHTTPRequestHandler, events: list[bytes], planned: Planned) -> None:
    """Server-sent events, one HTTP chunk each; a cut stream stops after half of them and closes
    the connection without the body's last chunk, as a dropped connection does."""
    keep = len(events) // 2 if planned.cut_stream else len(events)
    try:
        handler.send_response(200)
        handler.send_header("content-type", "text/event-stream")
        handler.send_header("transfer-encoding", "chunked")
        for key, value in planned.headers.items():
            handler.send_header(key, value)
        handler.end_headers()
        for index, event in enumerate(events[:keep]):
            if index and planned.chunk_delay_s:
                time.sleep(planned.chunk_delay_s)
            handler.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
            handler.wfile.flush()
        if planned.cut_stream:
            handler.close_connection = True
            handler.connection.shutdown(socket.SHUT_RDWR)
            return
        handler.wfile.write(b"0\r\n\r\n")
    except (BrokenPipeError, ConnectionResetError, OSError):
        handler.close_connection = True  # the client gave up (a timeout test)


def _conversation(wire: str, body: dict[str, Any]) -> list[tuple[str, str]]:
    """The request's turns as (role, text), roles named as ours: system, user, assistant."""
    turns: list[tuple[str, str]] = []
    if wire == "anthropic":
        if body.get("system"):
            turns.append(("system", body["system"]))
        turns += [(m["role"], _text(m["content"])) for m in body.get("messages", [])]
    elif wire == "openai":
        turns += [(m["role"], _text(m["content"])) for m in body.get("messages", [])]
    else:
        system = body.get("systemInstruction")
        if system:
            turns.append(("system", "".join(p.get("text", "") for p in system.get("parts", []))))
        for content in body.get("contents", []):
            role = "assistant" if content.get("role") == "model" else "user"
            turns.append((role, "".join(p.get("text", "") for p in content.get("parts", []))))
    return turns


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(block.get("text", "") for block in content if isinstance(block, dict))
