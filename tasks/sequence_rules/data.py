"""Short integer sequences, each made by one of eight hidden rule families; the label is the family.

Every sequence has 12 terms and runs upwards or downwards (even odds). Each is made upwards from
a start drawn log-uniformly in [500, 30000] (families 2 and 3 start lower) and reversed to run
downwards, except the digit-sum walk, which walks down from its start. Each family draws its own
parameters per sequence:

0. random walk: independent steps from a range drawn per sequence;
1. periodic steps: the steps repeat a pattern of 3 to 6 values drawn from such a range;
2. quadratic: constant second differences;
3. geometric: ``round(x0 * r**i)``;
4. residue walk: steps from such a range rounded to multiples of a modulus m in 3..9, so every
   term leaves the same remainder modulo m;
5. consecutive primes;
6. digit-sum walk: ``x[i] = x[i-1] + s * digitsum(x[i-1])``;
7. equal digit sums: numbers that all have the digit sum of the start, picked at random from a
   window above it and kept in order (their steps are multiples of 9).

The steps of every family are of similar sizes (a few units to a few tens), so the sequences look
alike as raw numbers: what tells them apart is arithmetic (differences, ratios, remainders,
primality, digit sums). Noise: half of the sequences have one term moved by 1 to 3.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

LENGTH = 12
N_TRAIN = 1600
N_TEST = 1000
FAMILIES = (
    "random_walk",
    "periodic_steps",
    "quadratic",
    "geometric",
    "residue_walk",
    "consecutive_primes",
    "digit_sum_walk",
    "equal_digit_sums",
)
START = (500.0, 30000.0)  # log-uniform start of every sequence
STEP_LOW = (1, 20)  # the smallest step of a sequence's step range
STEP_WIDTH = (10, 30)  # the width of the step range
PERIOD = (3, 6)  # length of the repeating pattern of steps
GROWTH = (1.3, 3.0)  # how much the steps of the growing families grow along a sequence
NOISE_SHARE = 0.5  # share of sequences with one disturbed term
NOISE_SIZE = 3  # largest disturbance
_PRIME_LIMIT = 40000


def _primes(limit: int) -> np.ndarray:
    sieve = np.ones(limit + 1, dtype=bool)
    sieve[:2] = False
    for p in range(2, int(limit**0.5) + 1):
        if sieve[p]:
            sieve[p * p :: p] = False
    return np.flatnonzero(sieve)


PRIMES = _primes(_PRIME_LIMIT)


def digit_sums(x: np.ndarray) -> np.ndarray:
    """Decimal digit sums of non-negative integers."""
    x = np.asarray(x, dtype=np.int64).copy()
    total = np.zeros_like(x)
    while np.any(x):
        total += x % 10
        x //= 10
    return total


def _start(rng: np.random.Generator) -> int:
    return int(np.exp(rng.uniform(*np.log(START))))


def _steps(rng: np.random.Generator, n: int) -> np.ndarray:
    """Positive steps from a range drawn per sequence; every family's steps are of this size."""
    lo = int(rng.integers(STEP_LOW[0], STEP_LOW[1] + 1))
    return rng.integers(lo, lo + int(rng.integers(STEP_WIDTH[0], STEP_WIDTH[1] + 1)) + 1, size=n)


def _walk(start: int, steps: np.ndarray) -> np.ndarray:
    return start + np.concatenate([[0], np.cumsum(steps)])


def _rising(rng: np.random.Generator, family: int) -> np.ndarray:
    """One sequence of the family, before its direction is chosen."""
    i = np.arange(LENGTH)
    n = LENGTH - 1
    x0 = _start(rng)
    if family == 1:
        return _walk(x0, np.resize(_steps(rng, int(rng.integers(PERIOD[0], PERIOD[1] + 1))), n))
    if family in (2, 3):
        # Both grow: their steps start at the usual size and grow by a factor of 1.3 to 3 along
        # the sequence, linearly (quadratic) or geometrically; both start where a geometric
        # sequence with such steps must (below the others). Only differences or ratios tell them apart.
        growth = float(np.exp(rng.uniform(*np.log(GROWTH))))
        step = float(_steps(rng, 1)[0])
        r = growth ** (1 / (n - 1))
        x0 = max(round(step / (r - 1)), 2)
        if family == 3:
            return np.round(x0 * r**i).astype(np.int64)
        bend = max(round((growth - 1) * step / (n - 1)), 1)  # the constant second difference
        return x0 + round(step) * i + bend * i * (i - 1) // 2
    if family == 4:
        m = int(rng.integers(3, 10))
        return _walk(x0, m * np.maximum(np.round(_steps(rng, n) / m), 1).astype(np.int64))
    if family == 5:
        k = int(np.searchsorted(PRIMES, x0))
        return PRIMES[k : k + LENGTH].copy()
    if family == 6:
        x = [x0]
        while len(x) < LENGTH:
            x.append(x[-1] + int(digit_sums(np.array([x[-1]]))[0]))
        return np.array(x)
    if family == 7:
        # Keep 12 of the first 12 to 36 numbers above the start with its digit sum, so the steps
        # are 9 or a few times 9. A rare digit sum (10000 has 1) may leave too few: start again.
        window = np.arange(x0, x0 + 4000)
        candidates = window[digit_sums(window) == digit_sums(window[:1])[0]]
        if len(candidates) < 3 * LENGTH:
            return _rising(rng, family)
        candidates = candidates[: int(rng.integers(LENGTH, 3 * LENGTH + 1))]
        return np.sort(rng.choice(candidates, size=LENGTH, replace=False))
    return _walk(x0, _steps(rng, n))


def _sequence(rng: np.random.Generator, family: int) -> np.ndarray:
    x = _rising(rng, family)
    if rng.random() < 0.5:
        return x
    if family == 6:
        # Walking down subtracts the digit sum of the current term, which is not the rising run reversed.
        down = [int(x[0])]
        while len(down) < LENGTH:
            down.append(down[-1] - int(digit_sums(np.array([down[-1]]))[0]))
        return np.array(down)
    # Every other rule still holds when the sequence is read backwards.
    return x[::-1].copy()


def sequences(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` sequences with exactly balanced families in random order, and their families."""
    labels = rng.permutation(np.arange(n) % len(FAMILIES))
    rows = np.stack([_sequence(rng, int(f)) for f in labels]).astype(np.int64)
    noisy = np.flatnonzero(rng.random(n) < NOISE_SHARE)
    where = rng.integers(0, LENGTH, size=len(noisy))
    size = rng.integers(1, NOISE_SIZE + 1, size=len(noisy)) * rng.choice([-1, 1], size=len(noisy))
    rows[noisy, where] += size
    return rows, labels.astype(np.int64)


def build(out: Path, seed: int, *, n_train: int = N_TRAIN, n_test: int = N_TEST) -> np.ndarray:
    """Write train_data.npy, train_labels.npy and test_data.npy; return the test labels."""
    train_seq, test_seq = np.random.SeedSequence([seed, 0x5E9]).spawn(2)
    train_x, train_y = sequences(np.random.default_rng(train_seq), n_train)
    test_x, test_y = sequences(np.random.default_rng(test_seq), n_test)
    np.save(out / "train_data.npy", train_x, allow_pickle=False)
    np.save(out / "train_labels.npy", train_y, allow_pickle=False)
    np.save(out / "test_data.npy", test_x, allow_pickle=False)
    return test_y
