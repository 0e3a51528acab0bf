"""Time code extraction on adversarial answers: the line scanner against the fence regex it replaced.

An answer of ``N`` opening fences that never close is the worst case of the old regex (it rescans
the rest of the answer from every fence: quadratic in ``N``); the scanner looks at each line once.
Run: ``python benchmarks/extract_speed.py`` (``--tiny`` for a quick check).
"""

from __future__ import annotations

import re
import sys
import time

from pytest_weirdml.extract import code_blocks

OLD_FENCE = re.compile(r"^[ \t]*```([^\n`]*)\n(.*?)^[ \t]*```[ \t]*$", re.DOTALL | re.MULTILINE)


def timed(function: object, text: str) -> float:
    start = time.perf_counter()
    function(text)  # type: ignore[operator]
    return time.perf_counter() - start


def main(tiny: bool) -> None:
    scanner_sizes = [1_000, 20_000] if tiny else [20_000, 200_000]  # fences; 5 bytes each
    regex_sizes = [500, 1_000] if tiny else [2_000, 4_000]
    for n in scanner_sizes:
        bomb = "```x\n" * n
        print(f"scanner: {n} unclosed fences ({len(bomb) / 1e6:.2f} MB): {timed(code_blocks, bomb):.3f} s")
    for n in regex_sizes:
        bomb = "```x\n" * n
        seconds = timed(lambda t: list(OLD_FENCE.finditer(t)), bomb)
        print(f"old regex: {n} unclosed fences ({len(bomb) / 1e6:.3f} MB): {seconds:.3f} s")


if __name__ == "__main__":
    main("--tiny" in sys.argv)
