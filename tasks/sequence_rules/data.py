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

``build(..., version=1)`` makes data version 1 instead (the task sequence_rules_easy): every
sequence is made by one rule alone, all 12 terms, upwards or downwards, and half of the sequences
have one term moved by 1 to 3. Its eight rule families are other than version 2's (below, at
``rising_v1``); seed for seed its files are those that version 1's builder wrote.
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
START = (500.0, 30000.0)  # log-uniform start of the labelled run (version 1: of every sequence)
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


# Data version 1 (sequence_rules_easy): one rule family makes the whole sequence.
#
# Every sequence has 12 terms and runs upwards or downwards (even odds). Each is made upwards from
# a start drawn log-uniformly in [500, 30000] (families 2 and 3 start lower) and reversed to run
# downwards, except the digit-sum walk, which walks down from its start. Each family draws its own
# parameters per sequence:
#
# 0. random walk: independent steps from a range drawn per sequence;
# 1. periodic steps: the steps repeat a pattern of 3 to 6 values drawn from such a range;
# 2. quadratic: constant second differences;
# 3. geometric: ``round(x0 * r**i)``;
# 4. residue walk: steps from such a range rounded to multiples of a modulus m in 3..9, so every
#    term leaves the same remainder modulo m;
# 5. consecutive primes;
# 6. digit-sum walk: ``x[i] = x[i-1] + s * digitsum(x[i-1])``;
# 7. equal digit sums: numbers that all have the digit sum of the start, picked at random from a
#    window above it and kept in order (their steps are multiples of 9).
#
# The steps of every family are of similar sizes (a few units to a few tens), so the sequences look
# alike as raw numbers: what tells them apart is arithmetic (differences, ratios, remainders,
# primality, digit sums). Noise: half of the sequences have one term moved by 1 to 3.

FAMILIES_V1 = (
    "random_walk",
    "periodic_steps",
    "quadratic",
    "geometric",
    "residue_walk",
    "consecutive_primes",
    "digit_sum_walk",
    "equal_digit_sums",
)
STEP_LOW_V1 = (1, 20)  # the smallest step of a sequence's step range
STEP_WIDTH_V1 = (10, 30)  # the width of the step range
PERIOD_V1 = (3, 6)  # length of the repeating pattern of steps
GROWTH_V1 = (1.3, 3.0)  # how much the steps of the growing families grow along a sequence
NOISE_SHARE_V1 = 0.5  # share of sequences with one disturbed term
NOISE_SIZE_V1 = 3  # largest disturbance
_PRIME_LIMIT_V1 = 40000


def _primes(limit: int) -> np.ndarray:
    sieve = np.ones(limit + 1, dtype=bool)
    sieve[:2] = False
    for p in range(2, int(limit**0.5) + 1):
        if sieve[p]:
            sieve[p * p :: p] = False
    return np.flatnonzero(sieve)


PRIMES_V1 = _primes(_PRIME_LIMIT_V1)


def _steps_v1(rng: np.random.Generator, n: int) -> np.ndarray:
    """Positive steps from a range drawn per sequence; every family's steps are of this size."""
    lo = int(rng.integers(STEP_LOW_V1[0], STEP_LOW_V1[1] + 1))
    return rng.integers(lo, lo + int(rng.integers(STEP_WIDTH_V1[0], STEP_WIDTH_V1[1] + 1)) + 1, size=n)


def rising_v1(rng: np.random.Generator, family: int) -> np.ndarray:
    """One version-1 sequence of the family, before its direction is chosen."""
    i = np.arange(LENGTH)
    n = LENGTH - 1
    x0 = int(np.exp(rng.uniform(*np.log(START))))
    if family == 1:
        return _from_steps(x0, np.resize(_steps_v1(rng, int(rng.integers(PERIOD_V1[0], PERIOD_V1[1] + 1))), n))
    if family in (2, 3):
        # Both grow: their steps start at the usual size and grow by a factor of 1.3 to 3 along
        # the sequence, linearly (quadratic) or geometrically; both start where a geometric
        # sequence with such steps must (below the others). Only differences or ratios tell them apart.
        growth = float(np.exp(rng.uniform(*np.log(GROWTH_V1))))
        step = float(_steps_v1(rng, 1)[0])
        r = growth ** (1 / (n - 1))
        x0 = max(round(step / (r - 1)), 2)
        if family == 3:
            return np.round(x0 * r**i).astype(np.int64)
        bend = max(round((growth - 1) * step / (n - 1)), 1)  # the constant second difference
        return x0 + round(step) * i + bend * i * (i - 1) // 2
    if family == 4:
        m = int(rng.integers(3, 10))
        return _from_steps(x0, m * np.maximum(np.round(_steps_v1(rng, n) / m), 1).astype(np.int64))
    if family == 5:
        k = int(np.searchsorted(PRIMES_V1, x0))
        return PRIMES_V1[k : k + LENGTH].copy()
    if family == 6:
        return _digit_walk(x0, LENGTH, lambda v: int(digit_sums(np.array([v]))[0]))
    if family == 7:
        # Keep 12 of the first 12 to 36 numbers above the start with its digit sum, so the steps
        # are 9 or a few times 9. A rare digit sum (10000 has 1) may leave too few: start again.
        window = np.arange(x0, x0 + 4000)
        candidates = window[digit_sums(window) == digit_sums(window[:1])[0]]
        if len(candidates) < 3 * LENGTH:
            return rising_v1(rng, family)
        candidates = candidates[: int(rng.integers(LENGTH, 3 * LENGTH + 1))]
        return np.sort(rng.choice(candidates, size=LENGTH, replace=False))
    return _from_steps(x0, _steps_v1(rng, n))


def _sequence_v1(rng: np.random.Generator, family: int) -> np.ndarray:
    x = rising_v1(rng, family)
    if rng.random() < 0.5:
        return x
    if family == 6:
        # Walking down subtracts the digit sum of the current term, which is not the rising run reversed.
        return _digit_walk(int(x[0]), LENGTH, lambda v: -int(digit_sums(np.array([v]))[0]))
    # Every other rule still holds when the sequence is read backwards.
    return x[::-1].copy()


def sequences_v1(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` version-1 sequences with exactly balanced families in random order, one term moved
    by 1 to 3 in about ``NOISE_SHARE_V1`` of them, and their families."""
    labels = rng.permutation(np.arange(n) % len(FAMILIES_V1))
    rows = np.stack([_sequence_v1(rng, int(f)) for f in labels]).astype(np.int64)
    noisy = np.flatnonzero(rng.random(n) < NOISE_SHARE_V1)
    where = rng.integers(0, LENGTH, size=len(noisy))
    size = rng.integers(1, NOISE_SIZE_V1 + 1, size=len(noisy)) * rng.choice([-1, 1], size=len(noisy))
    rows[noisy, where] += size
    return rows, labels.astype(np.int64)


# The builder's data versions: how each makes its sequences, and its root seed's last words.
VERSIONS = {1: (sequences_v1, (0x5E9,)), 2: (sequences, (0x5E9, 2))}


def build(out: Path, seed: int, *, version: int = 2, n_train: int = N_TRAIN, n_test: int = N_TEST) -> np.ndarray:
    """Write train_data.npy, train_labels.npy and test_data.npy of data version ``version`` (2:
    sequence_rules, 1: sequence_rules_easy); return the test labels."""
    if version not in VERSIONS:
        raise ValueError(f"data version {version!r}: this builder makes versions {sorted(VERSIONS)}")
    make, words = VERSIONS[version]
    train_seq, test_seq = np.random.SeedSequence([seed, *words]).spawn(2)
    train_x, train_y = make(np.random.default_rng(train_seq), n_train)
    test_x, test_y = make(np.random.default_rng(test_seq), n_test)
    np.save(out / "train_data.npy", train_x, allow_pickle=False)
    np.save(out / "train_labels.npy", train_y, allow_pickle=False)
    np.save(out / "test_data.npy", test_x, allow_pickle=False)
    return test_y
