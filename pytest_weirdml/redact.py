"""Secrets never reach a record, a report, the terminal or a prompt.

The sandboxes give scripts an environment of our own, and the harness never reads through what a
script leaves behind; this is the last line behind both. Every text that leaves the harness (a
script's output, a zero reason, a provider's error message, a failure shown by pytest) passes
through ``redact``, which replaces the value of every secret the harness knows: the API keys the
providers read (``register``), every environment variable named like ``*_KEY``, ``*_APIKEY``,
``*_TOKEN``, ``*_SECRET``, ``*_PASSWORD``, ``*_PASS``, ``*_PWD`` or ``*_CREDENTIALS`` (and
``AWS_ACCESS_KEY_ID``), and the password of any variable that holds a URL with one
(``postgres://user:password@host``).

A text is redacted whole before anything cuts it (the capture cap, the protocol's head and tail),
so no cut can leave the start or the end of a key behind: a script's output is redacted as it
streams in (``StreamRedactor``), holding back only as many bytes as the longest secret.
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import urlsplit

REDACTED = "[redacted]"
SECRET_SUFFIXES = ("_KEY", "_APIKEY", "_TOKEN", "_SECRET", "_PASSWORD", "_PASS", "_PWD", "_CREDENTIALS")
SECRET_NAMES = frozenset({"AWS_ACCESS_KEY_ID"})
# Shorter values ("1", "true", a region name) would blank out ordinary words.
MIN_LENGTH = 8

_registered: set[str] = set()


def register(value: str | None) -> None:
    """Treat ``value`` as a secret from now on (an API key read from a variable of any name)."""
    if value and len(value) >= MIN_LENGTH:
        _registered.add(value)


def secret_name(name: str) -> bool:
    upper = name.upper()
    return upper.endswith(SECRET_SUFFIXES) or upper in SECRET_NAMES


def url_password(value: str) -> str | None:
    """The secret part of a URL with a password: the password, or ``user:password@`` when the
    password alone is too short to replace safely; None for any other value."""
    if "://" not in value or "@" not in value:
        return None
    try:
        parts = urlsplit(value.strip())
        password = parts.password
    except ValueError:
        return None
    if not password:
        return None
    if len(password) >= MIN_LENGTH:
        return password
    return parts.netloc.rsplit("@", 1)[0] + "@"


def secrets() -> list[str]:
    """Every known secret value, longest first (so a key containing another is replaced whole)."""
    found = set(_registered)
    for name, value in os.environ.items():
        if secret_name(name) and len(value) >= MIN_LENGTH:
            found.add(value)
        password = url_password(value)
        if password is not None:
            found.add(password)
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


class StreamRedactor:
    """Redacts a byte stream fed in chunks: every secret is replaced wherever the chunks split it.

    The last ``longest secret - 1`` bytes stay back until more arrives (``feed``) or the stream
    ends (``flush``): any secret that starts before them has ended inside what was seen.
    """

    def __init__(self, values: list[str] | None = None) -> None:
        self._secrets = [v.encode() for v in (secrets() if values is None else values)]
        self._hold = max((len(v) for v in self._secrets), default=1) - 1
        self._pending = b""

    def feed(self, chunk: bytes) -> bytes:
        if not self._secrets:
            return chunk
        data = self._pending + chunk
        for value in self._secrets:
            if value in data:
                data = data.replace(value, REDACTED.encode())
        keep = min(self._hold, len(data))
        self._pending = data[len(data) - keep :]
        return data[: len(data) - keep]

    def flush(self) -> bytes:
        data, self._pending = self._pending, b""
        return data
