"""The model clients of one process: each model is built once, on first use, and closed once.

A session of T tasks x R runs asks the same few models for every item; building a client reads
its API key, builds an SDK client and may ask its server for its limits (openai-compatible), and
``replay:PATH`` reads its whole records file. The pool does that once per model and process and
hands the same client to every item (items of one process run one after another).

Records, baselines and reports know a model by its name (``replay:/a/ans.json`` is
``replay:ans.json``), so two specs of one session that would record under one name are refused,
naming both: their runs would be mixed or lost. Names are not made distinct instead, because a
name that depended on the other models of the session would change from one session to the next,
and a baseline or a resumed session would no longer find the model.
"""

from __future__ import annotations

import threading
from pathlib import Path

from pytest_weirdml.models import Catalog, Model, resolve
from pytest_weirdml.untrusted import printable


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
        # The spec each recorded name came from.
        self._specs: dict[str, str] = {}
        self._lock = threading.Lock()
        # How many clients this pool built, per spec (a test counts them).
        self.built: dict[str, int] = {}

    def get(self, spec: str) -> Model:
        """The client of ``spec``, built on first use; ``ValueError`` naming the known models."""
        with self._lock:
            model = self._clients.get(spec)
            if model is None:
                model = resolve(spec, self.catalog, cache=self.cache, answer_timeout_s=self.answer_timeout_s)
                other = self._specs.get(model.name)
                if other is not None:
                    model.close()
                    raise ValueError(_same_name(other, spec, model.name))
                self._specs[model.name] = spec
                self._clients[spec] = model
                self.built[spec] = self.built.get(spec, 0) + 1
            return model

    def close(self) -> None:
        with self._lock:
            clients, self._clients = list(self._clients.values()), {}
        for model in clients:
            model.close()


def _same_name(first: str, second: str, name: str) -> str:
    return (
        f"models {printable(first)!r} and {printable(second)!r} would both be recorded as {printable(name)!r}, "
        "and the runs of one would be taken for the other's; choose one of them per session, or give them "
        "names of their own (a replay or queue path whose last part differs, an alias in the models config)"
    )
