"""Helpers shared by the plugin's tests: a tiny task, replay files, record readers."""

from __future__ import annotations

import contextlib
import json
import shutil
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_weirdml.sandbox.local import bwrap_works

TINY_TOML = """\
name = "{name}"
description = "Parity of the first column: a task that trains in no time"
markers = ["toy", "tabular"]
time_limit_s = {time_limit}
iterations = {iterations}
seed = 0
public_files = ["train_x.npy", "train_y.npy", "test_x.npy"]
"""

TINY_DATA = """\
import numpy as np


def build(out, seed):
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 10, size=(300, 3))
    y = x[:, 0] % 2
    np.save(out / "train_x.npy", x[:200])
    np.save(out / "train_y.npy", y[:200])
    np.save(out / "test_x.npy", x[200:])
    return y[200:]
"""

TINY_PROMPT = """\
Predict the label of each test row. Files: data/train_x.npy (200, 3) int, data/train_y.npy (200,),
data/test_x.npy (100, 3). Write results/test_preds.txt.

```python
import numpy as np

x = np.load("data/test_x.npy")
np.savetxt("results/test_preds.txt", np.zeros(len(x), dtype=int), fmt="%d")
```
"""

# A conftest whose model client prints the system prompt it is sent (run pytest with -s).
SYSTEM_PROMPT_SPY = """
import pytest

@pytest.fixture
def weirdml_model(weirdml_case):
    from pytest_weirdml.models import resolve
    model = resolve(weirdml_case.model)
    real = model.generate
    def spy(request):
        print("SYSTEM<<" + request.messages[0].content + ">>")
        return real(request)
    model.generate = spy
    return model
"""

GOOD_SCRIPT = """\
import numpy as np

x = np.load("data/test_x.npy")
np.savetxt("results/test_preds.txt", x[:, 0] % 2, fmt="%d")
print("wrote", len(x), "predictions")
"""


def write_tiny_task(root: Path, name: str = "tiny", *, time_limit: float = 20, iterations: int = 2) -> Path:
    """A complete task directory whose reference scores 1.0 and whose baseline scores ~0.5."""
    task = root / "tasks" / name
    task.mkdir(parents=True)
    (task / "task.toml").write_text(TINY_TOML.format(name=name, time_limit=time_limit, iterations=iterations))
    (task / "data.py").write_text(TINY_DATA)
    (task / "prompt.md").write_text(TINY_PROMPT)
    (task / "reference.py").write_text(GOOD_SCRIPT)
    return task


def fenced(code: str) -> str:
    return f"Here is my script.\n\n```python\n{textwrap.dedent(code).strip()}\n```\n"


def write_replay(path: Path, scripts: list[str]) -> Path:
    path.write_text(json.dumps([fenced(s) if s.strip() else "no code here" for s in scripts]))
    return path


def read_jsonl(path: Path) -> list[dict]:  # type: ignore[type-arg]
    return [json.loads(line) for line in path.read_text().splitlines()]


def read_iterations(path: Path) -> list[dict]:  # type: ignore[type-arg]
    """The iteration lines of a records file (it also holds a ``run_start`` and a ``run_end`` line per run)."""
    return [record for record in read_jsonl(path) if record["kind"] == "iteration"]


def read_plans(path: Path) -> list[dict]:  # type: ignore[type-arg]
    """The plan of every run start in a records file, with the run's task, model and run."""
    return [
        {"task": r["task"], "model": r["model"], "run": r["run"], **r["plan"]}
        for r in read_jsonl(path)
        if r["kind"] == "run_start"
    ]


def session_dir(pytester: pytest.Pytester) -> Path:
    dirs = sorted((pytester.path / "reports").iterdir())
    assert len(dirs) == 1, dirs
    return dirs[0]


needs_bwrap = pytest.mark.skipif(not bwrap_works()[0], reason=f"needs bubblewrap: {bwrap_works()[1]}")


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@contextlib.contextmanager
def report_page(report: Path, profile: Path) -> Iterator[tuple[Any, list[str]]]:
    """``report`` open in headless Chromium (Debian's, through Playwright): the page, and the list
    that collects the page's errors, console errors and failed requests as they happen."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="needs playwright (pip install playwright)")
    errors: list[str] = []
    with sync_api.sync_playwright() as pw:
        # Playwright takes the profile directory as user_data_dir (it refuses --user-data-dir in args).
        browser = pw.chromium.launch_persistent_context(
            str(profile),
            executable_path=CHROMIUM,
            headless=True,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"],
            viewport={"width": 1400, "height": 1000},
        )
        try:
            page = browser.new_page()
            page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.on("requestfailed", lambda req: errors.append(f"request failed: {req.url}"))
            page.goto(report.as_uri())
            page.wait_for_load_state("load")
            yield page, errors
        finally:
            browser.close()
