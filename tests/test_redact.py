"""Redaction: every known secret leaves every text the harness writes."""

from __future__ import annotations

import pytest


def test_every_known_secret_is_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_weirdml import redact

    monkeypatch.setenv("SOME_SERVICE_TOKEN", "tok-0123456789")
    monkeypatch.setenv("MY_API_KEY", "key-abcdefghij")
    monkeypatch.setenv("DB_PASSWORD", "hunter2-but-longer")
    monkeypatch.setenv("AWS_SECRET", "aws-secret-value")
    monkeypatch.setenv("SHORT_KEY", "1234")  # too short to be told from ordinary text
    monkeypatch.setenv("HOME_DIRECTORY", "/root/somewhere")  # not named like a secret
    monkeypatch.setattr(redact, "_registered", set())
    redact.register("registered-secret-value")
    text = "tok-0123456789 key-abcdefghij hunter2-but-longer aws-secret-value registered-secret-value"
    text += " 1234 /root/somewhere"
    assert redact.redact(text) == "[redacted] [redacted] [redacted] [redacted] [redacted] 1234 /root/somewhere"
    assert redact.redact_values({"error": "HTTP 401: key-abcdefghij", "attempt": 2}) == {
        "error": "HTTP 401: [redacted]",
        "attempt": 2,
    }
