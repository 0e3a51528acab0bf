"""The response cache (``--weirdml-cache``): a re-run replays answers without calling the API.

An answer is stored under the hash of (model identity, conversation, run index), one JSON file
each. The model identity is every setting that changes its answers, the provider and the server
it came from (the base URL) among them: an answer of a local server is never replayed as the
provider's. The run index is in the key so that the independent runs of a task stay independent.
The conversation in the key is the system prompt, the task prompt and the model's own earlier
answers, not the harness's feedback: feedback carries script run times and training logs that
differ on every run, and keying on them would make a replay miss from the second iteration on.
A file lock per entry lets xdist workers share the directory; a worker that finds an entry
being written waits for it instead of paying for the same call twice. Replayed answers keep
the usage (tokens, cost, latency) the API reported when they were made, and no retries, and are
marked ``usage.cached_response``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from filelock import FileLock

from pytest_weirdml.models.base import Message, Model, Request, Response
from pytest_weirdml.records import Usage

# 2: an entry holds the text and the call's usage, as {"text", "usage"}.
# 3: the key holds the server (base URL); entries of 2 may have come from any server.
CACHE_VERSION = 3


def _without_feedback(messages: Sequence[Message]) -> list[Message]:
    """The turns that decide the next answer but do not vary between identical runs."""
    kept: list[Message] = []
    answered = False
    for message in messages:
        if message.role == "assistant":
            answered = True
        elif message.role == "user" and answered:
            continue
        kept.append(message)
    return kept


class CachedModel(Model):
    def __init__(self, inner: Model, directory: Path) -> None:
        self.inner = inner
        self.name = inner.name
        self.max_iterations = inner.max_iterations
        self.max_output_tokens = inner.max_output_tokens
        self.cap_note = inner.cap_note
        self.directory = directory
        self.hits = 0

    def identity(self) -> dict[str, Any] | None:
        return self.inner.identity()

    def deprecation(self) -> str | None:
        return self.inner.deprecation()

    def key(self, request: Request) -> str:
        payload = {
            "version": CACHE_VERSION,
            "model": self.inner.identity(),
            "messages": [[m.role, m.content] for m in _without_feedback(request.messages)],
            "run": request.run,
        }
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()

    def path(self, request: Request) -> Path:
        key = self.key(request)
        return self.directory / key[:2] / f"{key}.json"

    def generate(self, request: Request) -> Response:
        path = self.path(request)
        path.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(str(path) + ".lock"):
            if path.is_file():
                self.hits += 1
                raw = json.loads(path.read_text(encoding="utf-8"))
                usage = dataclasses.replace(Usage.from_dict(raw["usage"]), cached_response=True)
                return Response(raw["text"], usage)
            response = self.inner.generate(request)
            data = {"text": response.text, "usage": dataclasses.asdict(dataclasses.replace(response.usage, retries=()))}
            # Written whole then renamed: a killed session leaves no half entry to replay.
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
            os.replace(tmp, path)
            return response

    def close(self) -> None:
        self.inner.close()
