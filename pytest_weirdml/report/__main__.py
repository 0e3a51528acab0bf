"""``python -m pytest_weirdml.report SESSION_DIR ... -o OUT``: the same as ``weirdml report``."""

from __future__ import annotations

import sys

from pytest_weirdml.cli import main

if __name__ == "__main__":
    sys.exit(main(["report", *sys.argv[1:]], prog="python -m pytest_weirdml.report"))
