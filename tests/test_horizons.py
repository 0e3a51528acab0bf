"""Time horizons: the fit against scipy on single resamples, the published horizons reproduced by
``weirdml horizons --published``, ``[time_estimates]`` in task.toml, and a real session of the
offline models whose terminal summary, summary.json and report.html (in headless Chromium) show
the horizon."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
from helpers import CHROMIUM, report_page, write_tiny_task
from scipy.optimize import minimize

from pytest_weirdml.cli import main
from pytest_weirdml.errors import TaskError
from pytest_weirdml.horizons import estimates, fit, published
from pytest_weirdml.tasks import load_task

ROOT = Path(__file__).resolve().parents[1]
PUBLIC_TASKS = ("shapes_easy", "shapes_hard", "digits_unsup", "chess_winners")
SCREENSHOT_DIR = Path(
    os.environ.get("WEIRDML_SCREENSHOT_DIR", Path(tempfile.gettempdir()) / "pytest-weirdml-screenshots")
)
ESTIMATES = """
[time_estimates]
source = "estimated"
who = "the test"
how = "chosen so that the reference passes every threshold and the baseline only the lowest"

[time_estimates.hours]
one = { "25%" = 0.1, "50%" = 0.5, "70%" = 2, "90%" = 8, "95%" = 20 }
two = { "25%" = 0.2, "50%" = 1, "70%" = 4, "90%" = 16, "95%" = 40 }
"""


def _cli(*args: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(list(args))
    return code, out.getvalue()


def test_block_fits_equal_one_scipy_fit_per_resample() -> None:
    model = next(m for m in published.published_models() if m.name == "gpt-4")
    points = fit.make_points(model.scores, published.estimate_pairs())
    weights = fit.resample_counts(len(points.tasks), 12, seed=3)[:, points.task].astype(np.float64)
    x50, beta, converged = fit.fit_weighted(points, weights)
    assert converged.all()
    for row in range(len(weights)):
        s, f = weights[row : row + 1] * points.successes, weights[row : row + 1] * points.failures
        alone = minimize(
            fit._objective,
            np.array([0.0, 0.0]),
            args=(points.x, s, f),
            jac=True,
            method="L-BFGS-B",
            bounds=[fit.X50_BOUNDS, fit.LOG_SLOPE_BOUNDS],
            options={"ftol": 1e-15, "gtol": 1e-10},
        )
        assert x50[row] == pytest.approx(alone.x[0], abs=1e-4)
        assert beta[row] == pytest.approx(-np.exp(alone.x[1]), rel=1e-3)


def test_fit_recovers_a_known_curve() -> None:
    # Many runs per task, success drawn from sigmoid(-2 (x - 1)): the fit finds x50 = 1 (10 h).
    rng = np.random.default_rng(0)
    hours = 10 ** rng.uniform(-1, 3, 40)
    # Each task has one threshold, 0.5; a run reaches it with the curve's probability at its hours.
    p = 1 / (1 + np.exp(2.0 * (np.log10(hours) - 1.0)))
    scores = {f"t{i}": list(np.where(rng.uniform(0, 1, 200) < p[i], 0.9, 0.1)) for i in range(40)}
    estimates = {f"t{i}": [(0.5, float(h))] for i, h in enumerate(hours)}
    horizon = fit.fit_horizon(fit.make_points(scores, estimates), resamples=200)
    assert horizon.x50 == pytest.approx(1.0, abs=0.1) and horizon.beta == pytest.approx(-2.0, rel=0.15)
    assert 5 < horizon.low_hours < 10**horizon.x50 < horizon.high_hours < 20 and horizon.converged == 200


def test_published_horizons_are_reproduced(tmp_path: Path) -> None:
    code, out = _cli("horizons", "--published", "--json", "-o", str(tmp_path))
    assert code == 0
    ours = json.loads(out)
    expected = json.loads((published.DATA_DIR / "published_horizons.json").read_text())
    assert len(expected) == 10 and set(ours) == {e["display_name"] for e in expected.values()}
    for entry in expected.values():
        got = ours[entry["display_name"]]
        assert got["x50_hours"] == pytest.approx(entry["x50_hours_q50"], rel=0.05), entry["display_name"]
        assert got["q025"] == pytest.approx(entry["x50_hours_q025"], rel=0.10), entry["display_name"]
        assert got["q975"] == pytest.approx(entry["x50_hours_q975"], rel=0.10), entry["display_name"]
        assert (got["n_data"], got["n_success"]) == (entry["n_data"], entry["n_success"])
    assert (tmp_path / "horizon_fit.png").stat().st_size > 0 and (tmp_path / "horizon_timeline.png").is_file()


@pytest.mark.parametrize("task", PUBLIC_TASKS)
def test_public_tasks_carry_the_published_estimates_of_the_same_task(task: str) -> None:
    estimates = load_task(ROOT / "tasks" / task).time_estimates
    assert estimates is not None and (estimates.source, estimates.task) == ("published", task)
    assert estimates.as_dict()["hours"] == published.estimator_hours(task)


def test_only_the_four_public_tasks_claim_published_estimates() -> None:
    claimed = {
        d.name
        for d in (ROOT / "tasks").iterdir()
        if (d / "task.toml").is_file() and (e := load_task(d).time_estimates) and e.source == "published"
    }
    assert claimed == set(PUBLIC_TASKS)


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ('source = "guessed"\nhours = { a = { "25%" = 1 } }', "[time_estimates] source must be one of"),
        ('source = "estimated"\nwho = "me"\nhours = { a = { "25%" = 1 } }', "[time_estimates] how is required"),
        ('source = "published"\nhours = { a = { "25%" = 1 } }', "[time_estimates] task is required"),
        ('source = "human"\nwho = "me"\nhours = { a = { "25" = 1 } }', "hours.a.'25' is not an accuracy"),
        ('source = "human"\nwho = "me"\nhours = { a = { "25%" = -1 } }', "must be a positive number of hours"),
        ('source = "human"\nwho = "me"\nhours = { a = { "125%" = 3 } }', "is not an accuracy"),
        ('source = "human"\nwho = "me"\nhours = {}', "[time_estimates] hours must be a table"),
        ('source = "human"\nwho = "me"\nminutes = 3\nhours = { a = { "25%" = 1 } }', "['minutes'] unknown"),
    ],
)
def test_bad_time_estimates_name_the_file_and_the_key(tmp_path: Path, table: str, message: str) -> None:
    task = write_tiny_task(tmp_path)
    toml = task / "task.toml"
    toml.write_text(toml.read_text() + "\n[time_estimates]\n" + table + "\n")
    with pytest.raises(TaskError) as err:
        load_task(task)
    assert str(toml) in str(err.value) and message in str(err.value)


def test_too_many_thresholds_in_task_toml_are_refused(tmp_path: Path) -> None:
    task = write_tiny_task(tmp_path)
    toml = task / "task.toml"
    many = ", ".join(f'"{(i + 1) / 100:g}%" = {i + 1}' for i in range(estimates.MAX_THRESHOLDS + 1))
    table = f'\n[time_estimates]\nsource = "human"\nwho = "me"\nhours = {{ a = {{ {many} }} }}\n'
    toml.write_text(toml.read_text() + table)
    with pytest.raises(TaskError, match=f"hours.a holds {estimates.MAX_THRESHOLDS + 1} thresholds"):
        load_task(task)


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path]:
    """A real session of the offline models on two tasks, one of them with estimates."""
    root = tmp_path_factory.mktemp("horizon-session")
    timed = write_tiny_task(root, "timed")
    (timed / "task.toml").write_text((timed / "task.toml").read_text() + ESTIMATES)
    write_tiny_task(root, "untimed")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "--weirdml-model=reference,baseline",
            "--weirdml-runs=2",
            f"--weirdml-data-cache={root / 'cache'}",
            f"--weirdml-reports={root / 'reports'}",
        ],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    (where,) = (root / "reports").iterdir()
    return result, where


def test_session_prints_and_stores_the_horizon(session: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    result, where = session
    out = result.stdout[result.stdout.index("weirdml summary") :]
    assert "time horizon" in out and "tasks used: timed (estimated by the test:" in out
    assert "left out (no [time_estimates]): untimed" in out
    summary = json.loads((where / "summary.json").read_text())
    assert summary["horizons"]["tasks_used"] == ["timed"]
    assert summary["horizons"]["tasks_without_estimates"] == ["untimed"]
    reference, baseline = summary["models"]["reference"]["horizon"], summary["models"]["baseline"]["horizon"]
    # 2 runs x 2 estimators x 5 thresholds; the reference (1.0) reaches every one, the baseline
    # (about 0.5) only 25% (and 50% when it scores 0.5 or more).
    assert reference["n_data"] == baseline["n_data"] == 20 and reference["n_success"] == 20
    assert 4 <= baseline["n_success"] <= 8
    assert reference["x50_hours"] > baseline["x50_hours"]
    # Every point of the reference succeeded: its horizon is past the longest estimate, and said so.
    assert (reference["beyond"], baseline["beyond"]) == ("above", None)
    assert [row for row in out.splitlines() if row.startswith("reference ")][-1].split()[1:3] == [">", "40.0"]
    line = [row for row in out.splitlines() if row.startswith("baseline ")][-1]
    assert line.split()[-2:] == ["20", str(baseline["n_success"])]
    # The same from the records alone.
    code, text = _cli("horizons", str(where), "--json", "-o", str(where / "horizons"))
    assert code == 0 and json.loads(text)["baseline"]["x50_hours"] == pytest.approx(baseline["x50_hours"])
    print(out)


def test_records_whose_estimates_hold_10000_thresholds_are_refused_by_the_report(
    session: tuple[subprocess.CompletedProcess[str], Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, where = session
    lines = []
    for line in (where / "records.jsonl").read_text().splitlines():
        record = json.loads(line)
        if record["kind"] == "run_start" and record["plan"].get("time_estimates"):
            hours = {f"{(i + 1) / 10_001 * 100:.6f}%": 1.0 + i for i in range(10_000)}
            record["plan"]["time_estimates"]["hours"]["one"] = hours
        lines.append(json.dumps(record))
    copy = tmp_path / where.name
    copy.mkdir()
    (copy / "records.jsonl").write_text("\n".join(lines) + "\n")
    code, _ = _cli("report", str(copy), "-o", str(tmp_path / "out"))
    error = capsys.readouterr().err
    assert code == 2, error
    assert "records.jsonl" in error and "time_estimates.hours" in error
    assert f"10000 thresholds; an estimator has at most {estimates.MAX_THRESHOLDS}" in error
    assert not (tmp_path / "out" / "summary.json").exists()


@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (apt-get install chromium)")
def test_report_shows_the_horizon_figures_in_chromium(
    session: tuple[subprocess.CompletedProcess[str], Path], tmp_path: Path
) -> None:
    _, where = session
    with report_page(where / "report.html", tmp_path / "profile") as (page, errors):
        for fid in ("horizon-fit", "horizon-timeline"):
            width = page.eval_on_selector(f"figure#fig-{fid} img", "i => i.complete ? i.naturalWidth : 0")
            assert width > 0, fid
        table = page.inner_text("table#horizons")
        assert "reference" in table and "baseline" in table
        assert "left out (no [time_estimates]): untimed" in page.inner_text("body")
        SCREENSHOT_DIR.mkdir(parents=True, exist_ok=True)
        page.locator("h2#horizon").scroll_into_view_if_needed()
        page.screenshot(path=str(SCREENSHOT_DIR / "report-horizon.png"), full_page=True)
    assert errors == []
