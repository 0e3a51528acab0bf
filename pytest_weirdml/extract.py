"""Pure text functions of the protocol: code extraction and output truncation."""

from __future__ import annotations

import re

# A fence opens with ``` (optionally an info string: the language) at the start of a line and
# closes with ``` at the start of a later line. Non-greedy, so consecutive blocks stay separate.
_FENCE = re.compile(r"^[ \t]*```([^\n`]*)\n(.*?)^[ \t]*```[ \t]*$", re.DOTALL | re.MULTILINE)
# The published rule: a script is fenced as ```python or with a bare ```.
SCRIPT_LANGUAGES = frozenset({"", "python"})

HEAD_CHARS = 4000
TAIL_CHARS = 4000


def code_blocks(text: str, *, scripts_only: bool = False) -> list[str]:
    """The fenced code blocks of ``text``, in order; with ``scripts_only`` only those fenced as
    ```` ```python ```` or bare ```` ``` ```` (a ```` ```text ```` or ```` ```bash ```` block is no script)."""
    return [
        match.group(2)
        for match in _FENCE.finditer(text)
        if not scripts_only or _language(match.group(1)) in SCRIPT_LANGUAGES
    ]


def _language(info: str) -> str:
    words = info.split()
    return words[0].lower() if words else ""


def extract_code(text: str) -> str | None:
    """The script a response submits: its longest ```python or bare ``` block (the first of equals), or None."""
    blocks = [block for block in code_blocks(text, scripts_only=True) if block.strip()]
    if not blocks:
        return None
    return max(blocks, key=len)


def truncate_output(text: str, head: int = HEAD_CHARS, tail: int = TAIL_CHARS) -> str:
    """Keep the first ``head`` and last ``tail`` characters of an output longer than both."""
    if len(text) <= head + tail:
        return text
    dropped = len(text) - head - tail
    return f"{text[:head]}\n\n[... {dropped} characters cut ...]\n\n{text[-tail:]}"
