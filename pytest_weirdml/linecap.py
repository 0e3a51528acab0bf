"""Every record line fits the reader's line limit, whatever a model sent or a script printed.

A record's texts (the prompt, the answer, the code, the output, a harness error...) come from
outside, and JSON escaping can make them six times longer (a control character is written
``\\u0001``). ``record_line`` writes a record's fields as one JSON line of at most
``MAX_LINE_CHARS - 1`` characters (the newline makes the limit): a record that fits is written as
it is; otherwise the longest texts are cut, each to the same share of what the line can hold, so
that a short text is never cut for a long one. A cut text keeps its head and its tail around a
visible marker, and the record's ``cut`` field names every cut text by its path (``response``,
``usage.retries[0].error``, ``plan.system_prompt``) with its length before the cut, in characters.
"""

from __future__ import annotations

import json
from typing import Any

from pytest_weirdml.schema import MAX_LINE_CHARS

# Room kept for the markers and the ``cut`` field (at most a sixteenth of the line).
_MARGIN = 64 << 10
# A text no longer than this (escaped) is never cut: names, times, short messages.
_SMALL = 1024

Where = tuple[str | int, ...]


def record_line(fields: dict[str, Any], *, limit: int = MAX_LINE_CHARS - 1) -> str:
    """``fields`` as one JSON line (no newline) of at most ``limit`` characters; texts cut as
    needed and named in ``fields["cut"]``. ``ValueError`` only for a record whose short fields
    alone exceed the limit, which no record of the harness has."""
    line = _dumps(fields)
    if len(line) <= limit:
        return line
    texts = [(path, text, width) for path, text in _texts(fields) if (width := _width(text)) > _SMALL]
    fixed = len(line) - sum(width for _, _, width in texts)
    margin = min(_MARGIN, limit // 16)
    budget = limit - fixed - margin
    while budget > 0:
        share = _share([width for _, _, width in texts], budget)
        cut_fields = _cut_all(fields, texts, max(share, _SMALL))
        line = _dumps(cut_fields)
        if len(line) <= limit:
            return line
        budget -= margin
    raise ValueError(f"a record of {len(line)} characters cannot be cut under {limit}")


def cut_text(text: str, width: int) -> str:
    """``text`` cut to at most ``width`` characters once escaped as JSON: its head and its tail
    around a marker that says how much is missing."""
    marker = f"\n[... {{}} of {len(text)} characters cut here: more than a record line holds ...]\n"
    room = width - _width(marker.format(len(text))) - 2
    head = _prefix(text, room // 2)
    tail = _prefix(text[::-1], room - _width(text[:head]))
    kept_tail = text[len(text) - tail :] if tail else ""
    return text[:head] + marker.format(len(text) - head - tail) + kept_tail


def _share(widths: list[int], budget: int) -> int:
    """The largest share ``c`` with ``sum(min(w, c)) <= budget`` (water-filling)."""
    low, high = 0, max(widths, default=0)
    while low < high:
        mid = (low + high + 1) // 2
        if sum(min(w, mid) for w in widths) <= budget:
            low = mid
        else:
            high = mid - 1
    return low


def _cut_all(fields: dict[str, Any], texts: list[tuple[Where, str, int]], share: int) -> dict[str, Any]:
    cut_fields = json.loads(json.dumps(fields))  # a deep copy of plain JSON data
    cut: dict[str, int] = dict(cut_fields.get("cut") or {})
    for path, text, width in texts:
        if width > share:
            _put(cut_fields, path, cut_text(text, share))
            cut[_name(path)] = len(text)
    cut_fields["cut"] = cut
    return cut_fields


def _texts(value: Any, path: Where = ()) -> list[tuple[Where, str]]:
    """Every string value in plain JSON data, with its path (keys are not values)."""
    if isinstance(value, str):
        return [(path, value)]
    if isinstance(value, dict):
        return [found for key, item in value.items() for found in _texts(item, (*path, key))]
    if isinstance(value, list | tuple):
        return [found for i, item in enumerate(value) for found in _texts(item, (*path, i))]
    return []


def _put(data: Any, path: Where, text: str) -> None:
    for step in path[:-1]:
        data = data[step]
    data[path[-1]] = text


def _name(path: Where) -> str:
    name = ""
    for step in path:
        name += f"[{step}]" if isinstance(step, int) else f".{step}" if name else str(step)
    return name


def _prefix(text: str, width: int) -> int:
    """The length of the longest prefix of ``text`` whose escaped width is at most ``width``."""
    if width <= 0:
        return 0
    # An escaped character is 1 to 6 characters wide.
    low, high = min(len(text), width // 6), min(len(text), width)
    while low < high:
        mid = (low + high + 1) // 2
        if _width(text[:mid]) <= width:
            low = mid
        else:
            high = mid - 1
    return low


def _width(text: str) -> int:
    """How many characters ``text`` takes in a record line (JSON-escaped, non-ASCII kept)."""
    return len(json.dumps(text, ensure_ascii=False)) - 2


def _dumps(fields: dict[str, Any]) -> str:
    return json.dumps(fields, ensure_ascii=False)
