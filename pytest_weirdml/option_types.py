"""The checks behind every option (``options``): each parses one value, or raises
``argparse.ArgumentTypeError`` naming its flag and the values it allows. No pytest here."""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Callable
from pathlib import Path

from pytest_weirdml.sandbox import leases, size_text

MAX_TIME_LIMIT_S = 24 * 3600.0
RANDOM_SEED = "random"


def whole(flag_name: str, *, low: int = 1) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{flag_name} must be a whole number, got {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"{flag_name} must be at least {low}, got {value}")
        return value

    return parse


def seconds(flag_name: str) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{flag_name} must be seconds, got {text!r}") from None
        # nan and inf parse as floats, and neither is a limit: nan never fires, inf overflows timers.
        if not 1.0 <= value <= MAX_TIME_LIMIT_S:
            raise argparse.ArgumentTypeError(
                f"{flag_name} must be seconds between 1 and {MAX_TIME_LIMIT_S:.0f}, got {text!r}"
            )
        return value

    return parse


def answer_timeout(flag_name: str) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = -1.0
        # nan never fires and inf is no timeout: a finite wait is what catches a dead answerer.
        if not 0.0 < value <= 30 * 86400:
            raise argparse.ArgumentTypeError(f"{flag_name} must be seconds, above 0 and at most 30 days, got {text!r}")
        return value

    return parse


def gpus(text: str) -> tuple[str, ...]:
    try:
        return leases.parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def data_seed(flag_name: str) -> Callable[[str], int | str]:
    """``N`` (a whole number from 0 to 2**32 - 1) or ``random``."""

    def parse(text: str) -> int | str:
        text = text.strip().lower()
        if text == RANDOM_SEED:
            return RANDOM_SEED
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{flag_name} must be a whole number or 'random', got {text!r}") from None
        if not 0 <= value < 2**32:
            raise argparse.ArgumentTypeError(f"{flag_name} must be between 0 and {2**32 - 1}, got {value}")
        return value

    return parse


def margin(flag_name: str) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not 0.0 <= value < 1.0:
            raise argparse.ArgumentTypeError(f"{flag_name} must be an accuracy difference in [0, 1), got {text!r}")
        return value

    return parse


def fraction(flag_name: str) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = -1.0
        if not 0.0 <= value <= 1.0:
            raise argparse.ArgumentTypeError(f"{flag_name} must be an accuracy in [0, 1], got {text!r}")
        return value

    return parse


def usd(flag_name: str) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            value = float(text.strip().lstrip("$"))
        except ValueError:
            value = math.nan
        if not (math.isfinite(value) and value > 0):
            raise argparse.ArgumentTypeError(
                f"{flag_name} must be US dollars above 0, such as 25 or 2.50, got {text!r}"
            )
        return value

    return parse


_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?\s*$", re.IGNORECASE)


def parse_bytes(text: str) -> int | None:
    """``8G``, ``512M``, ``1024`` (bytes) -> bytes; None when it is not a size."""
    match = _SIZE.match(text)
    if not match:
        return None
    number, unit = match.groups()
    return int(float(number) * 1024 ** " kmgt".index(unit.lower() or " "))


def size(flag_name: str, low: int, high: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        value = parse_bytes(text)
        if value is None:
            raise argparse.ArgumentTypeError(f"{flag_name} must be a size such as 8G or 512M, got {text!r}")
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(
                f"{flag_name} must be between {size_text(low)} and {size_text(high)}, got {text!r}"
            )
        return value

    return parse


def existing_file(flag_name: str, what: str) -> Callable[[str], Path]:
    def parse(text: str) -> Path:
        path = Path(text).expanduser().resolve()
        if not path.is_file():
            raise argparse.ArgumentTypeError(f"{flag_name}: {path} not found; pass {what}")
        return path

    return parse
