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


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("MYSERVICE_APIKEY", "apikey-0123456789"),
        ("SMTP_PASS", "smtp-pass-0123"),
        ("DB_PWD", "db-pwd-0123456"),
        ("GCP_CREDENTIALS", '{"private_key": "abc"}'),
        ("AWS_ACCESS_KEY_ID", "AKIAABCDEFGHIJKLMNOP"),
    ],
)
def test_the_wider_secret_names_are_redacted(monkeypatch: pytest.MonkeyPatch, name: str, value: str) -> None:
    from pytest_weirdml import redact

    monkeypatch.setenv(name, value)
    assert redact.redact(f"before {value} after") == "before [redacted] after"


def test_the_password_of_a_url_is_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_weirdml import redact

    monkeypatch.setenv("DATABASE_URL", "postgres://alice:s3cret-password@db.example:5432/app")
    monkeypatch.setenv("CACHE_URL", "redis://bob:pw@cache:6379")  # a short password: user and password go
    monkeypatch.setenv("PLAIN_URL", "https://example.org/path")
    text = "connect s3cret-password / redis://bob:pw@cache:6379 / https://example.org/path"
    assert redact.redact(text) == "connect [redacted] / redis://[redacted]cache:6379 / https://example.org/path"


def test_a_stream_is_redacted_wherever_its_chunks_split_a_key() -> None:
    from pytest_weirdml.redact import StreamRedactor

    key = "sk-planted-0123456789abcdef"
    stream = ("x" * 50 + key + "y" * 7 + key + "z").encode()
    for size in range(1, len(stream) + 1):
        redactor = StreamRedactor([key, "short-key-1"])
        chunks = [stream[i : i + size] for i in range(0, len(stream), size)]
        out = b"".join(redactor.feed(c) for c in chunks) + redactor.flush()
        assert out == ("x" * 50 + "[redacted]" + "y" * 7 + "[redacted]" + "z").encode(), size


def test_a_key_across_the_capture_cut_is_redacted_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_weirdml.sandbox._output import CappedBuffer

    key = "sk-planted-0123456789abcdef"
    monkeypatch.setenv("PLANTED_API_KEY", key)
    buffer = CappedBuffer(1024)
    # The key straddles the end of the kept head (512 bytes) and the start of the kept tail.
    stream = b"a" * 500 + key.encode() + b"b" * 5000 + key.encode() + b"c" * 500
    for i in range(0, len(stream), 7):
        buffer.feed(stream[i : i + 7])
    text = buffer.text()
    assert buffer.total == len(stream)
    assert not [key[i : i + 6] for i in range(len(key) - 5) if key[i : i + 6] in text], text
    assert text.startswith("a" * 500 + "[redacted]") and text.endswith("[redacted]" + "c" * 500)
