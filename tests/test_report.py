"""Reports of a real session: terminal tables, live progress, summary.json, the CSVs in the
published table's columns, JUnit properties, rebuild and merge, and the HTML report opened in
headless Chromium."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from helpers import CHROMIUM, GOOD_SCRIPT, report_page, write_replay, write_tiny_task

from pytest_weirdml.report import export, published
from pytest_weirdml.report.build import write_reports
from pytest_weirdml.report.summary import SUMMARY_SCHEMA
from pytest_weirdml.session import SessionDir

PUBLISHED = Path(__file__).resolve().parents[2] / "shared" / "weirdml" / "leaderboard.csv"
# CI can keep the screenshots as artifacts by pointing this somewhere it collects.
SCREENSHOT_DIR = Path(
    os.environ.get("WEIRDML_SCREENSHOT_DIR", Path(tempfile.gettempdir()) / "pytest-weirdml-screenshots")
)
TASK = "shapes_easy"


def _pytest(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """A session as users start it, in its own directory (so this repository's config stays out)."""
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:benchmark", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.fixture(scope="module")
def leaderboard(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The published table when this checkout has it beside it, else a small one in its columns."""
    if PUBLISHED.is_file():
        return PUBLISHED
    path = tmp_path_factory.mktemp("published") / "leaderboard.csv"
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=published.LEADERBOARD_COLUMNS)
        writer.writeheader()
        for i, acc in enumerate((0.95, 0.8, 0.6, 0.4)):
            row = dict.fromkeys(published.LEADERBOARD_COLUMNS, "")
            row.update(
                internal_model_name=f"m{i}", display_name=f"model {i}", avg_acc=str(acc), shapes_easy_acc=str(acc)
            )
            row.update(cost_per_run_usd=str(0.1 * (i + 1)), mean_total_output_tokens=str(1000 * (i + 1)))
            writer.writerow(row)
    return path


@pytest.fixture(scope="module")
def session(
    tmp_path_factory: pytest.TempPathFactory, leaderboard: Path
) -> tuple[subprocess.CompletedProcess[str], Path]:
    """One real session with the offline models: reference, baseline, and a replay that fails twice."""
    root = tmp_path_factory.mktemp("session")
    # Named after a published task, so the published rows overlay like for like.
    write_tiny_task(root, TASK, iterations=3)
    write_replay(root / "answers.json", ["", "raise SystemExit(3)", GOOD_SCRIPT])
    result = _pytest(
        root,
        "--weirdml-model=reference,baseline,replay:answers.json",
        "--weirdml-runs=2",
        f"--weirdml-data-cache={root / 'cache'}",
        f"--weirdml-reports={root / 'reports'}",
        f"--weirdml-leaderboard={leaderboard}",
        f"--junitxml={root / 'junit.xml'}",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    (where,) = (root / "reports").iterdir()
    return result, where


def test_terminal_shows_progress_then_tables(session: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    result, where = session
    out = result.stdout
    assert (
        "weirdml shapes_easy · replay:answers.json · run 0 · iteration 2: acc 0.0000 (the script crashed (exit code 3))"
        in out
    )
    assert "weirdml shapes_easy · replay:answers.json · run 1 · iteration 3: acc 1.0000 · best 1.0000" in out
    tail = out[out.index("weirdml summary") :]
    lines = [line.split() for line in tail.splitlines()]
    assert ["shapes_easy", "baseline", "2", "0.450", "[0.450,", "0.450]"] in lines
    assert any(line[:5] == ["replay:answers.json", "1", "2", "1.000", "[1.000,"] and "66.7%" in line for line in lines)
    assert f"html: {where / 'report.html'}" in tail


def test_summary_json_is_versioned_and_complete(session: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    _, where = session
    summary = json.loads((where / "summary.json").read_text())
    assert summary["schema"] == SUMMARY_SCHEMA
    assert summary["sessions"] == [where.name] and summary["tasks"] == [TASK]
    replay = summary["models"]["replay:answers.json"]
    assert [p["mean"] for p in replay["progression"]] == [0.0, 0.0, 1.0]
    assert replay["failures"] == 4 and replay["iterations"] == 6
    assert set(replay["zero_reasons"]) == {
        "no code block in the response (put the script between ``` fences)",
        "the script crashed (exit code 3)",
    }
    assert len(summary["runs"]) == 6 and {r["session"] for r in summary["runs"]} == {where.name}
    assert summary["published_tasks"] == [TASK] and summary["errors"] == summary["incomplete"] == []
    lines = (where / "records.jsonl").read_text().splitlines()
    assert summary["created"] == max(json.loads(line).get("ended_at", "") for line in lines)
    # Offline models call no API: their cost is a known zero.
    assert summary["models"]["reference"]["cost_per_run_usd"] == 0.0
    # What the runs were made under.
    assert summary["protocol"] == "published" and summary["data_seeds"] == [0]
    (key,) = summary["data"][TASK]
    assert key.startswith("v1-seed0-")
    run = summary["runs"][0]
    assert (run["protocol"], run["data"], run["data_seed"], run["time_limit_s"]) == ("published", key, 0, 20.0)
    assert run["sandbox"] == "local" and run["hardware"].startswith("CPU only")


def test_sessions_of_different_protocols_are_never_merged(
    session: tuple[subprocess.CompletedProcess[str], Path], tmp_path: Path
) -> None:
    _, where = session
    other = tmp_path / "informed"
    other.mkdir()
    lines = (where / "records.jsonl").read_text().splitlines()
    changed = []
    for line in lines:
        record = {**json.loads(line), "session": "other"}
        if record["kind"] == "run_start":
            record["plan"] = {**record["plan"], "protocol": "informed"}
        changed.append(json.dumps(record))
    (other / "records.jsonl").write_text("\n".join(changed) + "\n")
    result = subprocess.run(
        [sys.executable, "-m", "pytest_weirdml.report", str(where), str(other), "-o", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert "different protocols (informed, published)" in result.stderr


def test_csv_has_the_published_header_and_appends_to_the_published_table(
    session: tuple[subprocess.CompletedProcess[str], Path], leaderboard: Path
) -> None:
    _, where = session
    ours = (where / "results.csv").read_text()
    table = leaderboard.read_text()
    assert ours.splitlines()[0] == table.splitlines()[0]
    combined = list(csv.DictReader(io.StringIO(table.rstrip("\n") + "\n" + "\n".join(ours.splitlines()[1:]) + "\n")))
    mine = {row["internal_model_name"]: row for row in combined if row["API source"].startswith(export.SOURCE)}
    assert set(mine) == {"reference", "baseline", "replay:answers.json"}
    assert float(mine["baseline"][f"{TASK}_acc"]) == pytest.approx(0.45)
    # One of the table's 17 tasks: an average over it would not mean what the table's averages mean.
    assert mine["baseline"]["avg_acc"] == mine["baseline"]["avg_acc_standard_error"] == ""
    assert float(mine["reference"]["code_len_p50"]) == 5.0
    assert len(combined) == len(table.splitlines()) - 1 + 3
    assert not (where / export.OWN_RESULTS_FILE).exists()  # every task of the session is a published one


def test_junit_properties_are_flat_values(session: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    _, where = session
    cases = ET.parse(where.parents[1] / "junit.xml").getroot().iter("testcase")
    props = [{p.get("name"): p.get("value") for p in case.iter("property")} for case in cases]
    assert len(props) == 6
    summary = json.loads((where / "summary.json").read_text())
    scores = sorted(str(run["score"]) for run in summary["runs"])
    assert sorted(prop["weirdml_score"] or "" for prop in props) == scores
    for prop in props:
        assert set(prop) == {"weirdml_task", "weirdml_model", "weirdml_run", "weirdml_score"}
        assert prop["weirdml_task"] == TASK


def test_rerender_and_merge_from_records_only(
    session: tuple[subprocess.CompletedProcess[str], Path], tmp_path: Path
) -> None:
    _, where = session
    copy = tmp_path / "copy-session"
    shutil.copytree(where, copy)
    out = tmp_path / "merged"
    done = subprocess.run(
        [sys.executable, "-m", "pytest_weirdml.report", str(where), str(copy), "-o", str(out), "--bootstrap", "2000"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    merged = json.loads((out / "summary.json").read_text())
    original = json.loads((where / "summary.json").read_text())
    # The copy's records carry the same session name: merging must not double-count them as new runs.
    assert len(merged["runs"]) == 6
    for model, row in original["models"].items():
        assert merged["models"][model]["overall"]["mean"] == pytest.approx(row["overall"]["mean"])
        assert merged["models"][model]["tasks"][TASK]["scores"] == row["tasks"][TASK]["scores"]
    assert (out / "report.html").is_file() and (out / "results.csv").is_file()
    # A second session (its records stamped with another name) adds its runs to each task.
    other = tmp_path / "other-session"
    other.mkdir()
    records = (where / "records.jsonl").read_text().replace(f'"session": "{where.name}"', '"session": "other"')
    (other / "records.jsonl").write_text(records)
    done = subprocess.run(
        [sys.executable, "-m", "pytest_weirdml.report", str(where), str(other), "-o", str(out), "--bootstrap", "2000"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    merged = json.loads((out / "summary.json").read_text())
    assert len(merged["runs"]) == 12 and merged["sessions"] == [where.name, "other"]
    assert merged["models"]["baseline"]["tasks"][TASK]["n"] == 4
    assert (out / "report.html").read_text().count("<details class='run'") == 12
    # Merged sessions keep their transcripts apart (their run numbers overlap).
    assert len(list((out / "transcripts").glob(f"*/{TASK}/*.md"))) == 12
    bad = subprocess.run(
        [sys.executable, "-m", "pytest_weirdml.report", str(tmp_path / "nope"), "-o", str(out)],
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 2 and "no records" in bad.stderr


def test_published_rows_read_and_spread_for_the_bars(leaderboard: Path) -> None:
    rows = published.read_leaderboard(leaderboard)
    assert rows and all(r.avg_acc is not None for r in rows)
    picked = published.pick_published(rows, [TASK], count=4)
    accs = [r.mean_over([TASK]) for r in picked]
    assert len(picked) == 4 and accs == sorted(accs, reverse=True)  # type: ignore[type-var]
    assert accs[0] == max(r.task_acc[TASK] for r in rows if TASK in r.task_acc)
    # A row is compared only on tasks it has, never by its own average over other tasks.
    assert rows[0].mean_over(["tiny"]) is None and published.comparable_rows(rows, ["tiny"]) == []


def test_live_progress_reaches_the_controller_under_xdist(tmp_path: Path) -> None:
    pytest.importorskip("xdist")
    write_tiny_task(tmp_path, iterations=3)
    write_replay(tmp_path / "answers.json", ["", "raise SystemExit(3)", GOOD_SCRIPT])
    result = _pytest(
        tmp_path,
        "-n",
        "2",
        "--weirdml-model=replay:answers.json",
        "--weirdml-runs=2",
        f"--weirdml-data-cache={tmp_path / 'cache'}",
        f"--weirdml-reports={tmp_path / 'reports'}",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    for run in (0, 1):
        for iteration in (1, 2, 3):
            assert f"weirdml tiny · replay:answers.json · run {run} · iteration {iteration}: " in result.stdout
    # Each progress line is a line of its own: never glued to pytest's dots, nor they to it.
    progress = [line for line in result.stdout.splitlines() if " · iteration " in line]
    assert len(progress) == 6 and all(line.startswith("weirdml tiny · ") for line in progress)
    pattern = (
        r"weirdml tiny · replay:answers.json · run \d · iteration \d: acc .* · best \d\.\d{4}"
        r"( · script [\d.]+ s)? · \$0\.0000 \[[0-2]/2\]"
    )
    assert all(re.fullmatch(pattern, line) for line in progress), progress


@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (apt-get install chromium)")
def test_html_report_renders_in_headless_chromium(
    session: tuple[subprocess.CompletedProcess[str], Path], tmp_path: Path
) -> None:
    _, where = session
    with report_page(where / "report.html", tmp_path / "profile") as (page, errors):
        widths = page.eval_on_selector_all("figure img", "imgs => imgs.map(i => i.complete ? i.naturalWidth : 0)")
        assert len(widths) == 5 and all(w > 0 for w in widths), widths
        assert page.locator("figure#fig-model-summary img").get_attribute("alt") == "Model summary"
        assert "155 published rows" in page.inner_text("body") or "published rows" in page.inner_text("body")
        run = page.locator("details.run").filter(has_text="replay:answers.json · run 0").first
        run.locator("summary").first.click()
        system = run.locator("details.system")
        system.locator("summary").first.click()
        assert "published protocol" in system.inner_text() and "several iterations" in system.inner_text()
        iteration = run.locator("details.iteration").nth(1)
        iteration.locator("summary").first.click()
        assert iteration.locator("pre.output").is_visible()
        assert "the script crashed (exit code 3)" in iteration.inner_text()
        assert iteration.locator("div.pyg, pre.code").first.is_visible()
        SCREENSHOT_DIR.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SCREENSHOT_DIR / "report.png"), full_page=True)
        iteration.scroll_into_view_if_needed()
        page.screenshot(path=str(SCREENSHOT_DIR / "report-transcript.png"))
    assert errors == []
    print(f"screenshots: {SCREENSHOT_DIR / 'report.png'}, {SCREENSHOT_DIR / 'report-transcript.png'}")


def test_quiet_keeps_one_line_per_model_and_verbose_adds_progression(
    pytester: pytest.Pytester, tiny: Path, base_args: list[str]
) -> None:
    quiet = pytester.runpytest("--weirdml-model=reference,baseline", "--weirdml-runs=1", "-q", *base_args)
    quiet.assert_outcomes(passed=2)
    quiet.stdout.fnmatch_lines(["*weirdml summary*", "baseline: 0.450 [[]0.450, 0.450] over 1 task(s), 1 run(s)*"])
    quiet.stdout.no_fnmatch_line("weirdml tiny · *")  # no live progress under -q
    quiet.stdout.fnmatch_lines(["weirdml status: 1/2 done · elapsed *", "weirdml status: 2/2 done · elapsed *"])
    quiet.stdout.no_fnmatch_line("task*model*runs*")
    verbose = pytester.runpytest("--weirdml-model=reference", "--weirdml-runs=1", "-v", *base_args)
    verbose.stdout.fnmatch_lines(
        [
            "weirdml tiny · reference · run 0 · iteration 1: acc 1.0000 · best 1.0000*",
            "*weirdml summary*",
            "task*model*runs*mean*95% CI*",
            "reference best so far after iteration  1: 1.000 [[]1.000, 1.000]",
        ]
    )


def test_report_without_matplotlib_says_how_to_get_figures(
    session: tuple[subprocess.CompletedProcess[str], Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pytest_weirdml.report import figures

    _, where = session
    monkeypatch.setattr(figures, "available", lambda: False)
    built = write_reports(SessionDir(where).runs(), tmp_path)
    page = built.paths["html"].read_text()
    assert "pip install &#x27;pytest-weirdml[report]&#x27;" in page and "<img" not in page
    assert page.count("<details class='run'") == 6


def test_files_are_written_without_the_terminal_plugin(
    pytester: pytest.Pytester, tiny: Path, base_args: list[str]
) -> None:
    result = pytester.runpytest("--weirdml-model=reference", "--weirdml-runs=1", "-p", "no:terminal", *base_args)
    assert result.ret == 0
    (where,) = (pytester.path / "reports").iterdir()
    assert {"summary.json", "results.csv", "report.html"} <= {p.name for p in where.iterdir()}


def test_transcripts_hold_no_terminal_escapes(tmp_path: Path) -> None:
    from pytest_weirdml.records import IterationRecord, RunRecord
    from pytest_weirdml.report.transcript import write_transcript

    it = IterationRecord(
        task="t", model="m", run=0, iteration=1, prompt="p", response="\x1b]0;owned\x07\x1b[2J\x1b[31mred\x1b[0m",
        code=None, output="\x1b[1Abell\x07 nul\x00 c1\x9b", output_bytes=0, exit_code=None, timed_out=False,
        duration_s=0.0, score=0.0, zero_reason="no code",
    )  # fmt: skip
    text = write_transcript(tmp_path, RunRecord("t", "m", 0, [it])).read_text()
    assert "red" in text and "bell nul c1" in text
    assert not [c for c in text if (ord(c) < 32 and c not in "\n\t") or 0x7F <= ord(c) <= 0x9F]
