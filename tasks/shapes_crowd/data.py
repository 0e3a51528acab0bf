"""Point clouds of varying size that each hold the outlines of one to three shapes.

Every cloud draws one, two or three shapes of different kinds among the five of the shapes tasks
(circle, square, triangle, pentagon, star), each with its own size, position and rotation; shapes
may overlap. Points fall along each outline at a density drawn per cloud, so bigger shapes and
denser clouds give more points, and unevenly (dense runs, thin stretches and gaps); they scatter
around the exact outline by a width drawn per cloud. Clutter lies as densely along stretches of
outlines of any kind, broken lines and arcs; noise is a uniform background, in many clouds mixed
with Gaussian clumps. The point count therefore varies from cloud to cloud.

The files' order (data version 2): a shape's points are written in the order they lie along its
outline, from a random start and in either direction, in runs of a few points each; the runs sit at
random places among the clutter and noise points, which come one at a time in random order.

Ragged layout, loadable without pickle: ``*_data.npy`` is a float32 (P, 2) array of all points,
cloud after cloud; ``*_offsets.npy`` is an int64 (N + 1,) array, cloud i being
``data[offsets[i]:offsets[i + 1]]``. The answer of a cloud is a row of five 0/1 entries, entry k
saying whether a shape of kind k is present; accuracy is computed over all entries.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

N_TRAIN = 2000
N_TEST = 1000
KINDS = ("circle", "square", "triangle", "pentagon", "star")
N_SHAPES_P = (0.3, 0.35, 0.35)  # chance of one, two or three shapes in a cloud
STAR_INNER = 0.4  # inner/outer radius of the star
RADIUS = (0.12, 0.27)  # circumradius of a shape, log-uniform
MIN_SEPARATION = 0.35  # centres lie at least this times the sum of the two radii apart
DENSITY = (130.0, 320.0)  # outline points per unit of outline length, drawn per cloud
JITTER = (0.01, 0.035)  # scatter around the outline, relative to the circumradius
NOISE = (0.1, 0.7)  # noise points as a share of the outline points
CLUMPED = 0.5  # chance that part of the noise forms clumps
CLUTTER_PIECES = (3, 8)  # pieces of clutter per cloud, inclusive
CLUTTER_KINDS = (0.4, 0.3, 0.3)  # a stretch of an outline, a broken line, an arc
CLUTTER_OUTLINE_SHARE = (0.3, 0.8)  # how much of an outline a stretch of clutter covers
CLUTTER_ARC_SPAN = (1.0, 4.7)  # radians of a clutter arc
RUN = (3, 15)  # outline points per run in the files, inclusive


def _outline(kind: int) -> np.ndarray:
    """Closed outline with circumradius 1 as (n + 1, 2) vertices; the circle is a fine polygon."""
    if kind == 0:
        n, radii = 256, np.ones(256)
    elif kind == 4:
        n, radii = 10, np.tile([1.0, STAR_INNER], 5)
    else:
        n = {1: 4, 2: 3, 3: 5}[kind]
        radii = np.ones(n)
    angles = np.pi / 2 + 2 * np.pi * np.arange(n + 1) / n
    return np.stack([np.cos(angles), np.sin(angles)], axis=1) * np.append(radii, radii[0])[:, None]


OUTLINES = tuple(_outline(kind) for kind in range(len(KINDS)))
# Cumulative arc length of each outline, normalised to end at 1, and its total length.
_SEG = tuple(np.linalg.norm(np.diff(v, axis=0), axis=1) for v in OUTLINES)
CUMULATIVE = tuple(np.concatenate([[0.0], np.cumsum(s)]) / s.sum() for s in _SEG)
PERIMETER = tuple(float(s.sum()) for s in _SEG)


def _at_arclength(kind: int, t: np.ndarray) -> np.ndarray:
    """Points at arc-length fractions ``t`` in [0, 1) along the unit outline of ``kind``."""
    verts, cum = OUTLINES[kind], CUMULATIVE[kind]
    i = np.clip(np.searchsorted(cum, t, side="right") - 1, 0, len(verts) - 2)
    frac = ((t - cum[i]) / (cum[i + 1] - cum[i]))[:, None]
    return verts[i] * (1 - frac) + verts[i + 1] * frac


def _arclengths(rng: np.random.Generator, n: int) -> np.ndarray:
    """``n`` fractions along an outline: a uniform share plus a few dense runs, minus a gap at times."""
    n_runs = int(rng.integers(1, 5))
    centres = rng.random(n_runs)
    widths = rng.uniform(0.05, 0.3, size=n_runs)
    weights = rng.dirichlet(np.full(n_runs, 1.0))
    uniform = rng.uniform(0.4, 0.9)
    from_runs = rng.random(n) >= uniform
    pick = rng.choice(n_runs, size=n, p=weights)
    t = np.where(from_runs, centres[pick] + widths[pick] * (rng.random(n) - 0.5), rng.random(n))
    t = np.mod(t, 1.0)
    # Gaps: stretches of the outline that carry no points at all.
    keep = np.ones(n, dtype=bool)
    for _ in range(int(rng.integers(0, 2))):
        start, length = rng.random(), rng.uniform(0.03, 0.12)
        keep &= np.mod(t - start, 1.0) > length
    return t[keep]


def _placements(rng: np.random.Generator, count: int) -> list[tuple[float, np.ndarray]]:
    """Circumradius and centre of ``count`` shapes, inside the square and not too close."""
    while True:
        radii = np.exp(rng.uniform(*np.log(RADIUS), size=count))
        # A margin keeps the scattered outline inside the square.
        centres = [rng.uniform(r * 1.05, 1 - r * 1.05, size=2) for r in radii]
        ok = all(
            np.linalg.norm(centres[i] - centres[j]) >= MIN_SEPARATION * (radii[i] + radii[j])
            for i in range(count)
            for j in range(i)
        )
        if ok:
            return [(float(r), c) for r, c in zip(radii, centres, strict=True)]


def _noise(rng: np.random.Generator, n: int) -> np.ndarray:
    """Uniform background, part of it gathered into Gaussian clumps in some clouds."""
    n_clumped = round(n * rng.uniform(0.2, 0.6)) if rng.random() < CLUMPED else 0
    pieces = [rng.random((n - n_clumped, 2))]
    if n_clumped:
        n_clumps = int(rng.integers(1, 4))
        for size in rng.multinomial(n_clumped, rng.dirichlet(np.ones(n_clumps))):
            centre, width = rng.uniform(0.05, 0.95, size=2), rng.uniform(0.01, 0.05)
            pieces.append(centre + rng.normal(0.0, width, size=(int(size), 2)))
    return np.concatenate(pieces)


def _rotation(rng: np.random.Generator) -> np.ndarray:
    angle = rng.uniform(0, 2 * np.pi)
    return np.array([[np.cos(angle), np.sin(angle)], [-np.sin(angle), np.cos(angle)]])


def _clutter_piece(rng: np.random.Generator, density: float, jitter: float) -> np.ndarray:
    """One piece of clutter: a stretch of a shape's outline, a broken line, or an arc of a circle."""
    scale = float(np.exp(rng.uniform(*np.log(RADIUS))))
    what = rng.choice(3, p=CLUTTER_KINDS)
    if what == 0:
        # A contiguous stretch of some kind's outline, anywhere along it.
        kind = int(rng.integers(len(KINDS)))
        share = rng.uniform(*CLUTTER_OUTLINE_SHARE)
        t = np.mod(rng.random() + share * rng.random(round(density * scale * PERIMETER[kind] * share)), 1.0)
        centre = rng.uniform(scale, 1 - scale, size=2)
        curve = _at_arclength(kind, t) * scale @ _rotation(rng) + centre
    elif what == 1:
        # A broken line of one to three straight segments, turning by any angle at each corner.
        n_seg = int(rng.integers(1, 4))
        lengths = rng.uniform(0.3, 1.2, size=n_seg) * scale
        start = rng.uniform(0, 2 * np.pi)
        turns = rng.uniform(0.35, 2.8, n_seg - 1) * rng.choice([-1, 1], n_seg - 1)
        heading = start + np.concatenate([[0.0], np.cumsum(turns)])
        steps = np.stack([np.cos(heading), np.sin(heading)], axis=1) * lengths[:, None]
        verts = rng.uniform(0.1, 0.9, size=2) + np.concatenate([np.zeros((1, 2)), np.cumsum(steps, axis=0)])
        cum = np.concatenate([[0.0], np.cumsum(lengths)])
        s = rng.random(round(density * cum[-1])) * cum[-1]
        i = np.clip(np.searchsorted(cum, s, side="right") - 1, 0, n_seg - 1)
        frac = ((s - cum[i]) / lengths[i])[:, None]
        curve = verts[i] * (1 - frac) + verts[i + 1] * frac
    else:
        # An arc of a circle as large as the shapes' circles.
        span = rng.uniform(*CLUTTER_ARC_SPAN)
        a = rng.uniform(0, 2 * np.pi) + span * rng.random(round(density * scale * span))
        curve = rng.uniform(0.1, 0.9, size=2) + scale * np.stack([np.cos(a), np.sin(a)], axis=1)
    return curve + rng.normal(0.0, jitter * scale, size=curve.shape)


def _runs(rng: np.random.Generator, t: np.ndarray) -> list[np.ndarray]:
    """Indices of an outline's points in the order they lie along it, from a random start and in
    either direction, cut into runs of RUN consecutive points."""
    order = np.argsort(t)
    order = np.roll(order, -int(rng.integers(len(order)))) if len(order) else order
    if rng.random() < 0.5:
        order = order[::-1]
    cuts = np.cumsum(rng.integers(RUN[0], RUN[1] + 1, size=len(order) // RUN[0] + 1))
    return [r for r in np.split(order, cuts[cuts < len(order)]) if len(r)]


def _cloud(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One cloud's points (P, 2) in the order the files hold them, its 0/1 presence row over the
    five kinds, and the (P,) index of the shape each point is on (-1 clutter, -2 noise)."""
    count = int(rng.choice(3, p=N_SHAPES_P)) + 1
    kinds = rng.choice(len(KINDS), size=count, replace=False)
    density = rng.uniform(*DENSITY)
    jitter = rng.uniform(*JITTER)
    pieces, runs = [], []
    n_points = 0
    for kind, (radius, centre) in zip(kinds, _placements(rng, count), strict=True):
        t = _arclengths(rng, round(density * radius * PERIMETER[kind]))
        outline = _at_arclength(int(kind), t) * radius @ _rotation(rng) + centre
        pieces.append(outline + rng.normal(0.0, jitter * radius, size=outline.shape))
        runs.append([n_points + r for r in _runs(rng, t)])
        n_points += len(t)
    shape_points = n_points
    n_pieces = int(rng.integers(CLUTTER_PIECES[0], CLUTTER_PIECES[1] + 1))
    clutter = [_clutter_piece(rng, density, jitter) for _ in range(n_pieces)]
    pieces.extend(clutter)
    pieces.append(_noise(rng, round(shape_points * rng.uniform(*NOISE))))
    points = np.clip(np.concatenate(pieces), 0.0, 1.0)
    owner = np.full(len(points), -2, dtype=np.int64)
    owner[shape_points : shape_points + sum(len(c) for c in clutter)] = -1
    # Write-out: every run of outline points is one block, every other point a block of its own;
    # the blocks go in random order, except that each shape's runs keep their order along it.
    singles = np.arange(shape_points, len(points))
    blocks = [r for shape_runs in runs for r in shape_runs] + list(singles[:, None])
    keys = rng.random(len(blocks))
    first = 0
    for s, shape_runs in enumerate(runs):
        keys[first : first + len(shape_runs)] = np.sort(keys[first : first + len(shape_runs)])
        for r in shape_runs:
            owner[r] = s
        first += len(shape_runs)
    order = np.concatenate([blocks[b] for b in np.argsort(keys, kind="stable")])
    present = np.zeros(len(KINDS), dtype=np.int64)
    present[kinds] = 1
    return points[order], present, owner[order]


def _split(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    clouds, present, _ = zip(*(_cloud(rng) for _ in range(n)), strict=True)
    offsets = np.concatenate([[0], np.cumsum([len(c) for c in clouds])]).astype(np.int64)
    return np.concatenate(clouds).astype(np.float32), offsets, np.stack(present)


def build(out: Path, seed: int, *, n_train: int = N_TRAIN, n_test: int = N_TEST) -> np.ndarray:
    """Write train_data/train_offsets/train_labels/test_data/test_offsets; return the test rows."""
    train_seq, test_seq = np.random.SeedSequence(seed).spawn(2)
    train_x, train_off, train_y = _split(np.random.default_rng(train_seq), n_train)
    test_x, test_off, test_y = _split(np.random.default_rng(test_seq), n_test)
    np.save(out / "train_data.npy", train_x, allow_pickle=False)
    np.save(out / "train_offsets.npy", train_off, allow_pickle=False)
    np.save(out / "train_labels.npy", train_y, allow_pickle=False)
    np.save(out / "test_data.npy", test_x, allow_pickle=False)
    np.save(out / "test_offsets.npy", test_off, allow_pickle=False)
    return test_y
