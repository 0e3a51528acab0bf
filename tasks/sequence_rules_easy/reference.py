"""sequence_rules_easy reference: test each sequence against candidate rules, then boost trees on the tests.

Raw values hide the rules: the families differ in arithmetic, not in size or shape. So every
sequence is described by how often candidate rules hold along it, as fractions that a single
disturbed term only dents: steps that repeat with period 1 to 4, constant second and third
differences, a constant ratio, steps divisible by 2 to 10, terms that are primes and primes that
follow each other, steps equal to the digit sum of the term before, terms sharing one digit sum;
plus a few scale-free summaries of the steps. Gradient-boosted trees learn which pattern of rule
fractions marks which family; a held-out part of the training set reports the accuracy.

The reference of data version 1 of sequence_rules (commit 7dd2970's parent), unchanged but for this
docstring. It does a fixed amount of work (a few seconds), so it needs no time budget.
"""

from __future__ import annotations

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

# A prime sieve over the whole range of values; prime_count[v] is the number of primes <= v.
limit = int(max(np.abs(x_train).max(), np.abs(x_test).max())) + 2
is_prime = np.ones(limit + 1, dtype=bool)
is_prime[:2] = False
for p in range(2, int(limit**0.5) + 1):
    if is_prime[p]:
        is_prime[p * p :: p] = False
prime_count = np.cumsum(is_prime)


def digit_sums(x: np.ndarray) -> np.ndarray:
    x = np.abs(x)
    total = np.zeros_like(x)
    while np.any(x):
        total += x % 10
        x = x // 10
    return total


def features(x: np.ndarray) -> np.ndarray:
    """One row of rule fractions and step summaries per sequence."""
    d1 = np.diff(x, axis=1)
    d2 = np.diff(d1, axis=1)
    d3 = np.diff(d2, axis=1)
    cols = [np.mean(d1[:, p:] == d1[:, :-p], axis=1) for p in (1, 2, 3, 4, 5, 6)]
    cols.append(np.mean(d2 == np.median(d2, axis=1, keepdims=True), axis=1))
    cols.append(np.mean(d3 == 0, axis=1))
    # A constant ratio leaves only rounding between a term and the ratio times the one before.
    ratio = np.median(x[:, 1:] / np.where(x[:, :-1] == 0, 1, x[:, :-1]), axis=1, keepdims=True)
    cols.append(np.mean(np.abs(x[:, 1:] - ratio * x[:, :-1]) <= 1.5, axis=1))
    cols.append(np.log(np.abs(ratio[:, 0] - 1) + 1e-6))
    cols += [np.mean(d1 % m == 0, axis=1) for m in range(2, 11)]
    inside = np.clip(np.abs(x), 0, limit)
    prime = is_prime[inside]
    cols.append(prime.mean(axis=1))
    # Neighbouring primes: both prime and no prime between them.
    gap = np.abs(np.diff(prime_count[inside], axis=1))
    cols.append(np.mean(prime[:, 1:] & prime[:, :-1] & (gap == 1), axis=1))
    ds = digit_sums(x)
    cols.append(np.mean(np.abs(d1) == ds[:, :-1], axis=1))
    mode = np.array([np.bincount(row).argmax() for row in ds])
    cols.append(np.mean(ds == mode[:, None], axis=1))
    scale = np.abs(d1).mean(axis=1) + 1e-9
    cols += [d1.std(axis=1) / scale, np.abs(d2).mean(axis=1) / scale, np.log(scale / np.abs(x).mean(axis=1))]
    cols.append(np.mean(np.sign(d1) == np.sign(d1.sum(axis=1, keepdims=True)), axis=1))
    return np.stack(cols, axis=1)


f_train, f_test = features(x_train), features(x_test)
print(f"{f_train.shape[1]} features per sequence, {time.time() - START:.1f}s")
rng = np.random.default_rng(0)
perm = rng.permutation(len(y_train))
held, fit = perm[: len(perm) // 5], perm[len(perm) // 5 :]


def model() -> HistGradientBoostingClassifier:
    return HistGradientBoostingClassifier(max_iter=200, learning_rate=0.1, max_leaf_nodes=15, random_state=0)


held_acc = np.mean(model().fit(f_train[fit], y_train[fit]).predict(f_train[held]) == y_train[held])
print(f"held-out accuracy {held_acc:.3f}, {time.time() - START:.1f}s")
preds = model().fit(f_train, y_train).predict(f_test).astype(np.int64)
os.makedirs("results", exist_ok=True)
np.savetxt("results/test_preds.txt", preds, fmt="%d")
print(f"wrote {len(preds)} predictions, classes {np.bincount(preds, minlength=8).tolist()}, {time.time() - START:.1f}s")
