"""The regression gate's statistics and its baseline file, without a session."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_weirdml import stats
from pytest_weirdml.baseline import OVERALL, Baseline, BaselineError, compare, load
from pytest_weirdml.table import comparison_cells, comparison_lines


def runs(model: str, task: str, scores: list[float], **conditions: object) -> list[dict[str, object]]:
    base = {"protocol": "published", "iterations_planned": 5, "time_limit_s": 120.0, "data": "v1-seed0-abc"}
    base.update(conditions)
    return [{"model": model, "task": task, "run": i, "score": s, **base} for i, s in enumerate(scores)]


def session(*groups: list[dict[str, object]]) -> Baseline:
    return Baseline.from_runs([run for group in groups for run in group], source="test")


def only(comparison, model: str = "m", task: str = "t"):  # type: ignore[no-untyped-def]
    (row,) = [r for r in comparison.rows if (r.model, r.task) == (model, task)]
    return row


def test_identical_deterministic_scores_are_the_same_with_a_zero_width_interval() -> None:
    old = session(runs("m", "t", [0.9, 0.9]))
    row = only(compare(old, session(runs("m", "t", [0.9, 0.9, 0.9]))))
    assert (row.delta.mean, row.delta.low, row.delta.high) == pytest.approx((0.0, 0.0, 0.0), abs=1e-12)
    assert row.verdict == "same"


def test_a_zero_width_drop_below_the_margin_is_a_regression() -> None:
    comparison = compare(session(runs("m", "t", [1.0, 1.0])), session(runs("m", "t", [0.2, 0.2])))
    row = only(comparison)
    assert (row.delta.mean, row.delta.low, row.delta.high) == pytest.approx((-0.8, -0.8, -0.8))
    assert row.verdict == "regression"
    assert comparison.regressions == [row]
    header, cells = comparison_cells(comparison.as_dict()["rows"])
    assert header[-1] == "verdict" and cells[0][-1] == "REGRESSION"
    assert cells[0][4] == "-0.800 [-0.800, -0.800]"


def test_a_drop_inside_the_margin_is_not_a_regression() -> None:
    comparison = compare(session(runs("m", "t", [0.9])), session(runs("m", "t", [0.85])), margin=0.1)
    assert only(comparison).verdict == "same"
    assert compare(session(runs("m", "t", [0.9])), session(runs("m", "t", [0.75])), margin=0.1).regressions


def test_noisy_runs_whose_interval_straddles_zero_are_not_flagged() -> None:
    row = only(compare(session(runs("m", "t", [0.6, 0.9])), session(runs("m", "t", [0.5, 0.9]))))
    assert row.delta.low < 0 < row.delta.high
    assert row.verdict == "same"


def test_a_clear_rise_is_an_improvement() -> None:
    row = only(compare(session(runs("m", "t", [0.2, 0.25, 0.22])), session(runs("m", "t", [0.8, 0.85, 0.9]))))
    assert row.verdict == "improvement" and row.delta.low > 0


def test_overall_row_over_common_tasks_resamples_both_sides_independently() -> None:
    old = session(runs("m", "a", [0.5, 0.7]), runs("m", "b", [0.2, 0.4]), runs("m", "gone", [1.0]))
    new = session(runs("m", "a", [0.5, 0.7]), runs("m", "b", [0.2, 0.4]), runs("m", "new", [0.0]))
    comparison = compare(old, new, resamples=20_000)
    overall = only(comparison, task=OVERALL)
    assert overall.delta.mean == pytest.approx(0.0)
    # Equal data on both sides, yet independent resamples: the difference still has a spread,
    # sqrt(2) times each side's standard error.
    assert overall.delta.se == pytest.approx(2**0.5 * overall.before.se, rel=0.05)
    assert comparison.only_in_baseline == ["m / gone"]
    assert comparison.only_now == ["m / new"]


def test_models_missing_on_one_side_are_listed_not_fatal() -> None:
    comparison = compare(session(runs("a", "t", [0.5])), session(runs("b", "t", [0.5])))
    assert comparison.rows == []
    assert comparison.only_in_baseline == ["a / t"] and comparison.only_now == ["b / t"]


@pytest.mark.parametrize(
    ("change", "phrase"),
    [
        ({"data": "v1-seed7-abc"}, "data identity v1-seed0-abc in the baseline, v1-seed7-abc now"),
        ({"time_limit_s": 60.0}, "time limit (s) 120.0 in the baseline, 60.0 now"),
        ({"protocol": "informed"}, "protocol published in the baseline, informed now"),
        ({"iterations_planned": 3}, "submissions per run 5 in the baseline, 3 now"),
    ],
)
def test_other_conditions_are_refused_naming_the_difference_and_the_override(
    change: dict[str, object], phrase: str
) -> None:
    old = session(runs("m", "t", [0.9]))
    new = session(runs("m", "t", [0.1], **change))
    with pytest.raises(BaselineError) as info:
        compare(old, new)
    assert phrase in str(info.value)
    assert "--weirdml-baseline-force" in str(info.value)
    forced = compare(old, new, force=True)
    assert forced.regressions and any(phrase in note for note in forced.notes)


def test_runs_of_one_cell_under_different_conditions_are_refused() -> None:
    with pytest.raises(BaselineError, match="mixes runs made under different conditions"):
        session(runs("m", "t", [0.9]), runs("m", "t", [0.9], data="v2-seed0-abc"))


def test_the_file_round_trips_and_bad_files_are_named(tmp_path: Path) -> None:
    old = session(runs("m", "t", [0.9, 0.8]), runs("m", "u", [0.1]))
    path = old.save(tmp_path / "sub" / "baseline.json")
    raw = json.loads(path.read_text())
    assert raw["format"] == "pytest-weirdml-baseline" and raw["version"] == 1
    assert raw["models"]["m"]["t"]["scores"] == [0.9, 0.8]
    back = load(path)
    assert back.cells == old.cells
    with pytest.raises(BaselineError, match="no such baseline"):
        load(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text('{"format": "pytest-weirdml-baseline", "version": 99}')
    with pytest.raises(BaselineError, match="reads version 1"):
        load(tmp_path / "bad.json")
    (tmp_path / "other.json").write_text("[1, 2]")
    with pytest.raises(BaselineError, match="not a pytest-weirdml baseline"):
        load(tmp_path / "other.json")


def test_difference_matches_the_two_sides_estimates() -> None:
    before, after = {"a": [0.1, 0.3, 0.5]}, {"a": [0.6, 0.8]}
    per_task, overall = stats.difference(before, after, resamples=5000)
    assert per_task["a"].mean == pytest.approx(0.7 - 0.3)
    assert overall.mean == pytest.approx(0.4)
    assert per_task["a"].low < 0.4 < per_task["a"].high
    with pytest.raises(ValueError, match="share no task"):
        stats.difference({"a": [1.0]}, {"b": [1.0]})


def _saved(tmp_path: Path) -> dict[str, object]:
    path = session(runs("m", "t", [0.9, 0.8])).save(tmp_path / "baseline.json")
    return json.loads(path.read_text())  # type: ignore[no-any-return]


def _conditions(raw: dict, **change: object) -> None:  # type: ignore[type-arg]
    raw["models"]["m"]["t"]["conditions"].update(change)


ESCAPES = "\x1b]0;owned\x07\x1b[2J\x9b31m"


@pytest.mark.parametrize(
    ("attack", "field", "must"),
    [
        (lambda raw: raw.update(sessions=7), "field 'sessions' is 7", "a list of session names"),
        (lambda raw: raw.update(sessions=[ESCAPES]), "field 'sessions'", "a list of session names"),
        (lambda raw: raw.update(created=5), "field 'created' is 5", "a string"),
        (lambda raw: raw.update(generator=None), "field 'generator' is None", "a string"),
        (lambda raw: _conditions(raw, **{ESCAPES: 1}), "field 'models.m.t.conditions' holds unknown", "protocol"),
        (lambda raw: _conditions(raw, protocol=ESCAPES), "field 'models.m.t.conditions.protocol'", "a name"),
        (lambda raw: _conditions(raw, data=ESCAPES), "field 'models.m.t.conditions.data'", "a name"),
        (lambda raw: _conditions(raw, iterations=0), "field 'models.m.t.conditions.iterations' is 0", "at least 1"),
        (lambda raw: _conditions(raw, time_limit_s=-1), "field 'models.m.t.conditions.time_limit_s' is -1", "above"),
    ],
    ids=[
        "sessions-int",
        "sessions-escapes",
        "created",
        "generator",
        "extra-condition",
        "protocol",
        "data",
        "iterations",
        "time-limit",
    ],
)
def test_every_field_read_from_a_baseline_is_checked_naming_the_file_field_and_fix(
    tmp_path: Path,
    attack,
    field: str,
    must: str,  # type: ignore[no-untyped-def]
) -> None:
    """Issue 36: "sessions": 7 ended the session in an INTERNALERROR; an extra conditions key
    holding escape sequences reached the terminal raw; a data key of escapes was printed as a
    difference of conditions."""
    raw = _saved(tmp_path)
    attack(raw)
    path = tmp_path / "hostile.json"
    path.write_text(json.dumps(raw))
    with pytest.raises(BaselineError) as info:
        load(path)
    message = str(info.value)
    assert message.startswith(f"{path}: {field}") and must in message
    assert "Save the baseline again (--weirdml-save-baseline) or pass a session directory" in message
    assert not any(ord(c) < 32 or 0x7F <= ord(c) <= 0x9F for c in message), repr(message)


def test_what_the_gate_prints_holds_no_control_character() -> None:
    """A session directory's records may hold a data key of escape sequences: the refusal, its
    skip reasons and the comparison's lines print none of them."""
    old = session(runs("m", "t", [0.9], data=f"v1{ESCAPES}"))
    with pytest.raises(BaselineError) as info:
        compare(old, session(runs("m", "t", [0.9])))
    assert "data identity v131m in the baseline, v1-seed0-abc now" in str(info.value)
    comparison = compare(old, session(runs("m", "t", [0.9])), force=True).as_dict()
    comparison["notes"].append(f"hardware {ESCAPES}")
    comparison["only_now"].append(ESCAPES)
    lines = [text for text, _ in comparison_lines(comparison, [ESCAPES])]
    assert lines and not any(c in text for text in lines for c in "\x1b\x07\x9b")
