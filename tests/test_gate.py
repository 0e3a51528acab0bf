"""The regression gate as users run it: save a baseline, compare a later session with it."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from helpers import GOOD_SCRIPT, fenced, needs_bwrap, write_replay

from pytest_weirdml.cli import main as weirdml

# Right on every row but the first 40 of 100: 0.6 (the tiny task's rows alternate ~evenly).
HALF_SCRIPT = """\
import numpy as np

x = np.load("data/test_x.npy")
preds = x[:, 0] % 2
preds[:40] = 1 - preds[:40]
np.savetxt("results/test_preds.txt", preds, fmt="%d")
"""
CHANCE_SCRIPT = """\
import numpy as np

x = np.load("data/test_x.npy")
np.savetxt("results/test_preds.txt", np.zeros(len(x), dtype=int), fmt="%d")
"""


def write_replay_records(path: Path, task: str, scripts: dict[int, str]) -> Path:
    """A records file that answers each run with its own script (one iteration per run)."""
    lines = []
    for run, script in scripts.items():
        record = {
            "kind": "iteration",
            "task": task,
            "model": "recorded",
            "run": run,
            "iteration": 1,
            "prompt": "",
            "response": fenced(script),
            "code": script,
            "output": "",
            "output_bytes": 0,
            "exit_code": 0,
            "timed_out": False,
            "duration_s": 0.0,
            "score": 0.0,
            "zero_reason": None,
        }
        lines.append(json.dumps(record))
    path.write_text("\n".join(lines) + "\n")
    return path


def run(pytester: pytest.Pytester, base_args: list[str], *args: str, reports: str) -> pytest.RunResult:
    return pytester.runpytest(*args, *base_args, f"--weirdml-reports={pytester.path / reports}")


def only_session(pytester: pytest.Pytester, reports: str) -> Path:
    (where,) = (pytester.path / reports).iterdir()
    return where


def test_a_drop_to_chance_is_a_regression_and_the_same_script_is_not(
    pytester: pytest.Pytester, tiny: Path, base_args: list[str]
) -> None:
    replay = write_replay(pytester.path / "agent.json", [GOOD_SCRIPT])
    model = f"--weirdml-model=replay:{replay}"
    saved = pytester.path / "baseline.json"
    first = run(pytester, base_args, model, "--weirdml-runs=2", f"--weirdml-save-baseline={saved}", reports="r1")
    assert first.ret == 0
    raw = json.loads(saved.read_text())
    assert raw["format"] == "pytest-weirdml-baseline" and raw["version"] == 1
    cell = raw["models"]["replay:agent.json"]["tiny"]
    assert cell["scores"] == [1.0, 1.0]
    assert cell["conditions"]["protocol"] == "published" and cell["conditions"]["iterations"] == 1
    assert cell["conditions"]["time_limit_s"] == 20.0 and "-seed0-" in cell["conditions"]["data"]
    assert cell["sandbox"] == "local" and cell["hardware"].startswith("CPU only")

    same = run(pytester, base_args, model, "--weirdml-runs=2", f"--weirdml-baseline={saved}", reports="r2")
    assert same.ret == 0
    same.stdout.fnmatch_lines(
        ["*weirdml comparison with*baseline.json (margin 0)*", "*no regression against the baseline*"]
    )
    assert "REGRESSION" not in same.stdout.str()

    # The same model name, whose agent now writes chance-level predictions.
    write_replay(replay, [CHANCE_SCRIPT])
    junit = pytester.path / "junit.xml"
    worse = run(
        pytester,
        base_args,
        model,
        "--weirdml-runs=2",
        f"--weirdml-baseline={saved}",
        f"--junitxml={junit}",
        reports="r3",
    )
    assert worse.ret == 1
    worse.stdout.fnmatch_lines(
        [
            "model*task*baseline [[]95% CI]*now [[]95% CI]*delta [[]95% CI]*verdict",
            "replay:agent.json*tiny*1.000 [[]1.000, 1.000]*0.4?0 [[]0.4?0, 0.4?0]*-0.5?0 [[]-0.5?0, -0.5?0]*REGRESSION",
            "*1 regression(s) against the baseline: replay:agent.json / tiny (-0.5?0)*",
        ]
    )
    # Every item passed: the failure is the gate's alone.
    worse.assert_outcomes(passed=2)
    summary = json.loads((only_session(pytester, "r3") / "summary.json").read_text())
    comparison = summary["comparison"]
    assert comparison["baseline"] == str(saved) and comparison["margin"] == 0.0
    assert [(r["model"], r["task"]) for r in comparison["regressions"]] == [("replay:agent.json", "tiny")]
    (row,) = comparison["rows"]
    assert row["verdict"] == "regression" and row["delta"]["ci_high"] < 0
    cases = ET.parse(junit).getroot().iter("testcase")
    verdicts = {case.get("name"): {p.get("name"): p.get("value") for p in case.iter("property")} for case in cases}
    assert len(verdicts) == 2
    assert all(props["weirdml_verdict"] == "regression" for props in verdicts.values())
    assert all(props["weirdml_delta"].startswith("-0.5") for props in verdicts.values())


def test_a_finished_session_directory_serves_as_the_baseline_and_a_margin_absorbs_a_small_drop(
    pytester: pytest.Pytester, tiny: Path, base_args: list[str]
) -> None:
    replay = write_replay(pytester.path / "agent.json", [GOOD_SCRIPT])
    model = f"--weirdml-model=replay:{replay}"
    run(pytester, base_args, model, "--weirdml-runs=1", reports="r1")
    where = only_session(pytester, "r1")
    write_replay(replay, [HALF_SCRIPT])
    pytester.makeini("[pytest]\nweirdml_regression_margin = 0.5\n")
    tolerated = run(pytester, base_args, model, "--weirdml-runs=1", f"--weirdml-baseline={where}", reports="r2")
    assert tolerated.ret == 0
    tolerated.stdout.fnmatch_lines(["*(margin 0.5)*", "replay:agent.json*tiny*-0.400*same"])
    flagged = run(
        pytester,
        base_args,
        model,
        "--weirdml-runs=1",
        f"--weirdml-baseline={where}",
        "--weirdml-regression-margin=0.1",
        reports="r3",
    )
    assert flagged.ret == 1
    flagged.stdout.fnmatch_lines(["replay:agent.json*tiny*-0.400*REGRESSION"])


def test_noisy_runs_whose_interval_straddles_zero_are_not_flagged(
    pytester: pytest.Pytester, tiny: Path, base_args: list[str]
) -> None:
    recorded = pytester.path / "noisy.jsonl"
    write_replay_records(recorded, "tiny", {0: GOOD_SCRIPT, 1: HALF_SCRIPT})
    model = f"--weirdml-model=replay:{recorded}"
    saved = pytester.path / "baseline.json"
    base_args = [*base_args, "--weirdml-iterations=1"]
    run(pytester, base_args, model, "--weirdml-runs=2", f"--weirdml-save-baseline={saved}", reports="r1")
    assert json.loads(saved.read_text())["models"]["replay:noisy.jsonl"]["tiny"]["scores"] == [1.0, 0.6]
    write_replay_records(recorded, "tiny", {0: HALF_SCRIPT, 1: HALF_SCRIPT})
    # 0.6 and 0.6 now against 1.0 and 0.6: the mean fell by 0.2, but one baseline run scored 0.6 too.
    result = run(pytester, base_args, model, "--weirdml-runs=2", f"--weirdml-baseline={saved}", reports="r2")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["replay:noisy.jsonl*tiny*-0.200 [[]-0.400, +0.000]*same"])


@pytest.mark.parametrize(
    ("change", "difference"),
    [
        ("--weirdml-data-seed=3", "data identity v1-seed0-* in the baseline, v1-seed3-* now"),
        ("--weirdml-time-limit=10", "time limit (s) 20.0 in the baseline, 10.0 now"),
        ("--weirdml-protocol=informed", "protocol published in the baseline, informed now"),
    ],
)
def test_other_conditions_are_refused_before_anything_runs(
    pytester: pytest.Pytester, tiny: Path, base_args: list[str], change: str, difference: str
) -> None:
    saved = pytester.path / "baseline.json"
    run(
        pytester,
        base_args,
        "--weirdml-model=reference",
        "--weirdml-runs=1",
        f"--weirdml-save-baseline={saved}",
        reports="r1",
    )
    refused = run(
        pytester,
        base_args,
        "--weirdml-model=reference",
        "--weirdml-runs=1",
        f"--weirdml-baseline={saved}",
        change,
        "-rs",
        reports="r2",
    )
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    refused.assert_outcomes(skipped=1)
    refused.stdout.fnmatch_lines(
        [f"*not run, the baseline was made under other conditions: reference / tiny: {difference}*baseline-force*"]
    )
    # Nothing ran: no model was asked, nothing recorded.
    assert not (pytester.path / "r2").exists() or not any((pytester.path / "r2").rglob("records.jsonl"))
    forced = run(
        pytester,
        base_args,
        "--weirdml-model=reference",
        "--weirdml-runs=1",
        f"--weirdml-baseline={saved}",
        change,
        "--weirdml-baseline-force",
        reports="r3",
    )
    assert forced.ret == 0
    forced.stdout.fnmatch_lines(["reference*tiny*+0.000*same", f"note: reference / tiny: {difference}"])


def test_compare_then_save_rolls_the_baseline_forward(
    pytester: pytest.Pytester, tiny: Path, base_args: list[str]
) -> None:
    replay = write_replay(pytester.path / "agent.json", [HALF_SCRIPT])
    model = f"--weirdml-model=replay:{replay}"
    saved = pytester.path / "baseline.json"
    run(pytester, base_args, model, "--weirdml-runs=1", f"--weirdml-save-baseline={saved}", reports="r1")
    write_replay(replay, [GOOD_SCRIPT])
    both = (f"--weirdml-baseline={saved}", f"--weirdml-save-baseline={saved}")
    better = run(pytester, base_args, model, "--weirdml-runs=1", *both, reports="r2")
    assert better.ret == 0
    # The baseline is saved before the comparison is printed: compared against the old one, then rolled.
    better.stdout.fnmatch_lines([f"baseline: {saved}", "replay:agent.json*tiny*+0.400*improvement"])
    assert json.loads(saved.read_text())["models"]["replay:agent.json"]["tiny"]["scores"] == [1.0]
    # A session that regressed does not become the baseline.
    write_replay(replay, [CHANCE_SCRIPT])
    worse = run(pytester, base_args, model, "--weirdml-runs=1", *both, reports="r3")
    assert worse.ret == 1
    worse.stdout.fnmatch_lines([f"baseline: not saved: this session regressed against {saved}*"])
    assert json.loads(saved.read_text())["models"]["replay:agent.json"]["tiny"]["scores"] == [1.0]


def test_unreadable_baselines_are_usage_errors(pytester: pytest.Pytester, tiny: Path, base_args: list[str]) -> None:
    missing = run(pytester, base_args, "--weirdml-model=reference", "--weirdml-baseline=nowhere.json", reports="r")
    assert missing.ret == pytest.ExitCode.USAGE_ERROR
    missing.stderr.fnmatch_lines(["*--weirdml-baseline: */nowhere.json: no such baseline; pass a file written by*"])
    bad = run(pytester, base_args, "--weirdml-model=reference", "--weirdml-regression-margin=lots", reports="r")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(["*--weirdml-regression-margin must be an accuracy difference in [[]0, 1), got 'lots'*"])


def test_a_hostile_baseline_file_is_a_usage_error_naming_the_file_field_and_fix(
    pytester: pytest.Pytester, tiny: Path, base_args: list[str]
) -> None:
    """Issue 36: "sessions": 7 ended the session in INTERNALERROR (TypeError: 'int' object is not
    iterable); an extra conditions key of escape sequences reached the terminal raw."""
    conditions = {"protocol": "published", "iterations": 1, "time_limit_s": 20.0, "data": "v1-seed0-abc"}
    cell = {"scores": [1.0], "conditions": conditions}
    raw = {"format": "pytest-weirdml-baseline", "version": 1, "sessions": 7, "models": {"reference": {"tiny": cell}}}
    path = pytester.path / "baseline.json"
    path.write_text(json.dumps(raw))
    sessions = run(pytester, base_args, "--weirdml-model=reference", f"--weirdml-baseline={path}", reports="r")
    assert sessions.ret == pytest.ExitCode.USAGE_ERROR
    sessions.stderr.fnmatch_lines(
        [
            f"*--weirdml-baseline: {path}: field 'sessions' is 7; it must be a list of session names. Save the "
            "baseline again (--weirdml-save-baseline) or pass a session directory"
        ]
    )
    raw["sessions"] = []
    conditions["\x1b]0;owned\x07\x1b[2J"] = 1
    path.write_text(json.dumps(raw))
    key = run(pytester, base_args, "--weirdml-model=reference", f"--weirdml-baseline={path}", reports="r")
    assert key.ret == pytest.ExitCode.USAGE_ERROR
    key.stderr.fnmatch_lines(["*field 'models.reference.tiny.conditions' holds unknown conditions (*owned*)*"])
    assert "\x1b" not in key.stdout.str() + key.stderr.str()


def test_the_gate_works_under_xdist(pytester: pytest.Pytester, tiny: Path, base_args: list[str]) -> None:
    replay = write_replay(pytester.path / "agent.json", [GOOD_SCRIPT])
    model = f"--weirdml-model=replay:{replay}"
    saved = pytester.path / "baseline.json"
    common = [*base_args, "--weirdml-runs=4", model]
    first = pytester.runpytest_subprocess("-n", "2", *common, f"--weirdml-save-baseline={saved}", timeout=300)
    assert first.ret == 0
    write_replay(replay, [CHANCE_SCRIPT])
    worse = pytester.runpytest_subprocess("-n", "2", *common, f"--weirdml-baseline={saved}", timeout=300)
    assert worse.ret == 1
    worse.assert_outcomes(passed=4)
    worse.stdout.fnmatch_lines(["replay:agent.json*tiny*REGRESSION"])
    assert worse.stdout.str().count("weirdml comparison with") == 1
    compared = json.loads((session_dir_all(pytester)[-1] / "summary.json").read_text())
    assert compared["comparison"]["regressions"]


def session_dir_all(pytester: pytest.Pytester) -> list[Path]:
    return sorted((pytester.path / "reports").iterdir())


def test_weirdml_compare_command(
    pytester: pytest.Pytester, tiny: Path, base_args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    replay = write_replay(pytester.path / "agent.json", [GOOD_SCRIPT])
    model = f"--weirdml-model=replay:{replay}"
    run(pytester, base_args, model, "--weirdml-runs=1", reports="r1")
    write_replay(replay, [CHANCE_SCRIPT])
    run(pytester, base_args, model, "--weirdml-runs=1", reports="r2")
    old, new = only_session(pytester, "r1"), only_session(pytester, "r2")
    assert weirdml(["compare", str(old), str(old)]) == 0
    assert "no regression" in capsys.readouterr().out
    assert weirdml(["compare", str(old), str(new)]) == 1
    out = capsys.readouterr().out
    assert "REGRESSION" in out and "replay:agent.json" in out
    assert weirdml(["compare", str(pytester.path / "none.json"), str(new)]) == 2
    assert "no such baseline" in capsys.readouterr().err


# A model whose second run loses its provider while the file "die" exists.
FLAKY = f"""
import pytest
from pathlib import Path
from pytest_weirdml.errors import ModelError
from pytest_weirdml.models import Model, Response

class Flaky(Model):
    name = "flaky"

    def generate(self, request):
        if request.run == 1 and Path("die").exists():
            raise ModelError("the provider went away")
        return Response("```python\\n" + {GOOD_SCRIPT!r} + "```")

@pytest.fixture
def weirdml_model(weirdml_case):
    return Flaky()
"""


@needs_bwrap
def test_a_model_with_unscored_runs_is_incomplete_never_same(
    pytester: pytest.Pytester, tiny: Path, base_args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    pytester.makeconftest(FLAKY)
    saved = pytester.path / "baseline.json"
    model = "--weirdml-model=baseline"
    first = run(pytester, base_args, model, "--weirdml-runs=2", f"--weirdml-save-baseline={saved}", reports="r1")
    assert first.ret == 0
    (pytester.path / "die").write_text("")
    # The run that scored is as good as the baseline's: without its dropped run the gate would pass.
    again = run(pytester, base_args, model, "--weirdml-runs=2", f"--weirdml-baseline={saved}", "-rN", reports="r2")
    assert again.ret == 1
    again.assert_outcomes(passed=1, errors=1)
    again.stdout.fnmatch_lines(
        [
            "isolation: bwrap*",
            "flaky: 1 run(s) not scored: 1x ModelError",
            "*weirdml comparison with*",
            "isolation: baseline bwrap*; now bwrap*",
            "*flaky*tiny*1.000*1.000*+0.000*incomplete",
            "incomplete, so not passed: flaky (1 run(s) not scored)",
        ]
    )
    assert "no regression against the baseline" not in again.stdout.str()
    summary = json.loads((only_session(pytester, "r2") / "summary.json").read_text())
    assert summary["unscored"] == {"flaky": {"ModelError": 1}}
    assert summary["comparison"]["incomplete"] == {"flaky": 1}
    assert [row["verdict"] for row in summary["comparison"]["rows"]] == ["incomplete"]
    # A session with dropped runs never becomes the baseline.
    before = saved.read_text()
    rolled = run(
        pytester,
        base_args,
        model,
        "--weirdml-runs=2",
        f"--weirdml-baseline={saved}",
        f"--weirdml-save-baseline={saved}",
        reports="r3",
    )
    assert rolled.ret == 1 and saved.read_text() == before
    # The command line says the same, in the lines the session's comparison prints, and shows each
    # source's isolation.
    capsys.readouterr()
    assert weirdml(["compare", str(saved), str(only_session(pytester, "r2"))]) == 1
    out = capsys.readouterr().out
    assert "isolation: baseline bwrap" in out and "incomplete, so not passed: flaky (1 run(s) not scored)" in out
    assert (
        weirdml(["report", str(only_session(pytester, "r1")), str(only_session(pytester, "r2")), "-o", "merged"]) == 0
    )
    out = capsys.readouterr().out
    assert out.count("isolation of ") == 2 and f"isolation of {only_session(pytester, 'r1').name}: bwrap" in out
