"""Noisy 2-D point clouds that each hide the outline of one of five shapes.

One builder serves both shape tasks: ``build(out, seed)`` for shapes_easy (every shape centred,
same size and orientation) and ``build(out, seed, hard=True)`` for shapes_hard (random size,
position and rotation; shapes may be cut at the border and jitter carries some points slightly
outside the unit square).

Every sample holds 512 points in random order. A varying fraction lies on the outline, spread very
unevenly along it (dense and sparse runs, sometimes only one or two edges), jittered with a width
drawn per sample; the rest is noise: a uniform background plus, in most samples, clumps or bands.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

N_TRAIN = 1000
N_TEST = 1000
N_POINTS = 512
CLASSES = ("circle", "square", "triangle", "pentagon", "star")
STAR_INNER = 0.4  # inner/outer radius of the star; a regular pentagram would be 0.382
EASY_RADIUS = 0.35  # circumradius of every shape in shapes_easy
HARD_RADIUS = (0.15, 0.45)  # range of the circumradius in shapes_hard (log-uniform)
MIN_VISIBLE = 0.6  # in shapes_hard, at least this fraction of the outline lies inside the square
JITTER = (0.015, 0.08)  # range of the jitter's standard deviation, relative to the circumradius
# Indexed by `hard`. A random pose already hides much of what a fixed pose gives away, so
# shapes_hard gets more points on the outline and fewer outlines cut down to one or two edges.
SHAPE_FRACTION = {False: (0.05, 0.6), True: (0.2, 0.8)}  # share of a sample's points on the outline
PARTIAL = {False: 0.2, True: 0.1}  # chance that only one or two edges (or arcs) carry points
STRUCTURED = 0.7  # chance that part of the noise forms clumps or bands


def _vertices(label: int) -> np.ndarray:
    """Closed outline with circumradius 1, pointing up, as (n + 1, 2) with equal edge lengths."""
    if label == 0:
        n, radii = 360, np.ones(360)
    elif label == 4:
        n, radii = 10, np.tile([1.0, STAR_INNER], 5)
    else:
        n = {1: 4, 2: 3, 3: 5}[label]
        radii = np.ones(n)
    # The square stands on an edge; the others put a vertex at the top.
    start = np.pi / 4 if label == 1 else np.pi / 2
    angles = start + 2 * np.pi * np.arange(n + 1) / n
    return np.stack([np.cos(angles), np.sin(angles)], axis=1) * np.append(radii, radii[0])[:, None]


OUTLINES = tuple(_vertices(label) for label in range(len(CLASSES)))
# Edges a sample may keep when only part of the outline shows; the circle gets arcs of its own.
N_EDGES = (0, 4, 3, 5, 10)


def _on_outline(label: int, t: np.ndarray) -> np.ndarray:
    """Points at arc-length fractions ``t`` in [0, 1) of the unit outline."""
    verts = OUTLINES[label]
    n = len(verts) - 1
    s = np.mod(t, 1.0) * n
    i = np.minimum(s.astype(np.int64), n - 1)
    frac = (s - i)[:, None]
    return verts[i] * (1 - frac) + verts[i + 1] * frac


def _support(rng: np.random.Generator, label: int, hard: bool) -> list[tuple[float, float]]:
    """Intervals of t where this sample's outline points may fall."""
    if rng.random() >= PARTIAL[hard]:
        return [(0.0, 1.0)]
    count = int(rng.integers(1, 3))
    if label == 0:
        starts = rng.random(count)
        return [(float(a), float(a + rng.uniform(0.08, 0.25))) for a in starts]
    n = N_EDGES[label]
    edges = rng.choice(n, size=count, replace=False)
    return [(float(e) / n, float(e + 1) / n) for e in edges]


def _outline_t(rng: np.random.Generator, support: list[tuple[float, float]], n: int) -> np.ndarray:
    """``n`` arc-length fractions: a thin uniform base plus a few dense and sparse runs."""
    lengths = np.array([b - a for a, b in support])
    n_runs = int(rng.integers(1, 6))
    weights = rng.dirichlet(np.full(n_runs, 0.7))
    base = rng.uniform(0.0, 0.4)
    # Each run sits inside one interval of the support and covers part of it.
    run_interval = rng.choice(len(support), size=n_runs, p=lengths / lengths.sum())
    run_width = lengths[run_interval] * rng.uniform(0.1, 0.6, size=n_runs)
    run_start = np.array([support[k][0] for k in run_interval]) + rng.random(n_runs) * lengths[run_interval]
    from_base = rng.random(n) < base
    pick = rng.choice(n_runs, size=n, p=weights)
    # Inside a run, the density falls off towards its ends.
    t = run_start[pick] + run_width[pick] * rng.beta(1.5, 1.5, size=n)
    k = rng.choice(len(support), size=n, p=lengths / lengths.sum())
    starts = np.array([a for a, _ in support])
    t_base = starts[k] + rng.random(n) * lengths[k]
    return np.mod(np.where(from_base, t_base, t), 1.0)


def _inside(p: np.ndarray) -> np.ndarray:
    return np.all((p >= 0.0) & (p <= 1.0), axis=1)


def _noise(rng: np.random.Generator, n: int) -> np.ndarray:
    """Uniform background, with clumps or bands in most samples; all inside the unit square."""
    n_struct = round(n * rng.uniform(0.15, 0.7)) if rng.random() < STRUCTURED else 0
    pieces = [rng.random((n - n_struct, 2))]
    if n_struct:
        n_groups = int(rng.integers(1, 4))
        sizes = rng.multinomial(n_struct, rng.dirichlet(np.ones(n_groups)))
        for size in sizes:
            pieces.append(_group(rng, int(size)))
    return np.concatenate(pieces)


def _group(rng: np.random.Generator, n: int) -> np.ndarray:
    """One clump (a Gaussian blob) or band (a straight strip across the square) of ``n`` points."""
    kept = np.empty((0, 2))
    if rng.random() < 0.5:
        centre = rng.random(2)
        width = rng.uniform(0.01, 0.07)

        def draw(m: int) -> np.ndarray:
            return centre + rng.normal(0.0, width, size=(m, 2))
    else:
        through = rng.random(2)
        angle = rng.uniform(0, np.pi)
        along = np.array([np.cos(angle), np.sin(angle)])
        across = np.array([-along[1], along[0]])
        width = rng.uniform(0.004, 0.03)
        half = rng.uniform(0.1, 0.8)

        def draw(m: int) -> np.ndarray:
            return (
                through + rng.uniform(-half, half, size=(m, 1)) * along + rng.normal(0.0, width, size=(m, 1)) * across
            )

    while len(kept) < n:
        batch = draw(2 * n + 8)
        kept = np.concatenate([kept, batch[_inside(batch)]])
        if len(kept) == 0:
            # A group centred off the square: fall back to uniform points.
            kept = rng.random((n, 2))
    return kept[:n]


def _placement(rng: np.random.Generator, hard: bool) -> tuple[float, np.ndarray, float]:
    """Circumradius, centre and rotation of the shape."""
    if not hard:
        return EASY_RADIUS, np.array([0.5, 0.5]), 0.0
    radius = float(np.exp(rng.uniform(*np.log(HARD_RADIUS))))
    centre = rng.uniform(-0.05, 1.05, size=2)
    return radius, centre, float(rng.uniform(0, 2 * np.pi))


def _sample(rng: np.random.Generator, label: int, hard: bool) -> np.ndarray:
    n_shape = round(N_POINTS * rng.uniform(*SHAPE_FRACTION[hard]))
    while True:
        radius, centre, angle = _placement(rng, hard)
        rot = np.array([[np.cos(angle), np.sin(angle)], [-np.sin(angle), np.cos(angle)]])
        if hard:
            # Reject placements that leave too little of the outline inside the square.
            probe = _on_outline(label, np.arange(400) / 400) * radius @ rot + centre
            if _inside(probe).mean() < MIN_VISIBLE:
                continue
        support = _support(rng, label, hard)
        got = np.empty((0, 2))
        for _ in range(8):
            clean = _on_outline(label, _outline_t(rng, support, 2 * n_shape)) * radius @ rot + centre
            got = np.concatenate([got, clean[_inside(clean)]])
            if len(got) >= n_shape:
                break
        if len(got) >= n_shape:
            break
    # Jitter after cutting, so points near a cut edge may stray slightly outside the square.
    jitter = radius * np.exp(rng.uniform(*np.log(JITTER)))
    shape = got[:n_shape] + rng.normal(0.0, jitter, size=(n_shape, 2))
    if not hard:
        shape = np.clip(shape, 0.0, 1.0)
    points = np.concatenate([shape, _noise(rng, N_POINTS - n_shape)])
    return points[rng.permutation(N_POINTS)]


def _split(rng: np.random.Generator, n: int, hard: bool) -> tuple[np.ndarray, np.ndarray]:
    labels = rng.permutation(np.arange(n) % len(CLASSES))
    data = np.stack([_sample(rng, int(label), hard) for label in labels])
    return data.astype(np.float32), labels.astype(np.int64)


def build(out: Path, seed: int, *, hard: bool = False) -> np.ndarray:
    """Write train_data.npy, train_flags.npy and test_data.npy; return the test labels."""
    train_seq, test_seq = np.random.SeedSequence([seed, int(hard)]).spawn(2)
    train_x, train_y = _split(np.random.default_rng(train_seq), N_TRAIN, hard)
    test_x, test_y = _split(np.random.default_rng(test_seq), N_TEST, hard)
    np.save(out / "train_data.npy", train_x, allow_pickle=False)
    np.save(out / "train_flags.npy", train_y, allow_pickle=False)
    np.save(out / "test_data.npy", test_x, allow_pickle=False)
    return test_y
