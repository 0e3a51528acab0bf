"""Pure text functions of the protocol: code extraction and output truncation."""

from __future__ import annotations

import re

# A fence opens with ``` (optionally a language tag) at the start of a line and closes with
# ``` at the start of a later line. Non-greedy, so consecutive blocks stay separate.
_FENCE = re.compile(r"^[ \t]*```[^\n`]*\n(.*?)^[ \t]*```[ \t]*$", re.DOTALL | re.MULTILINE)

HEAD_CHARS = 4000
TAIL_CHARS = 4000


def code_blocks(text: str) -> list[str]:
    """Every fenced code block in ``text``, in order."""
    return [match.group(1) for match in _FENCE.finditer(text)]


def extract_code(text: str) -> str | None:
    """The script a response submits: its longest fenced block (the first of equals), or None."""
    blocks = [block for block in code_blocks(text) if block.strip()]
    if not blocks:
        return None
    return max(blocks, key=len)


def truncate_output(text: str, head: int = HEAD_CHARS, tail: int = TAIL_CHARS) -> str:
    """Keep the first ``head`` and last ``tail`` characters of an output longer than both."""
    if len(text) <= head + tail:
        return text
    dropped = len(text) - head - tail
    return f"{text[:head]}\n\n[... {dropped} characters cut ...]\n\n{text[-tail:]}"
