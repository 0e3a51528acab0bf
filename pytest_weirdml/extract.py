"""Pure text functions of the protocol: code extraction and output truncation."""

from __future__ import annotations

import bisect

# A fence opens with ``` (optionally an info string: the language) on a line of its own and
# closes at the next line that is ``` alone; consecutive blocks stay separate. Each line is
# looked at once, with string methods, and the scan only moves forward, so extraction is linear
# in the answer's length whatever it holds (a regex over the whole text rescans the rest from
# every open fence: quadratic in the number of fences that never close).
FENCE = "```"
# The published rule: a script is fenced as ```python or with a bare ```.
SCRIPT_LANGUAGES = frozenset({"", "python"})

HEAD_CHARS = 4000
TAIL_CHARS = 4000


def _opening(line: str) -> str | None:
    """The info string of a line that opens a fence (``[ \t]*```info``, no backtick in it)."""
    rest = line.lstrip(" \t")
    if not rest.startswith(FENCE) or "`" in rest[3:]:
        return None
    return rest[3:]


def _fenced(text: str) -> list[tuple[str, str]]:
    """(info string, content) of every fenced block, in order; an open fence without a close
    holds no block (and neither does any fence after it: no later line closes it)."""
    lines = text.split("\n")
    marked = [i for i, line in enumerate(lines) if FENCE in line]
    closes = [i for i in marked if lines[i].strip(" \t") == FENCE]
    blocks = []
    after = 0  # the first line not yet inside a block
    for i in marked:
        # An opening fence is followed by a newline, so it is never the last line.
        if i < after or i == len(lines) - 1:
            continue
        info = _opening(lines[i])
        if info is None:
            continue
        found = bisect.bisect_right(closes, i)
        if found == len(closes):
            break
        close = closes[found]
        blocks.append((info, "".join(line + "\n" for line in lines[i + 1 : close])))
        after = close + 1
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
