"""The statistics on hand-computed cases, against scipy.stats.bootstrap, and at the issue's size."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest

from pytest_weirdml import stats
from pytest_weirdml.report.summary import build_summary


def test_constant_scores_have_a_zero_width_interval() -> None:
    est = stats.bootstrap_overall({"a": [0.7, 0.7, 0.7], "b": [0.3, 0.3]}, resamples=500)
    assert (est.mean, est.low, est.high, est.se, est.n) == (
        pytest.approx(0.5),
        pytest.approx(0.5),
        pytest.approx(0.5),
        0.0,
        5,
    )


def test_two_runs_zero_and_one_give_the_exact_bootstrap_distribution() -> None:
    # Resampled means are 0, 0.5, 1 with probabilities 1/4, 1/2, 1/4: SD sqrt(1/8), 95% range [0, 1].
    est = stats.bootstrap_mean([0.0, 1.0], resamples=40_000, seed=1)
    assert est.mean == 0.5
    assert (est.low, est.high) == (0.0, 1.0)
    assert est.se == pytest.approx(math.sqrt(1 / 8), rel=0.02)


def test_overall_is_the_unweighted_mean_over_tasks_not_over_runs() -> None:
    # Over runs this would be (0 + 1 + 1 + 1 + 0.5) / 5 = 0.7; over tasks it is (0.75 + 0.5) / 2.
    boot = stats.bootstrap({"a": [0.0, 1.0, 1.0, 1.0], "b": [0.5]}, resamples=2000)
    assert boot.overall().mean == pytest.approx(0.625)
    assert boot.task("a").mean == pytest.approx(0.75)
    assert boot.task("b").se == 0.0  # one run: nothing to resample
    # Task b never moves, so the overall varies by half of task a's variation.
    assert boot.overall().se == pytest.approx(boot.task("a").se / 2)


def test_resampled_task_means_take_only_values_the_runs_allow() -> None:
    boot = stats.bootstrap({"a": [0.0, 1.0], "b": [0.0, 0.0, 1.0]}, resamples=3000)
    assert set(np.unique(boot.resampled[0, :, 0])) <= {0.0, 0.5, 1.0}
    assert set(np.round(np.unique(boot.resampled[1, :, 0]) * 3, 9)) <= {0.0, 1.0, 2.0, 3.0}
    # The padded third slot of task a must never count.
    assert boot.resampled[0].mean() == pytest.approx(0.5, abs=0.02)
    assert boot.resampled[1].mean() == pytest.approx(1 / 3, abs=0.02)


def test_seeded_bootstrap_repeats_and_different_seeds_differ() -> None:
    data = {"a": [0.1, 0.5, 0.9], "b": [0.2, 0.4]}
    assert stats.bootstrap_overall(data, seed=3) == stats.bootstrap_overall(data, seed=3)
    assert stats.bootstrap_overall(data, seed=3) != stats.bootstrap_overall(data, seed=4)


@pytest.mark.parametrize("sizes", [(5,), (3, 5, 10), (2, 2, 2, 2), (10,) * 6])
def test_matches_scipy_bootstrap_percentile_interval_and_standard_error(sizes: tuple[int, ...]) -> None:
    scipy_stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(sum(sizes))
    samples = [rng.uniform(0, 1, n).round(3) for n in sizes]

    def overall(*s: np.ndarray, axis: int) -> np.ndarray:
        return np.mean([x.mean(axis=axis) for x in s], axis=0)

    # paired=False resamples each sample on its own: scipy's form of "runs within each task".
    ref = scipy_stats.bootstrap(
        tuple(samples), overall, paired=False, vectorized=True, method="percentile", n_resamples=50_000, rng=7
    )
    ours = stats.bootstrap_overall({str(i): s for i, s in enumerate(samples)}, resamples=50_000, seed=7)
    width = ref.confidence_interval.high - ref.confidence_interval.low
    assert ours.low == pytest.approx(ref.confidence_interval.low, abs=0.02 * width + 1e-12)
    assert ours.high == pytest.approx(ref.confidence_interval.high, abs=0.02 * width + 1e-12)
    assert ours.se == pytest.approx(ref.standard_error, rel=0.02)


def test_progression_columns_share_the_resamples_of_the_run_scores() -> None:
    runs = {"a": [[0.2, 0.5, 0.5], [0.0, 0.0, 0.9]], "b": [[0.3, 0.3, 0.3], [0.1, 0.8, 0.8], [0.0, 0.0, 0.0]]}
    boot = stats.bootstrap(runs, resamples=4000, seed=5)
    last = stats.bootstrap({t: [r[-1] for r in rs] for t, rs in runs.items()}, resamples=4000, seed=5)
    assert boot.overall() == last.overall()
    means = [est.mean for est in boot.columns()]
    assert means == pytest.approx([(0.1 + 0.4 / 3) / 2, (0.25 + 1.1 / 3) / 2, (0.7 + 1.1 / 3) / 2])


def test_best_so_far_carries_a_short_run_forward() -> None:
    assert stats.best_so_far([0.2, 0.0, 0.7, 0.5], 4) == [0.2, 0.2, 0.7, 0.7]
    assert stats.best_so_far([0.6], 3) == [0.6, 0.6, 0.6]
    assert stats.best_so_far([], 2) == [0.0, 0.0]


def test_small_helpers() -> None:
    assert stats.failure_rate([None, "crash", None, "timed out"]) == 0.5
    assert stats.failure_rate([]) is None
    # numpy's linear interpolation, as the published code-length columns use (132.9, 630.7, ...).
    assert stats.percentiles(list(range(1, 11)), [10, 50, 90]) == pytest.approx([1.9, 5.5, 9.1])
    assert stats.median([3.0, 1.0, 2.0]) == 2.0 and stats.median([]) is None


def _run(task: str, model: str, run: int, scores: list[float], **extra: object) -> dict[str, object]:
    base: dict[str, object] = {
        "task": task,
        "model": model,
        "run": run,
        "score": max(scores),
        "scores": scores,
        "zero_reasons": [None if s else "the script crashed (exit code 1)" for s in scores],
        "exec_s": [1.0] * len(scores),
        "code_lines": [10] * len(scores),
        "output_tokens": [100] * len(scores),
        "cost_usd": None,
    }
    return {**base, **extra}


def test_summary_per_model_numbers_on_a_hand_made_session() -> None:
    runs = [
        _run("a", "m", 0, [0.0, 0.6], cost_usd=0.5, output_tokens=[100, 300], code_lines=[10, 30], exec_s=[2.0, 4.0]),
        _run("a", "m", 1, [0.8], cost_usd=1.5, output_tokens=[200], code_lines=[20], exec_s=[9.0]),
        _run("b", "m", 0, [0.0, 0.0, 0.3]),
    ]
    m = build_summary(runs, resamples=1000)["models"]["m"]
    assert m["tasks"]["a"]["mean"] == pytest.approx(0.7) and m["tasks"]["a"]["scores"] == [0.6, 0.8]
    assert m["overall"]["mean"] == pytest.approx((0.7 + 0.3) / 2)
    assert (m["runs"], m["iterations"], m["failures"]) == (3, 6, 3)
    assert m["failure_rate"] == 0.5
    assert m["zero_reasons"] == {"the script crashed (exit code 1)": 3}
    assert m["cost_per_run_usd"] == 1.0  # the run without a price is not counted as free
    assert m["mean_output_tokens"] == pytest.approx((100 + 300 + 200 + 300) / 6)
    assert m["code_lines"] == pytest.approx({"p10": 10.0, "p50": 10.0, "p90": 25.0})
    assert m["exec_time_median_s"] == 1.5
    # After iteration 1: a = (0 + 0.8) / 2, b = 0; after 3 every run has its best.
    assert [p["mean"] for p in m["progression"]] == pytest.approx([0.2, 0.35, 0.5])


def test_statistics_at_the_issue_size_take_well_under_a_second_of_cpu() -> None:
    rng = np.random.default_rng(0)
    models = [{f"t{t}": rng.uniform(0, 1, (10, 5)) for t in range(20)} for _ in range(10)]
    start = time.process_time()
    for per_task in models:
        boot = stats.bootstrap(per_task, resamples=10_000)
        boot.columns()
        boot.task_estimates()
    # CPU time: the wall clock on a shared CI machine measures the neighbours. About 0.3 s here.
    assert time.process_time() - start < 2.0
