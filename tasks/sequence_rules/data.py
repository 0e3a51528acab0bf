"""Short integer sequences, each the merge of two rule-made runs; the label is the rule of one of them.

Every sequence holds 12 distinct integers in increasing order: the union of two runs of 6 terms.
The labelled run is made by the sequence's rule; the distractor run by a rule drawn independently
from the same eight, so every family of sequences carries every rule's structure somewhere. The
distractor starts above the labelled run's first term, within half the labelled run's width, so
the two interleave once sorted and the smallest term is the labelled run's. Which terms belong to
which run is hidden: the merged steps look irregular in every family, and a rule holds only along
the right subset.

The eight rules, each with parameters drawn per run, all make increasing runs whose steps are a
few units to a few tens:

0. constant steps;
1. two steps taken in turn;
2. three steps taken in turn;
3. steps that grow or shrink by a constant amount (constant second differences);
4. each step is the digit sum of the term before plus a constant;
5. each step is the sum of the two steps before it less a constant;
6. each step is the last digit of the term before plus a constant;
7. steps that are random multiples (1 to 4) of a modulus in 7..13, so every term leaves the
   same remainder.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

LENGTH = 12
N_TRAIN = 1600
N_TEST = 1000
FAMILIES = (
    "constant_steps",
    "two_step_cycle",
    "three_step_cycle",
    "constant_second_difference",
    "digit_sum_steps",
    "fibonacci_steps",
    "last_digit_steps",
    "residue_steps",
)
START = (500.0, 30000.0)  # log-uniform start of the labelled run
RUN = 6  # terms of the labelled run; the distractor has the other 6
MODULI = (7, 13)


def digit_sums(x: np.ndarray) -> np.ndarray:
    """Decimal digit sums of non-negative integers."""
    x = np.asarray(x, dtype=np.int64).copy()
    total = np.zeros_like(x)
    while np.any(x):
        total += x % 10
        x //= 10
    return total


def _from_steps(x0: int, steps: np.ndarray) -> np.ndarray:
    return x0 + np.concatenate([[0], np.cumsum(steps)]).astype(np.int64)


def _digit_walk(x0: int, n: int, step) -> np.ndarray:  # type: ignore[no-untyped-def]
    x = [x0]
    while len(x) < n:
        x.append(x[-1] + step(x[-1]))
    return np.array(x, dtype=np.int64)


def run(rng: np.random.Generator, family: int, x0: int, n: int) -> np.ndarray:
    """``n`` increasing terms from ``x0`` made by one rule with parameters drawn here."""
    k = n - 1  # steps
    if family == 0:
        return _from_steps(x0, np.full(k, rng.integers(6, 41)))
    if family == 1:
        a, b = rng.choice(np.arange(4, 46), size=2, replace=False)
        return _from_steps(x0, np.resize([a, b], k))
    if family == 2:
        pattern = rng.integers(4, 46, size=3)
        while len(set(pattern.tolist())) < 3:
            pattern = rng.integers(4, 46, size=3)
        return _from_steps(x0, np.resize(pattern, k))
    if family == 3:
        c = int(rng.integers(1, 7)) * int(rng.choice([-1, 1]))
        span = abs(c) * (k - 1)
        first = int(rng.integers(4, 60 - span + 1)) if c > 0 else int(rng.integers(4 + span, 61))
        return _from_steps(x0, first + c * np.arange(k))
    if family in (4, 6):
        # Some constants make the walk take one step over and over (a last digit that never changes)
        # or only multiples of 9 (a digit-sum walk from a term that leaves -c modulo 9): another
        # rule's run. Draw the constant again.
        while True:
            if family == 4:
                c = int(rng.integers(0, 16))
                x = _digit_walk(x0, n, lambda v, c=c: int(digit_sums(np.array([v]))[0]) + c)
            else:
                c = int(rng.integers(3, 31))
                x = _digit_walk(x0, n, lambda v, c=c: v % 10 + c)
            steps = np.diff(x)
            if len(set(steps.tolist())) > 1 and not np.all(steps % 9 == 0):
                return x
    if family == 5:
        # Each step adds the two before less a constant, which keeps the steps from growing fast.
        while True:
            steps = [int(rng.integers(4, 46)), int(rng.integers(4, 46))]
            c = int(rng.integers(1, 46))
            while len(steps) < k:
                steps.append(steps[-1] + steps[-2] - c)
            if min(steps) >= 3 and max(steps) <= 60 and len(set(steps)) > 1:
                return _from_steps(x0, np.array(steps))
    m = int(rng.integers(MODULI[0], MODULI[1] + 1))
    return _from_steps(x0, m * rng.integers(1, 5, size=k))


def _sequence(rng: np.random.Generator, family: int) -> np.ndarray:
    while True:
        x0 = int(np.exp(rng.uniform(*np.log(START))))
        labelled = run(rng, family, x0, RUN)
        # The distractor starts above the labelled run's first term, within half its width, so
        # the two interleave once sorted and the smallest term is always the labelled run's.
        width = int(labelled[-1] - x0)
        start = x0 + int(rng.integers(1, max(width // 2, 1) + 1))
        other = run(rng, int(rng.integers(len(FAMILIES))), start, LENGTH - RUN)
        merged = np.union1d(labelled, other)
        if len(merged) == LENGTH:  # a shared term: draw again
            return merged


def sequences(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` sequences with exactly balanced families in random order, and their families."""
    labels = rng.permutation(np.arange(n) % len(FAMILIES))
    rows = np.stack([_sequence(rng, int(f)) for f in labels]).astype(np.int64)
    return rows, labels.astype(np.int64)


def build(out: Path, seed: int, *, n_train: int = N_TRAIN, n_test: int = N_TEST) -> np.ndarray:
    """Write train_data.npy, train_labels.npy and test_data.npy; return the test labels."""
    train_seq, test_seq = np.random.SeedSequence([seed, 0x5E9, 2]).spawn(2)
    train_x, train_y = sequences(np.random.default_rng(train_seq), n_train)
    test_x, test_y = sequences(np.random.default_rng(test_seq), n_test)
    np.save(out / "train_data.npy", train_x, allow_pickle=False)
    np.save(out / "train_labels.npy", train_y, allow_pickle=False)
    np.save(out / "test_data.npy", test_x, allow_pickle=False)
    return test_y
