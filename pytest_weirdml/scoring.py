"""Scoring an iteration: the predictions file a script wrote, read against the hidden answers.

Accuracy is over the flattened arrays, as the published benchmark computes it; a missing, empty,
malformed or wrongly shaped file scores 0 with a reason the model reads (in our words, with a
short, clean excerpt of what the script wrote).
"""

from __future__ import annotations

import io
from dataclasses import dataclass

import numpy as np

PREDICTIONS_FILE = "results/test_preds.txt"


@dataclass(frozen=True)
class Score:
    """An iteration's accuracy, and why it is zero when the predictions are unusable."""

    accuracy: float
    zero_reason: str | None = None


def score_predictions(content: bytes | None, answers: np.ndarray, *, cap: int | None = None) -> Score:
    """Accuracy over the flattened arrays; a missing or malformed file scores 0 with a reason."""
    if content is None:
        return Score(0.0, f"no predictions: {PREDICTIONS_FILE} was not written")
    if cap is not None and len(content) > cap:
        return Score(0.0, f"malformed predictions: {PREDICTIONS_FILE} is larger than {cap} bytes")
    if not content.strip():
        return Score(0.0, f"no predictions: {PREDICTIONS_FILE} is empty")
    try:
        preds = np.loadtxt(io.BytesIO(content), dtype=np.float64, ndmin=1)
    except (ValueError, OSError):
        # numpy's message quotes the file; the model reads our own, with a short, clean excerpt.
        return Score(0.0, f"malformed predictions in {PREDICTIONS_FILE}: {_first_problem(content)}")
    # Scores are computed on flattened arrays, so any layout with the right count is accepted.
    if preds.size != answers.size:
        return Score(0.0, f"wrong shape: predictions {preds.shape}, expected {answers.shape}")
    flat = preds.reshape(-1)
    if not np.all(np.isfinite(flat)) or not np.all(flat == np.round(flat)):
        return Score(0.0, f"malformed predictions in {PREDICTIONS_FILE}: values must be integers")
    accuracy = float(np.mean(flat.astype(np.int64) == answers.reshape(-1)))
    return Score(accuracy, None)


EXCERPT_CHARS = 12


def excerpt(raw: bytes) -> str:
    """A short, printable rendering of bytes a script wrote (for a reason the model reads)."""
    text = raw[: EXCERPT_CHARS * 4].decode("utf-8", errors="replace")
    clean = "".join(c if c.isprintable() and c.isascii() else "?" for c in text)
    return repr(clean[:EXCERPT_CHARS] + ("..." if len(clean) > EXCERPT_CHARS else ""))


def _first_problem(content: bytes) -> str:
    """Where a predictions file stops being a table of numbers (the line, a short excerpt)."""
    width = None
    for number, line in enumerate(content.splitlines(), start=1):
        values = line.split(b"#", 1)[0].split()
        if not values:
            continue
        for value in values:
            try:
                float(value)
            except ValueError:
                return f"line {number} holds {excerpt(value)}, not a number"
        if width is not None and len(values) != width:
            return f"line {number} has {len(values)} values where the lines before it have {width}"
        width = len(values)
    return "it is not a table of numbers (one or more per line)"
