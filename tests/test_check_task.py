"""`weirdml check-task` on toy tasks made to fail one check each: a label that is the row index's
parity, a reference under the 0.85 bar, point sets written in an order that tells the label,
blind runs at chance, a directory that is not a task. Every script runs in the real local sandbox."""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path

import pytest
from helpers import fenced, write_tiny_task

from pytest_weirdml.check.context import with_limit
from pytest_weirdml.cli import main

SOUND_DATA = """\
import numpy as np


def build(out, seed):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(300, 3)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int64)
    np.save(out / "train_x.npy", x[:200])
    np.save(out / "train_y.npy", y[:200])
    np.save(out / "test_x.npy", x[200:])
    return y[200:]
"""

SOUND_PROMPT = """\
Predict the label of each test row.

- `train_x.npy`: float32 array of shape (200, 3).
- `train_y.npy`: int64 array of shape (200,): 0 or 1.
- `test_x.npy`: float32 array of shape (100, 3).

```python
import numpy as np

x = np.load("data/test_x.npy")
np.savetxt("results/test_preds.txt", np.zeros(len(x), dtype=int), fmt="%d")
```
"""

SOUND_REFERENCE = """\
import numpy as np

x = np.load("data/test_x.npy")
np.savetxt("results/test_preds.txt", (x[:, 0] > 0).astype(int), fmt="%d")
"""

LEAKY_DATA = """\
import numpy as np


def build(out, seed):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(300, 3)).astype(np.float32)
    y = np.arange(300) % 2  # the label is the parity of the row: nothing in x tells it
    np.save(out / "train_x.npy", x[:200])
    np.save(out / "train_y.npy", y[:200])
    np.save(out / "test_x.npy", x[200:])
    return y[200:]
"""

WEAK_REFERENCE = """\
import numpy as np

x = np.load("data/test_x.npy")
np.savetxt("results/test_preds.txt", np.random.default_rng(1).integers(0, 2, len(x)), fmt="%d")
"""

# Point clouds of two kinds (a ring, a filled disc): as sets of points they are told apart by
# their radii; written in file order, the ring's points also run in order along it.
ORDERED_SETS_DATA = """\
import numpy as np


def build(out, seed, ordered=True):
    rng = np.random.default_rng(seed)
    n, m = 1500, 32
    y = rng.integers(0, 2, n)
    clouds = np.empty((n, m, 2), dtype=np.float32)
    for i in range(n):
        angle = rng.uniform(0, 2 * np.pi, m)
        radius = rng.uniform(0.2, 1.0, m)
        if y[i] == 1 and ordered:
            angle = np.sort(angle)
        clouds[i] = np.stack([radius * np.cos(angle), radius * np.sin(angle)], axis=1)
    np.save(out / "train_x.npy", clouds[:1000])
    np.save(out / "train_y.npy", y[:1000])
    np.save(out / "test_x.npy", clouds[1000:])
    return y[1000:]
"""

ORDERED_SETS_PROMPT = """\
Each sample is a set of 32 points in the plane. Files: `train_x.npy`: float32 array of shape (1000, 32, 2);
`train_y.npy`: int64 array of shape (1000,); `test_x.npy`: float32 array of shape (500, 32, 2).

```python
import numpy as np

x = np.load("data/test_x.npy")
np.savetxt("results/test_preds.txt", np.zeros(len(x), dtype=int), fmt="%d")
```
"""


def _check(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(["check-task", *args])
    return code, capsys.readouterr().out


def _task(tmp_path: Path, *, data: str | None = None, reference: str | None = None, prompt: str | None = None) -> Path:
    """A sound tiny task (its reference scores 1.0, its example script about 0.5), with one part
    replaced."""
    task = write_tiny_task(tmp_path, time_limit=20)
    (task / "data.py").write_text(data or SOUND_DATA)
    (task / "reference.py").write_text(reference or SOUND_REFERENCE)
    (task / "prompt.md").write_text(prompt or SOUND_PROMPT)
    return task


def _failed(out: str) -> set[str]:
    return {line.split()[1].rstrip(":") for line in out.splitlines() if line.startswith("  FAIL ")}


def test_a_sound_tiny_task_passes_the_quick_check(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = _check(capsys, str(_task(tmp_path)), "--quick", "--cache", str(tmp_path / "cache"))
    assert code == 0, out
    assert "PASS build.deterministic" in out and "PASS leaks.row_index" in out and "PASS bars.example" in out
    assert "1 task checked, 0 with failed checks" in out


def test_a_label_that_is_the_row_parity_fails_the_row_index_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    task = _task(tmp_path, data=LEAKY_DATA)
    code, out = _check(capsys, str(task), "--quick", "--cache", str(tmp_path / "cache"))
    assert code == 1
    # Every seed gives the same answers, and the training labels' bytes hold the test answers'
    # 0, 1, 0, 1, ...: both true of such a task, and said too.
    assert _failed(out) == {"leaks.row_index", "build.seeded", "leaks.label_copy"}, out
    assert "seeds 0 and 1 give the same train_y.npy, hidden answers" in out
    line = next(line for line in out.splitlines() if "FAIL leaks.row_index" in line)
    assert "row index alone scores 1.000 (chance 0.5" in line
    assert "fix: the row index of a sample tells its label" in out


def test_a_reference_under_the_bar_fails_with_its_scores_per_seed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    task = _task(tmp_path, reference=WEAK_REFERENCE)
    code, out = _check(capsys, str(task), "--only", "bars", "--cache", str(tmp_path / "cache"))
    assert code == 1
    assert _failed(out) == {"bars.reference"}, out
    line = next(line for line in out.splitlines() if "FAIL bars.reference" in line)
    assert "seed 0:" in line and "seed 1:" in line and "seed 2:" in line and "under 0.85 on seeds 0, 1, 2" in line
    assert "fix: strengthen reference.py" in out


def test_points_written_in_an_order_that_tells_the_label_fail_the_order_checks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    task = _task(tmp_path, data=ORDERED_SETS_DATA, prompt=ORDERED_SETS_PROMPT)
    with (task / "task.toml").open("a") as toml:
        toml.write('\n[check]\nsets = ["train_x.npy", "test_x.npy"]\n')
    code, out = _check(capsys, str(task), "--quick", "--cache", str(tmp_path / "cache"))
    assert code == 1
    assert _failed(out) == {"leaks.element_order"}, out
    assert "the order of the elements in the file carries the labels" in out
    # Written in random order, the same clouds pass.
    (task / "data.py").write_text(ORDERED_SETS_DATA.replace("ordered=True", "ordered=False"))
    code, out = _check(capsys, str(task), "--quick", "--cache", str(tmp_path / "cache2"))
    assert code == 0, out
    assert "PASS leaks.element_order" in out


def _blind_runs(pytester: pytest.Pytester, base_args: list[str], task: Path, scripts: list[str], runs: int) -> Path:
    """A real session of a replayed model on the task; its records are the blind runs."""
    replay = pytester.path / "answers.json"
    replay.write_text(json.dumps([fenced(s) for s in scripts]))
    result = pytester.runpytest_subprocess(
        str(task), *base_args, f"--weirdml-model=replay:{replay}", f"--weirdml-runs={runs}", "--weirdml-sandbox=local"
    )
    result.assert_outcomes(passed=runs)
    (records,) = (pytester.path / "reports").glob("*/records.jsonl")
    return records


def test_blind_runs_at_chance_fail_the_hard_tier_and_too_few_runs_fail_too(
    pytester: pytest.Pytester, base_args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    task = _task(pytester.path)
    with (task / "task.toml").open("a") as toml:
        toml.write('\n[calibration]\nfamily = "tiny"\ntier = "hard"\n')
    chance = textwrap.dedent("""\
        import numpy as np
        x = np.load("data/test_x.npy")
        np.savetxt("results/test_preds.txt", np.zeros(len(x), dtype=int), fmt="%d")
    """)
    records = _blind_runs(pytester, base_args, task, [chance, chance], runs=2)
    (task / "calibration").mkdir()
    shutil.copy(records, task / "calibration" / "records.jsonl")
    cache = str(pytester.path / "check-cache")
    # Without a measured reference, the calibration check says how to get one.
    code, out = _check(capsys, str(task), "--only", "calibration", "--cache", cache)
    assert code == 1 and _failed(out) == {"calibration.reference"}, out
    assert f"weirdml check-task {task} --save" in out
    code, out = _check(capsys, str(task), "--only", "bars", "--only", "calibration", "--cache", cache)
    assert code == 1
    assert _failed(out) == {"calibration.runs", "calibration.best_of_five", "calibration.generic"}, out
    assert "2 blind runs; a hard task needs at least 3" in out
    best = next(line for line in out.splitlines() if "calibration.best_of_five" in line)
    assert "median s " in best and "(at chance)" in best and "between 0.3 and 0.9" in best
    # A new data version makes the runs stale: named, not counted.
    toml = task / "task.toml"
    toml.write_text(toml.read_text().replace("seed = 0\n", "seed = 0\ndata_version = 2\n"))
    code, out = _check(capsys, str(task), "--only", "calibration", "--cache", cache)
    assert code == 1 and "calibration.stale" in _failed(out), out
    assert "blind runs of another data version than 2, not counted: calibration (v1-seed0-" in out
    assert "0 blind runs; a hard task needs at least 3" in out


def test_a_full_check_is_saved_and_read_back_by_a_later_calibration_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    task = _task(tmp_path)
    cache = str(tmp_path / "cache")
    _, out = _check(capsys, str(task), "--save", "--cache", cache)
    saved = json.loads((task / "calibration" / "check.json").read_text())
    assert saved["mode"] == "full" and saved["figures"]["reference"] == {"0": 1.0, "1": 1.0, "2": 1.0}
    assert {"0.25x", "4x"} <= set(saved["figures"]["reference_compute"])
    assert set(saved["figures"]["generic"]) == {"0.25x", "1x", "4x"}
    # No tier declared: the only failure of a sound task.
    assert _failed(out) == {"calibration.tier"}, out
    _, out = _check(capsys, str(task), "--only", "calibration", "--cache", cache, "--json")
    (report,) = json.loads(out)
    assert [f["check"] for f in report["findings"]] == ["calibration.tier"]
    # The table takes the reference and generic figures from the saved check.
    _, out = _check(capsys, str(task), "--only", "calibration", "--cache", cache, "--table")
    row = next(line for line in out.splitlines() if line.startswith("| tiny |"))
    assert "| -, - | 0.620 | 1.000 / 1.000 / 1.000 | 1.000 (1.00) |" in row and row.endswith("| - | calibration.tier |")


def test_usage_errors_name_the_fix(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check-task", str(tmp_path)]) == 2
    assert "no task.toml here or in its subdirectories" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["check-task", str(_task(tmp_path)), "--quick", "--save"])
    assert "--save keeps measured figures: drop --quick" in capsys.readouterr().err


def test_the_limit_is_announced_after_the_docstring_and_future_imports() -> None:
    code = '"""A reference."""\n\nfrom __future__ import annotations\n\nimport os\n\n'
    code += 'print(os.environ["WEIRDML_TIME_LIMIT_S"])\n'
    announced = with_limit(code, 30)
    compile(announced, "solution.py", "exec")  # a __future__ import after other code would not compile
    lines = announced.splitlines()
    assert lines.index("from __future__ import annotations") < lines.index(
        '_weirdml_os.environ["WEIRDML_TIME_LIMIT_S"] = "30"'
    )
    namespace: dict[str, object] = {}
    exec(compile(announced.replace("print(", "seen = ("), "solution.py", "exec"), namespace)
    assert namespace["seen"] == "30"
    # Code that does not parse (a model's broken script) gets the lines first and fails as it would.
    assert with_limit("def (", 30).startswith("import os as _weirdml_os\n")
