"""Name registries for what plugs into the harness: offline models, model providers, sandbox
backends.

A registry maps a name to a factory. Each implementation registers itself in its own module
(``@PROVIDERS.register("anthropic", usage="anthropic:MODEL")``), and a registry imports every
public module of its package the first time it is asked for a name, so adding an
implementation is adding one file (a module: packages, such as the sandbox contract suite, are
not implementations and are never imported by discovery). Factories import what is heavy (a provider's SDK, the
Docker SDK) only when they are called. Plugins and conftest.py files may register more names
(``register`` or ``add``) before the session starts.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Entry(Generic[T]):
    name: str
    factory: T
    # How a user names it, e.g. "replay:PATH" or "anthropic:MODEL".
    usage: str


class Registry(Generic[T]):
    """Names of one kind of plug-in, each with a factory, discovered in ``package``."""

    def __init__(self, kind: str, package: str) -> None:
        self.kind = kind
        self.package = package
        self._entries: dict[str, Entry[T]] = {}
        self._discovered = False

    def add(self, name: str, factory: T, *, usage: str | None = None) -> None:
        self._entries[name] = Entry(name, factory, usage or name)

    def discard(self, name: str) -> None:
        self._entries.pop(name, None)

    def register(self, name: str, *, usage: str | None = None) -> Callable[[T], T]:
        """Decorator form of ``add``."""

        def decorate(factory: T) -> T:
            self.add(name, factory, usage=usage)
            return factory

        return decorate

    def _discover(self) -> None:
        if self._discovered:
            return
        self._discovered = True
        package = importlib.import_module(self.package)
        for info in pkgutil.iter_modules(package.__path__):
            if not info.name.startswith("_") and not info.ispkg:
                importlib.import_module(f"{self.package}.{info.name}")

    def entries(self) -> list[Entry[T]]:
        self._discover()
        return list(self._entries.values())

    def names(self) -> list[str]:
        return [entry.name for entry in self.entries()]

    def get(self, name: str) -> T | None:
        self._discover()
        entry = self._entries.get(name)
        return entry.factory if entry is not None else None

    def lookup(self, name: str) -> T:
        """The factory of ``name``; ``LookupError`` naming the known ones otherwise."""
        factory = self.get(name)
        if factory is None:
            raise LookupError(f"unknown {self.kind} {name!r}; known: {', '.join(self.names())}")
        return factory
