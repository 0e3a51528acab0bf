"""Small pictures of paint splashes; where the droplets land follows one of four hidden rules.

Every picture shows one splash on paper: an irregular central blot with short fingers, droplets
flung around it and a fine mist. A few hidden parameters, drawn per picture from the same
distributions for every class, set how many droplets fly (8 to 24), how far (the spread), how big
they are, the colours and the paper's grain. Every droplet is a teardrop along its line of
flight, its tail pointing away from the blot, as stains of drops that hit at a slant do.

The class is the mechanism of the throw, which shows only in the symmetry of where droplets land
around the blot's centre:

- 0 folded: the paper was folded while wet, so the droplets are mirrored about a line through
  the centre;
- 1 two-way: a flick that throws both ways, so every droplet has a twin half a turn away;
- 2 spinner: a three-armed spinner, so every droplet has twins a third of a turn away;
- 3 free: droplets land at independent directions.

Copies fly at the symmetric directions but each its own distance (a flick never throws both ways
with the same strength): the throw's distance times an independent log-normal factor, so only the
copies' directions and sizes pair up, not their positions. Copies are imperfect besides: each is
shifted by about half a pixel, resized by about 10%, and lost with a chance of 10%, and every
splash has up to two unpaired droplets. The blot itself is never
symmetric, and the number of droplets, their directions, distances and sizes have the same
distributions in every class; only the relations between droplets far apart tell the rule.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

N_TRAIN = 2000
N_TEST = 1000
SIZE = 64  # pixels per side
SS = 4  # supersampling factor: shapes are drawn at 4x and box-filtered down, for anti-aliasing
CLASSES = 4
DROPLETS = (8, 24)  # droplet count, inclusive
COPIES = (2, 2, 3, 1)  # landing spots per thrown droplet, by class
SHIFT = 0.5  # standard deviation of a copy's shift in pixels
JITTER = 0.28  # standard deviation of the log of a copy's distance factor (independent per copy)
LOST = 0.1  # chance that a copy is lost
HEAD = (0.8, 2.4)  # head radius of a droplet in pixels, log-uniform, before the per-splash scale
TAIL = (1.5, 3.2)  # tail length over head radius
GAP = 1.5  # droplets keep this many pixels clear of the blot and of each other


def _grid(x0: int, y0: int, x1: int, y1: int) -> tuple[np.ndarray, np.ndarray]:
    """Sub-pixel centres of the pixel window [x0, x1) x [y0, y1), in pixel units, as a row of
    x and a column of y (they broadcast to the window)."""
    xs = x0 + (np.arange((x1 - x0) * SS) + 0.5) / SS
    ys = y0 + (np.arange((y1 - y0) * SS) + 0.5) / SS
    return xs[None, :], ys[:, None]


def _paint(alpha: np.ndarray, cover: np.ndarray, x0: int, y0: int) -> None:
    """Add a sub-pixel coverage mask into the picture's alpha, box-filtered down to pixels."""
    h, w = cover.shape[0] // SS, cover.shape[1] // SS
    pixels = cover.reshape(h, SS, w, SS).mean(axis=(1, 3))
    # Windows may stick out of the picture: keep the part inside.
    ya, xa = max(0, -y0), max(0, -x0)
    yb, xb = min(h, SIZE - y0), min(w, SIZE - x0)
    if ya < yb and xa < xb:
        region = alpha[y0 + ya : y0 + yb, x0 + xa : x0 + xb]
        np.maximum(region, pixels[ya:yb, xa:xb], out=region)


def _window(cx: float, cy: float, reach: float) -> tuple[int, int, int, int]:
    return int(np.floor(cx - reach)), int(np.floor(cy - reach)), int(np.ceil(cx + reach)), int(np.ceil(cy + reach))


def _blot(rng: np.random.Generator, alpha: np.ndarray, centre: np.ndarray, radius: float) -> None:
    """The central blot: a wobbly disc with a few short, thin fingers."""
    harmonics = rng.normal(0.0, 0.06, size=(5, 2)) / np.arange(1, 6)[:, None]
    fingers = rng.uniform(0, 2 * np.pi, size=int(rng.integers(3, 9)))
    lengths = rng.uniform(0.2, 0.7, size=len(fingers))
    widths = rng.uniform(0.05, 0.15, size=len(fingers))
    x0, y0, x1, y1 = _window(centre[0], centre[1], radius * 1.9)
    gx, gy = _grid(x0, y0, x1, y1)
    dx, dy = gx - centre[0], gy - centre[1]
    dist = np.hypot(dx, dy)
    unit = (dx + 1j * dy) / np.maximum(dist, 1e-9)  # e^(i theta), without computing theta
    edge = np.ones_like(dist)
    power = np.ones_like(unit)
    for a, b in harmonics:
        power = power * unit
        edge += a * power.real + b * power.imag
    for angle, length, width in zip(fingers, lengths, widths, strict=True):
        # cos of the angle to the finger's axis; exp((cos - 1) / w^2) is a bump of width about w.
        cos = unit.real * np.cos(angle) + unit.imag * np.sin(angle)
        edge += length * np.exp((cos - 1) / width**2)
    _paint(alpha, (dist <= radius * edge).astype(np.float64), x0, y0)


def _droplet(alpha: np.ndarray, centre: np.ndarray, u: np.ndarray, head: float, tail: float) -> None:
    """A teardrop around ``centre`` (the middle of its length), its tail pointing along ``u``."""
    # The head sits behind the middle, the tail runs ahead of it.
    head_at = centre - u * (tail - head) / 2
    reach = (tail + head) / 2 + 1
    x0, y0, x1, y1 = _window(centre[0], centre[1], reach)
    gx, gy = _grid(x0, y0, x1, y1)
    along = (gx - head_at[0]) * u[0] + (gy - head_at[1]) * u[1]
    across = -(gx - head_at[0]) * u[1] + (gy - head_at[1]) * u[0]
    in_head = along**2 + across**2 <= head**2
    # The tail narrows from the head's width to nothing at its tip.
    half_width = head * np.clip(1 - along / tail, 0, 1) ** 1.3
    in_tail = (along >= 0) & (along <= tail) & (np.abs(across) <= half_width)
    _paint(alpha, (in_head | in_tail).astype(np.float64), x0, y0)


def _directions(label: int, angles: np.ndarray, fold: float) -> np.ndarray:
    """The directions droplets thrown at ``angles`` (shape (m,)) land in under rule ``label``, as
    (m, copies); ``fold`` is the direction of the fold line of rule 0."""
    if label == 0:
        return np.stack([angles, 2 * fold - angles], axis=1)
    return angles[:, None] + 2 * np.pi * np.arange(COPIES[label]) / COPIES[label]


_SELF = {k: np.eye(k) * 1e9 for k in (1, 2, 3)}  # keeps a landing from clashing with itself


def _landings(rng: np.random.Generator, label: int, blot: float) -> list[tuple[np.ndarray, float, float]]:
    """Where each droplet lands (offset from the centre), its head radius and its tail length."""
    n = int(rng.integers(DROPLETS[0], DROPLETS[1] + 1))
    spread = rng.uniform(12.0, 22.0)
    scale = rng.uniform(0.85, 1.15)
    fold = rng.uniform(0, np.pi)
    out: list[tuple[np.ndarray, float, float]] = []
    spots = np.empty(0, dtype=complex)
    reaches = np.empty(0)
    # Throws until n droplets have landed (the last throw may lose copies to stop at n), then up to
    # two unpaired extras; a throw that finds no room is dropped, within a bounded number of tries.
    extras = int(rng.integers(0, 3))
    for _ in range(3 * (n + extras)):
        if len(out) >= n + extras:
            break
        rule = label if len(out) < n else 3
        head = float(np.exp(rng.uniform(*np.log(HEAD)))) * scale
        tail = head * rng.uniform(*TAIL)
        reach = (tail + head) / 2
        inner = blot * 1.3 + reach + GAP  # the nearest a droplet lands to the centre
        dist = inner + rng.uniform(0.0, 1.0) ** 0.8 * spread
        # 30 candidate throws at once; the first whose landings keep clear of each other and of
        # the droplets already there wins.
        angles = _directions(rule, rng.uniform(0, 2 * np.pi, size=30), fold)
        tries, copies = angles.shape
        # Every copy flies its own distance: the throw's, times a log-normal factor; one that would
        # fall short of the blot is reflected outwards (in log distance) about the nearest landing.
        radii = dist * np.exp(rng.normal(0.0, JITTER, size=angles.shape))
        radii = np.where(radii < inner, inner**2 / radii, radii)
        where = radii[..., None] * np.stack([np.cos(angles), np.sin(angles)], axis=2)
        where += rng.normal(0.0, SHIFT, size=where.shape)
        sizes = head * np.exp(rng.normal(0.0, 0.1, size=(tries, copies)))
        kept = rng.random((tries, copies)) >= LOST if copies > 1 else np.ones((tries, 1), dtype=bool)
        kept[np.arange(tries), rng.integers(copies, size=tries)] = True  # a throw always lands somewhere
        kept &= np.cumsum(kept, axis=1) <= (n if len(out) < n else n + extras) - len(out)
        # Complex positions make the pairwise distances one subtraction and one abs.
        z = where[..., 0] + 1j * where[..., 1]
        own = np.abs(z[:, :, None] - z[:, None]) + _SELF[copies]
        own_ok = ((own > 2 * reach + GAP) | ~kept[:, :, None] | ~kept[:, None, :]).all(axis=(1, 2))
        others = np.abs(z[:, :, None] - spots[None, None]) - reaches
        others_ok = ((others > reach + GAP).all(axis=2) | ~kept).all(axis=1)
        clear = np.flatnonzero(own_ok & others_ok)
        if not len(clear):
            continue  # no room for this throw
        pick = int(clear[0])
        for w, h in zip(where[pick][kept[pick]], sizes[pick][kept[pick]], strict=True):
            out.append((w, float(h), float(h / head * tail)))
        landed = z[pick][kept[pick]]
        spots, reaches = np.append(spots, landed), np.append(reaches, np.full(len(landed), reach))
    return out


def _picture(rng: np.random.Generator, label: int) -> np.ndarray:
    alpha = np.zeros((SIZE, SIZE))
    centre = rng.uniform(24, 40, size=2)
    radius = rng.uniform(4.0, 7.0)
    _blot(rng, alpha, centre, radius)
    for offset, head, tail in _landings(rng, label, radius):
        _droplet(alpha, centre + offset, offset / np.linalg.norm(offset), head, tail)
    # Mist: tiny specks anywhere near the splash, with no rule.
    for _ in range(int(rng.integers(0, 12))):
        where = centre + rng.normal(0.0, 14.0, size=2)
        x0, y0, x1, y1 = _window(where[0], where[1], 1.0)
        gx, gy = _grid(x0, y0, x1, y1)
        speck = np.hypot(gx - where[0], gy - where[1]) <= rng.uniform(0.3, 0.6)
        _paint(alpha, speck.astype(np.float64) * rng.uniform(0.5, 1.0), x0, y0)
    return _colour(rng, alpha)


def _colour(rng: np.random.Generator, alpha: np.ndarray) -> np.ndarray:
    """Paint of a random colour over grainy, slightly shaded paper, as uint8 RGB."""
    paper = rng.uniform(0.8, 1.0, size=3)
    paint = rng.uniform(0.0, 0.7, size=3)
    paint[rng.integers(3)] *= rng.uniform(0.0, 0.5)  # keep a clear contrast with the paper
    ys, xs = np.mgrid[0:SIZE, 0:SIZE] / SIZE
    shade = 1 + rng.normal(0.0, 0.04) * (xs - 0.5) + rng.normal(0.0, 0.04) * (ys - 0.5)
    grain = rng.normal(0.0, rng.uniform(0.01, 0.04), size=(SIZE, SIZE, 1))
    opacity = rng.uniform(0.85, 1.0)
    a = (alpha * opacity)[..., None]
    img = (paper * shade[..., None] + grain) * (1 - a) + paint * a
    img = img + rng.normal(0.0, 0.01, size=img.shape)
    return np.clip(np.round(img * 255), 0, 255).astype(np.uint8)


def _split(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    labels = rng.permutation(np.arange(n) % CLASSES)
    images = np.stack([_picture(rng, int(label)) for label in labels])
    return images, labels.astype(np.int64)


def build(out: Path, seed: int, *, n_train: int = N_TRAIN, n_test: int = N_TEST) -> np.ndarray:
    """Write train_data.npy, train_labels.npy and test_data.npy; return the test labels."""
    train_seq, test_seq = np.random.SeedSequence(seed).spawn(2)
    train_x, train_y = _split(np.random.default_rng(train_seq), n_train)
    test_x, test_y = _split(np.random.default_rng(test_seq), n_test)
    np.save(out / "train_data.npy", train_x, allow_pickle=False)
    np.save(out / "train_labels.npy", train_y, allow_pickle=False)
    np.save(out / "test_data.npy", test_x, allow_pickle=False)
    return test_y
