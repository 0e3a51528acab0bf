"""sequence_rules reference: find the subset of terms a rule explains, then boost trees on what was found.

Each sequence is the sorted union of a labelled run of 7 or 8 terms and a shorter distractor run,
each made by one of eight rules. The merged steps follow no rule, so the reference tries every
subset of 7 or 8 of the 12 terms (1287 subsets, kept in order) against each rule's exact test:
constant steps, steps in a cycle of two or three, constant second differences, steps equal to the
digit sum or the last digit of the term before plus a constant, steps that add the two before, and
steps that are multiples of one modulus. For every rule and subset size it records whether some
subset passes and how many do; gradient-boosted trees learn from those 32 numbers which rule
labelled the sequence (a subset that passes one rule may pass a looser one too). A held-out part
of the training set reports the accuracy.
"""

from __future__ import annotations

import itertools
import os
import time

# Threads that spin on cores other processes are using slow the trees several-fold; set before
# scikit-learn starts its thread pool.
CORES = len(os.sched_getaffinity(0))
os.environ.setdefault("OMP_NUM_THREADS", str(CORES if os.getloadavg()[0] < CORES else 1))

import numpy as np  # noqa: E402
from sklearn.ensemble import HistGradientBoostingClassifier  # noqa: E402

START = time.time()
x_train = np.load("data/train_data.npy").astype(np.int64)
y_train = np.load("data/train_labels.npy").astype(np.int64)
x_test = np.load("data/test_data.npy").astype(np.int64)
print(f"train {x_train.shape}, test {x_test.shape}, threads {os.environ['OMP_NUM_THREADS']} of {CORES} cores")
LENGTH = x_train.shape[1]
RUN = 6
N_RULES = 8


def digit_sums(x: np.ndarray) -> np.ndarray:
    x = np.abs(x)
    total = np.zeros_like(x)
    while np.any(x):
        total += x % 10
        x = x // 10
    return total


def constant(a: np.ndarray) -> np.ndarray:
    return np.all(a == a[..., :1], axis=-1)


def rules(sub: np.ndarray, ds: np.ndarray) -> list[np.ndarray]:
    """Whether each run in ``sub`` (..., k terms) passes each rule's exact test."""
    d = np.diff(sub, axis=-1)
    d2 = np.diff(d, axis=-1)
    same = constant(d)
    return [
        same,
        np.all(d[..., 2:] == d[..., :-2], axis=-1) & ~same,
        np.all(d[..., 3:] == d[..., :-3], axis=-1) & ~np.all(d[..., 2:] == d[..., :-2], axis=-1),
        constant(d2) & (d2[..., 0] != 0),
        constant(d - ds[..., :-1]),
        constant(d[..., 2:] - d[..., 1:-1] - d[..., :-2]) & ~same,
        constant(d - sub[..., :-1] % 10),
        np.any([np.all(d % m == 0, axis=-1) & np.all(d <= 4 * m, axis=-1) for m in range(7, 14)], axis=0),
    ]


def features(x: np.ndarray, chunk: int = 200) -> np.ndarray:
    """Per rule: whether some split passes it on the first term's side, how many do, and with the rest too."""
    ds_all = digit_sums(x)
    side = np.array([(0, *rest) for rest in itertools.combinations(range(1, LENGTH), RUN - 1)])
    others = np.array([[i for i in range(LENGTH) if i not in row] for row in side])
    out = []
    for lo in range(0, len(x), chunk):
        xs, ds = x[lo : lo + chunk], ds_all[lo : lo + chunk]
        passed = np.stack(rules(xs[:, side], ds[:, side]), axis=-1)  # (n, splits, rules)
        rest = np.any(rules(xs[:, others], ds[:, others]), axis=0)[..., None]  # (n, splits, 1)
        both = passed & rest
        cols = [passed.any(axis=1), np.log1p(passed.sum(axis=1)), both.any(axis=1), np.log1p(both.sum(axis=1))]
        out.append(np.concatenate(cols, axis=1).astype(np.float64))
    return np.concatenate(out)


f_train, f_test = features(x_train), features(x_test)
print(f"{f_train.shape[1]} features per sequence, {time.time() - START:.1f}s")
rng = np.random.default_rng(0)
perm = rng.permutation(len(y_train))
held, fit = perm[: len(perm) // 5], perm[len(perm) // 5 :]


def model() -> HistGradientBoostingClassifier:
    return HistGradientBoostingClassifier(max_iter=150, learning_rate=0.1, max_leaf_nodes=15, random_state=0)


held_acc = np.mean(model().fit(f_train[fit], y_train[fit]).predict(f_train[held]) == y_train[held])
print(f"held-out accuracy {held_acc:.3f}, {time.time() - START:.1f}s")
preds = model().fit(f_train, y_train).predict(f_test).astype(np.int64)
os.makedirs("results", exist_ok=True)
np.savetxt("results/test_preds.txt", preds, fmt="%d")
print(f"wrote {len(preds)} predictions, classes {np.bincount(preds, minlength=8).tolist()}, {time.time() - START:.1f}s")
