"""Pure text functions of the protocol: code extraction and output truncation."""

from __future__ import annotations

import re

# A fence opens with ``` (optionally an info string: the language) on a line of its own and
# closes at the next line that is ``` alone; consecutive blocks stay separate. Each line is
# matched on its own and the scan only moves forward, so extraction is linear in the answer's
# length whatever it holds (a regex over the whole text rescans the rest from every open fence).
_OPEN = re.compile(r"[ \t]*```([^`]*)")
_CLOSE = re.compile(r"[ \t]*```[ \t]*")
# The published rule: a script is fenced as ```python or with a bare ```.
SCRIPT_LANGUAGES = frozenset({"", "python"})

HEAD_CHARS = 4000
TAIL_CHARS = 4000


def _fenced(text: str) -> list[tuple[str, str]]:
    """(info string, content) of every fenced block, in order; an open fence without a close
    holds no block (and neither does any fence after it: no later line closes it)."""
    lines = text.split("\n")
    blocks = []
    i = 0
    while i < len(lines) - 1:  # an opening fence is followed by a newline
        opened = _OPEN.fullmatch(lines[i])
        if opened is None:
            i += 1
            continue
        close = next((j for j in range(i + 1, len(lines)) if _CLOSE.fullmatch(lines[j])), None)
        if close is None:
            break
        blocks.append((opened.group(1), "".join(line + "\n" for line in lines[i + 1 : close])))
        i = close + 1
    return blocks


def code_blocks(text: str, *, scripts_only: bool = False) -> list[str]:
    """The fenced code blocks of ``text``, in order; with ``scripts_only`` only those fenced as
    ```` ```python ```` or bare ```` ``` ```` (a ```` ```text ```` or ```` ```bash ```` block is no script)."""
    return [content for info, content in _fenced(text) if not scripts_only or _language(info) in SCRIPT_LANGUAGES]


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
