"""Secrets never reach a record, a report, the terminal or a prompt.

The sandboxes give scripts an environment of our own, and the harness never reads through what a
script leaves behind; this is the last line behind both. Every text that leaves the harness (a
script's output, a zero reason, a provider's error message, a failure shown by pytest) passes
through ``redact``, which replaces the value of every secret the harness knows: the API keys the
providers read (``register``) and every environment variable named like ``*_KEY``, ``*_TOKEN``,
``*_SECRET`` or ``*_PASSWORD``.
"""

from __future__ import annotations

import os
from typing import Any

REDACTED = "[redacted]"
SECRET_SUFFIXES = ("_KEY", "_TOKEN", "_SECRET", "_PASSWORD")
# Shorter values ("1", "true", a region name) would blank out ordinary words.
MIN_LENGTH = 8

_registered: set[str] = set()


def register(value: str | None) -> None:
    """Treat ``value`` as a secret from now on (an API key read from a variable of any name)."""
    if value and len(value) >= MIN_LENGTH:
        _registered.add(value)


def secrets() -> list[str]:
    """Every known secret value, longest first (so a key containing another is replaced whole)."""
    found = set(_registered)
    for name, value in os.environ.items():
        if name.upper().endswith(SECRET_SUFFIXES) and len(value) >= MIN_LENGTH:
            found.add(value)
    return sorted(found, key=len, reverse=True)


def redact(text: str) -> str:
    for value in secrets():
        if value in text:
            text = text.replace(value, REDACTED)
    return text


def redact_optional(text: str | None) -> str | None:
    return None if text is None else redact(text)


def redact_values(data: dict[str, Any]) -> dict[str, Any]:
    """A copy of a flat mapping with its string values redacted (a retry's error message)."""
    return {key: redact(value) if isinstance(value, str) else value for key, value in data.items()}
