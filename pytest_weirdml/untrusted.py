"""Text from outside the harness (a model's answer, a script's output, a records or baseline file
someone sent) made safe to store, print and use as a name.

- ``valid_unicode``: a provider may send a lone surrogate (``"\\ud800"`` is valid JSON); it cannot
  be written as UTF-8, so it becomes U+FFFD wherever the text is kept.
- ``lone_surrogate``: where a script holds one (the script is refused with that reason).
- ``printable``: terminal escape sequences and other control characters removed (for the
  terminal and the Markdown transcripts; newlines and tabs stay).
- ``SAFE_NAME`` / ``check_name``: the characters a task, model or session name may hold where it
  becomes part of a path or a line on the terminal.
"""

from __future__ import annotations

import re

# CSI (ESC [ ... final), OSC (ESC ] ... BEL or ESC \), and two-character escapes; then any other
# C0 control but newline and tab, DEL and the C1 controls. Each alternative is linear.
_ESCAPES = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-_]?|[\x00-\x08\x0b-\x1f\x7f-\x9f]"
)
_SURROGATE = re.compile(r"[\ud800-\udfff]")
# Names become file names and terminal text: letters, digits and a few separators, no leading dot.
SAFE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:@+=,/-]{0,199}")


def valid_unicode(text: str) -> str:
    """``text`` with every lone surrogate replaced by U+FFFD (so it encodes as UTF-8)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", text)
    return text


def lone_surrogate(text: str) -> str | None:
    """Why ``text`` is not valid Unicode (its first lone surrogate and line), or None."""
    found = _SURROGATE.search(text)
    if found is None:
        return None
    line = text.count("\n", 0, found.start()) + 1
    return f"a lone surrogate U+{ord(found.group()):04X} on line {line}, which is not valid Unicode text"


def printable(text: str) -> str:
    """``text`` without terminal escape sequences and control characters (newlines and tabs kept)."""
    return _ESCAPES.sub("", text)


def is_safe_name(name: object) -> bool:
    return isinstance(name, str) and SAFE_NAME.fullmatch(name) is not None and ".." not in name.split("/")
