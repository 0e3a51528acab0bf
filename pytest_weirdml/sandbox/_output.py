"""Capture a process's output with a size cap that keeps both its head and its tail.

The stream is redacted before the cap cuts it (``redact.StreamRedactor``): a key printed across
the cut is replaced whole, never left as a prefix in the head or a suffix in the tail.
"""

from __future__ import annotations

import contextlib
import os
import threading

from pytest_weirdml.redact import StreamRedactor
from pytest_weirdml.sandbox import size_text


def capture_note(total: int, cap: int) -> str:
    """What the model reads when the harness kept only part of a script's output."""
    return (
        f"harness: the script printed {total} bytes of output; the harness keeps at most "
        f"{size_text(cap)} of it (the first and the last {size_text(cap // 2)}) and dropped the "
        f"{total - 2 * (cap // 2)} bytes in between"
    )


class CappedBuffer:
    """Keeps at most ``cap`` bytes of what it is fed: the first half and the last half."""

    def __init__(self, cap: int) -> None:
        self._half = max(cap // 2, 1)
        self._head = bytearray()
        self._tail = bytearray()
        self.total = 0
        # What reached the buffer after redaction (a key is longer or shorter than its marker).
        self._seen = 0
        self._redactor = StreamRedactor()

    def feed(self, chunk: bytes) -> None:
        """Take the next bytes of the stream (``total`` counts them as the script wrote them)."""
        self.total += len(chunk)
        self._keep(self._redactor.feed(chunk))

    def _keep(self, chunk: bytes) -> None:
        self._seen += len(chunk)
        room = self._half - len(self._head)
        if room > 0:
            self._head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self._tail += chunk
            # Trim in batches so a flood costs amortised O(1) per byte, not a copy per chunk.
            if len(self._tail) > 2 * self._half:
                del self._tail[: len(self._tail) - self._half]

    def text(self) -> str:
        self._keep(self._redactor.flush())
        tail = bytes(self._tail[-self._half :])
        kept = len(self._head) + len(tail)
        text = self._head.decode("utf-8", errors="replace")
        if self._seen > kept:
            text += f"\n[... {self._seen - kept} bytes of output not kept: the harness keeps {size_text(kept)} ...]\n"
        return text + tail.decode("utf-8", errors="replace")


class CappedOutput(CappedBuffer):
    """Reads a pipe to its end in a thread; keeps at most ``cap`` bytes (half head, half tail)."""

    def __init__(self, fd: int, cap: int) -> None:
        super().__init__(cap)
        self._fd = fd
        self._thread = threading.Thread(target=self._pump, daemon=True)
        self._thread.start()

    def _pump(self) -> None:
        while True:
            try:
                chunk = os.read(self._fd, 1 << 16)
            except OSError:
                break
            if not chunk:
                break
            self.feed(chunk)

    def finish(self, timeout: float = 5.0) -> str:
        """Wait for the end of the stream (briefly), close the pipe and return the text kept."""
        self._thread.join(timeout)
        with contextlib.suppress(OSError):
            os.close(self._fd)
        self._thread.join(1.0)
        return self.text()
