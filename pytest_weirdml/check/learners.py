"""Generic learners: what a capable generalist fits without finding a task's structure.

Two sources, one interface (``Learner``: the public directory and a work factor in, test
predictions out):

- a task's ``calibrate.py`` may define ``GENERIC_LEARNERS``, a dict of name -> function
  ``(public: Path, work: float) -> predictions``, where ``work`` multiplies the learner's fixed
  amount of work (epochs, boosting rounds): 1.0 is the figure its README quotes;
- otherwise the checker's own, which need nothing but the data: gradient-boosted trees and a
  logistic regression on each sample's values (flattened arrays; a ragged sample's summary
  statistics and density histogram), and a logistic regression on character n-grams for text.

Work, not wall time, is what they scale, so their figures do not depend on how busy the
machine is. scikit-learn does the fitting (the ``check`` extra): its estimators are the
generalist's first try, and its ``max_iter`` is the work knob.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np

from pytest_weirdml.check.samples import RAGGED, Column, Samples
from pytest_weirdml.errors import TaskError

Learner = Callable[[Path, float], np.ndarray]
CALIBRATE_FILE = "calibrate.py"
MAX_FEATURES = 2048
HIST_BINS = 8
INSTALL = "pip install 'pytest-weirdml[check]'"


def sklearn_missing() -> str | None:
    try:
        import sklearn  # noqa: F401
    except ImportError:
        return f"the task checker fits its generic learners with scikit-learn, which is not installed: {INSTALL}"
    return None


def column_features(column: Column) -> np.ndarray:
    """Each sample of a numeric column as a fixed-length float vector."""
    if column.kind == RAGGED:
        return np.stack([_ragged_summary(np.asarray(v, dtype=np.float64)) for v in column.values])
    flat = np.asarray(column.values, dtype=np.float32).reshape(len(column), -1)
    if flat.shape[1] > MAX_FEATURES:
        flat = flat[:, np.linspace(0, flat.shape[1] - 1, MAX_FEATURES).astype(np.int64)]
    return flat


def _ragged_summary(points: np.ndarray) -> np.ndarray:
    points = points.reshape(len(points), -1)
    width = points.shape[1]
    if len(points) == 0:
        return np.zeros(1 + 4 * width + HIST_BINS * HIST_BINS)
    stats = [[len(points)], points.mean(0), points.std(0), points.min(0), points.max(0)]
    hist = np.zeros(HIST_BINS * HIST_BINS)
    if width >= 2:
        lo, hi = points[:, :2].min(0), points[:, :2].max(0)
        scaled = (points[:, :2] - lo) / np.where(hi > lo, hi - lo, 1.0)
        cells = np.clip((scaled * HIST_BINS).astype(np.int64), 0, HIST_BINS - 1)
        hist = np.bincount(cells[:, 0] * HIST_BINS + cells[:, 1], minlength=HIST_BINS * HIST_BINS) / len(points)
    return np.concatenate([np.ravel(s) for s in stats] + [hist])


def text_of(columns: tuple[Column, ...], index: int) -> str:
    return " | ".join(
        ",".join(v) if isinstance(v := c.values[index], list) else str(v) for c in columns if not c.numeric
    )


def fit_predict(make: Callable[[], object], x: np.ndarray, labels: np.ndarray, x_test: np.ndarray) -> np.ndarray:
    """One estimator per label column (a constant column is predicted as itself)."""
    out = np.zeros((x_test.shape[0], labels.shape[1]), dtype=np.int64)
    for j in range(labels.shape[1]):
        y = labels[:, j]
        if len(np.unique(y)) < 2:
            out[:, j] = y[0] if len(y) else 0
            continue
        model = make()
        with warnings.catch_warnings():
            # Work is capped on purpose (it is the knob the compute check turns): not converging is expected.
            warnings.filterwarnings("ignore", message=".*(converge|iterations).*")
            model.fit(x, y)  # type: ignore[attr-defined]
        out[:, j] = model.predict(x_test)  # type: ignore[attr-defined]
    return out


def gbm(work: float, seed: int = 0) -> Callable[[], object]:
    from sklearn.ensemble import HistGradientBoostingClassifier

    rounds = max(5, round(100 * work))
    return lambda: HistGradientBoostingClassifier(max_iter=rounds, early_stopping=False, random_state=seed)


def logreg(work: float) -> Callable[[], object]:
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    steps = max(10, round(200 * work))
    return lambda: make_pipeline(StandardScaler(), LogisticRegression(max_iter=steps))


def builtin_learners(samples: Samples) -> dict[str, Callable[[float], np.ndarray]]:
    """The checker's own generic learners for this data set, keyed by name; each takes a work
    factor and returns test predictions shaped as the answers' rows."""
    learners: dict[str, Callable[[float], np.ndarray]] = {}
    numeric = [i for i, c in enumerate(samples.train) if c.numeric]
    if numeric:
        x = np.hstack([column_features(samples.train[i]) for i in numeric])
        xt = np.hstack([column_features(samples.test[i]) for i in numeric])
        learners["flat-gbm"] = lambda work: fit_predict(gbm(work), x, samples.labels, xt)
        learners["flat-logreg"] = lambda work: fit_predict(logreg(work), x, samples.labels, xt)
    if len(numeric) < len(samples.train):
        train_text = [text_of(samples.train, i) for i in range(len(samples.labels))]
        test_text = [text_of(samples.test, i) for i in range(len(samples.answers))]
        learners["ngram-logreg"] = lambda work: _ngram_logreg(train_text, samples.labels, test_text, work)
    return learners


def _ngram_logreg(train: list[str], labels: np.ndarray, test: list[str], work: float) -> np.ndarray:
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression

    vectorizer = TfidfVectorizer(analyzer="char_wb", ngram_range=(1, 4), max_features=50000, sublinear_tf=True)
    x = vectorizer.fit_transform(train)
    xt = vectorizer.transform(test)
    steps = max(10, round(200 * work))
    return fit_predict(lambda: LogisticRegression(max_iter=steps, C=10.0), x, labels, xt)


def task_learners(directory: Path) -> Mapping[str, Learner] | None:
    """``GENERIC_LEARNERS`` of the task's ``calibrate.py``, or None when it defines none."""
    path = directory / CALIBRATE_FILE
    if not path.is_file():
        return None
    from pytest_weirdml.tasks import import_file

    module = import_file(f"_weirdml_calibrate_{directory.name}", path)
    learners = getattr(module, "GENERIC_LEARNERS", None)
    if learners is None:
        return None
    if not isinstance(learners, Mapping) or not all(callable(f) for f in learners.values()):
        raise TaskError(f"{path}: GENERIC_LEARNERS must map names to functions (public: Path, work: float)")
    return learners


def measure(directory: Path, samples: Samples, public: Path, work: float) -> tuple[str, dict[str, float]]:
    """Every generic learner's test accuracy at ``work``, and where the learners came from."""
    own = task_learners(directory)
    answers = samples.answers
    scores: dict[str, float] = {}
    if own is not None:
        for name, learner in own.items():
            preds = np.asarray(learner(public, work))
            scores[name] = (
                float(np.mean(preds.reshape(answers.shape) == answers)) if preds.size == answers.size else 0.0
            )
        return f"{CALIBRATE_FILE} GENERIC_LEARNERS", scores
    for name, learn in builtin_learners(samples).items():
        scores[name] = float(np.mean(learn(work) == answers))
    return "the checker's own (no GENERIC_LEARNERS in calibrate.py)", scores
