"""The model clients of one process: each model is built once, on first use, and closed once.

A session of T tasks x R runs asks the same few models for every item; building a client reads
its API key, builds an SDK client and may ask its server for its limits (openai-compatible), and
``replay:PATH`` reads its whole records file. The pool does that once per model and process and
hands the same client to every item (items of one process run one after another).
"""

from __future__ import annotations

import threading
from pathlib import Path

from pytest_weirdml.models import Catalog, Model, resolve


class ModelPool:
    """Clients by model spec, built by ``models.resolve`` with the session's catalog, cache and
    answer timeout."""

    def __init__(
        self, catalog: Catalog | None = None, *, cache: Path | None = None, answer_timeout_s: float | None = None
    ) -> None:
        self.catalog = catalog
        self.cache = cache
        self.answer_timeout_s = answer_timeout_s
        self._clients: dict[str, Model] = {}
        self._lock = threading.Lock()
        # How many clients this pool built, per spec (a test counts them).
        self.built: dict[str, int] = {}

    def get(self, spec: str) -> Model:
        """The client of ``spec``, built on first use; ``ValueError`` naming the known models."""
        with self._lock:
            model = self._clients.get(spec)
            if model is None:
                model = resolve(spec, self.catalog, cache=self.cache, answer_timeout_s=self.answer_timeout_s)
                self._clients[spec] = model
                self.built[spec] = self.built.get(spec, 0) + 1
            return model

    def close(self) -> None:
        with self._lock:
            clients, self._clients = list(self._clients.values()), {}
        for model in clients:
            model.close()
