"""2-D point clouds that each hold the outline of one of five shapes, plus noise.

One builder serves both shape tasks: ``build(out, seed)`` for shapes_easy and
``build(out, seed, hard=True)`` for shapes_hard. It follows the published example plots of the
two tasks:

- easy: every shape is centred at (0.5, 0.5) with one size and one orientation per class (the
  pentagon and the star point a vertex to the right, the triangle points up, the square is
  axis-aligned); circle radius 0.3, square side 0.6, triangle side 0.5, pentagon and star
  circumradius 0.4. Every point lies inside the unit square.
- hard: the same outlines with a random size (0.25 to 1.5 times the easy size), position and
  rotation; the part of the outline outside the unit square is cut away, and clumps and bands of
  noise may reach up to 0.3 outside it.

Every sample holds 512 points in random order. Most lie on the outline (55% to 98% of them),
spread unevenly along it: a uniform share plus a few dense runs, and sometimes only one stretch
of the outline carries points; each sample's outline has its own small jitter. The rest is noise:
a uniform background, often with a dense rectangle, clumps or thin straight bands of points.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

N_TRAIN = 1000
N_TEST = 1000
N_POINTS = 512
CLASSES = ("circle", "square", "triangle", "pentagon", "star")
STAR_INNER = 0.41  # inner/outer radius of the star, read off the published examples
# Circumradius of each class in shapes_easy, read off the published examples (the square's is
# not shown there: a side of 0.6 spans the same 0.2..0.8 as the circle).
EASY_RADIUS = (0.3, 0.3 * np.sqrt(2), 0.5 / np.sqrt(3), 0.4, 0.4)
HARD_SCALE = (0.25, 1.5)  # shapes_hard: the easy size times a log-uniform factor in this range
MIN_VISIBLE = 0.5  # shapes_hard: at least this share of the outline lies inside the unit square
SHAPE_FRACTION = (0.55, 0.98)  # share of a sample's points on the outline
PARTIAL = 0.2  # chance that only one stretch of the outline carries points
JITTER = (0.002, 0.02)  # range of the outline jitter's standard deviation (log-uniform)
OUTSIDE = 0.3  # shapes_hard: how far beyond [0, 1] clumps and bands of noise may reach
# Chance that a sample's noise holds each kind of structure besides the uniform background.
STRUCTURES = {"rectangle": 0.2, "clumps": 0.3, "bands": 0.3}


def _vertices(label: int) -> np.ndarray:
    """Closed outline with circumradius 1 in the published orientation, as (n + 1, 2)."""
    if label == 0:
        n, radii, start = 360, np.ones(360), 0.0
    elif label == 4:
        n, radii, start = 10, np.tile([1.0, STAR_INNER], 5), 0.0
    else:
        n = {1: 4, 2: 3, 3: 5}[label]
        radii = np.ones(n)
        # The square is axis-aligned, the triangle points up, the pentagon points right.
        start = {1: np.pi / 4, 2: np.pi / 2, 3: 0.0}[label]
    angles = start + 2 * np.pi * np.arange(n + 1) / n
    return np.stack([np.cos(angles), np.sin(angles)], axis=1) * np.append(radii, radii[0])[:, None]


def _arc_lengths(verts: np.ndarray) -> np.ndarray:
    """Cumulative length along the outline at each vertex, normalised to end at 1."""
    steps = np.linalg.norm(np.diff(verts, axis=0), axis=1)
    cum = np.concatenate([[0.0], np.cumsum(steps)])
    return cum / cum[-1]


OUTLINES = tuple(_vertices(label) for label in range(len(CLASSES)))
ARCS = tuple(_arc_lengths(v) for v in OUTLINES)


def _on_outline(label: int, t: np.ndarray) -> np.ndarray:
    """Points at arc-length fractions ``t`` of the unit outline (uniform ``t``: uniform on it)."""
    verts, arcs = OUTLINES[label], ARCS[label]
    t = np.mod(t, 1.0)
    i = np.clip(np.searchsorted(arcs, t, side="right") - 1, 0, len(verts) - 2)
    frac = ((t - arcs[i]) / (arcs[i + 1] - arcs[i]))[:, None]
    return verts[i] * (1 - frac) + verts[i + 1] * frac


def _outline_t(rng: np.random.Generator, n: int) -> np.ndarray:
    """``n`` arc-length fractions: a uniform share plus dense runs, maybe on one stretch only."""
    start, length = (rng.random(), rng.uniform(0.15, 0.6)) if rng.random() < PARTIAL else (0.0, 1.0)
    n_runs = int(rng.integers(1, 5))
    centres = start + rng.random(n_runs) * length
    widths = np.exp(rng.uniform(np.log(0.01), np.log(0.15), size=n_runs))
    weights = rng.dirichlet(np.ones(n_runs))
    t = start + rng.random(n) * length
    in_run = rng.random(n) >= rng.uniform(0.2, 1.0)
    run = rng.choice(n_runs, size=n, p=weights)
    t_run = centres[run] + widths[run] * rng.standard_normal(n)
    # A run spilling over the end of a partial stretch is folded back into it.
    if length < 1.0:
        t_run = start + np.abs(np.mod(t_run - start + length, 2 * length) - length)
    return np.mod(np.where(in_run, t_run, t), 1.0)


def _inside(p: np.ndarray, margin: float = 0.0) -> np.ndarray:
    return np.all((p >= -margin) & (p <= 1.0 + margin), axis=1)


def _structure(rng: np.random.Generator, kind: str, hard: bool) -> tuple[np.ndarray, np.ndarray]:
    """(centre, 2x2 spread) of one structure: points are centre + uniform or normal draws @ spread."""
    if kind == "rectangle":
        size = rng.uniform(0.1, 0.6, size=2)
        return rng.uniform(size / 2, 1 - size / 2), np.diag(size)
    # In shapes_hard a clump or band may sit on the border and reach beyond it.
    centre = rng.uniform(-0.1, 1.1, size=2) if hard else rng.random(2)
    if kind == "clumps":
        return centre, np.eye(2) * rng.uniform(0.01, 0.06)
    # A band: a long thin strip, more often along an axis than not.
    angle = rng.choice([0.0, np.pi / 2]) if rng.random() < 0.6 else rng.uniform(0, np.pi)
    along = np.array([np.cos(angle), np.sin(angle)])
    across = np.array([-along[1], along[0]])
    return centre, np.stack([along * rng.uniform(0.1, 0.6), across * rng.uniform(0.002, 0.02)])


def _noise(rng: np.random.Generator, n: int, hard: bool) -> np.ndarray:
    """Uniform background plus the sample's structures; hard lets clumps and bands reach outside."""
    kinds = [kind for kind, p in STRUCTURES.items() if rng.random() < p]
    parts: list[tuple[str, np.ndarray, np.ndarray]] = [("uniform", np.full(2, 0.5), np.eye(2))]
    for kind in kinds:
        for _ in range(1 if kind == "rectangle" else int(rng.integers(1, 4))):
            parts.append((kind, *_structure(rng, kind, hard)))
    sizes = rng.multinomial(n, rng.dirichlet(np.ones(len(parts))))
    pieces = []
    for (kind, centre, spread), size in zip(parts, sizes, strict=True):
        margin = OUTSIDE if hard and kind in ("clumps", "bands") else 0.0
        kept = np.empty((0, 2))
        for _ in range(20):
            if len(kept) >= size:
                break
            if kind == "clumps":
                draw = rng.standard_normal((2 * size + 8, 2))
            elif kind == "bands":
                draw = np.stack([rng.uniform(-0.5, 0.5, 2 * size + 8), rng.standard_normal(2 * size + 8)], axis=1)
            else:
                draw = rng.uniform(-0.5, 0.5, (2 * size + 8, 2))
            batch = centre + draw @ spread
            kept = np.concatenate([kept, batch[_inside(batch, margin)]])
        if len(kept) < size:
            # A structure that barely touches the square: its points join the background.
            kept = np.concatenate([kept, rng.random((size - len(kept), 2))])
        pieces.append(kept[:size])
    return np.concatenate(pieces)


def _placement(rng: np.random.Generator, label: int, hard: bool) -> tuple[float, np.ndarray, float]:
    """Circumradius, centre and rotation of the shape."""
    if not hard:
        return float(EASY_RADIUS[label]), np.array([0.5, 0.5]), 0.0
    scale = float(np.exp(rng.uniform(*np.log(HARD_SCALE))))
    return float(EASY_RADIUS[label]) * scale, rng.random(2), float(rng.uniform(0, 2 * np.pi))


def _sample(rng: np.random.Generator, label: int, hard: bool) -> np.ndarray:
    n_shape = round(N_POINTS * rng.uniform(*SHAPE_FRACTION))
    while True:
        radius, centre, angle = _placement(rng, label, hard)
        rot = np.array([[np.cos(angle), np.sin(angle)], [-np.sin(angle), np.cos(angle)]])
        if hard:
            # Reject placements that leave too little of the outline inside the square.
            probe = _on_outline(label, np.arange(400) / 400) * radius @ rot + centre
            if _inside(probe).mean() < MIN_VISIBLE:
                continue
        got = np.empty((0, 2))
        for _ in range(8):
            clean = _on_outline(label, _outline_t(rng, 2 * n_shape)) * radius @ rot + centre
            got = np.concatenate([got, clean[_inside(clean)]])
            if len(got) >= n_shape:
                break
        if len(got) >= n_shape:
            break
    jitter = float(np.exp(rng.uniform(*np.log(JITTER))))
    shape = got[:n_shape] + rng.normal(0.0, jitter, size=(n_shape, 2))
    if not hard:
        shape = np.clip(shape, 0.0, 1.0)
    points = np.concatenate([shape, _noise(rng, N_POINTS - n_shape, hard)])
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
