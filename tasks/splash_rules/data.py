"""Small pictures of paint splashes; each splash's droplets follow one of four hidden rules.

Every picture shows one splash on paper: an irregular central blot with short fingers, droplets
flung around it and a fine mist. A few hidden parameters, drawn per picture from the same
distributions for every class, set how many droplets fly (8 to 24), how far (the spread), how big
they are, whether the throw favours one direction, the colours and the paper's grain.

The class is the rule that ties each droplet's geometry to its flight, two binary factors:

- size and distance: bigger droplets land farther out (inertia), or smaller ones do (spray). Sizes
  and distances are drawn first and then paired by rank through a Gaussian copula with a
  correlation of +-0.6..0.95, so the sets of sizes and of distances are alike in every class and
  only their pairing differs;
- tail direction: every droplet is a teardrop lying along its line of flight, its tail pointing
  outward (ahead of its flight, as stains of drops that hit at a slant do) or back to the blot.

Label = 2 * (smaller droplets land farther) + (tails point back to the blot). Texture, density,
sizes, distances and orientations alone are the same in every class; only relations between a
droplet's size, its distance and the side its tail is on tell the rule.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from scipy.stats import norm

N_TRAIN = 2000
N_TEST = 1000
SIZE = 64  # pixels per side
SS = 4  # supersampling factor: shapes are drawn at 4x and box-filtered down, for anti-aliasing
CLASSES = 4
DROPLETS = (8, 24)  # droplet count, inclusive
CORRELATION = (0.6, 0.95)  # size-distance rank coupling, in absolute value
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


def _droplet(alpha: np.ndarray, centre: np.ndarray, u: np.ndarray, head: float, tail: float, outward: bool) -> None:
    """A teardrop along the unit vector ``u`` around ``centre`` (the middle of its length)."""
    direction = u if outward else -u
    # The head sits behind the middle, the tail runs ahead of it along ``direction``.
    head_at = centre - direction * (tail - head) / 2
    reach = (tail + head) / 2 + 1
    x0, y0, x1, y1 = _window(centre[0], centre[1], reach)
    gx, gy = _grid(x0, y0, x1, y1)
    along = (gx - head_at[0]) * direction[0] + (gy - head_at[1]) * direction[1]
    across = -(gx - head_at[0]) * direction[1] + (gy - head_at[1]) * direction[0]
    in_head = along**2 + across**2 <= head**2
    # The tail narrows from the head's width to nothing at its tip.
    half_width = head * np.clip(1 - along / tail, 0, 1) ** 1.3
    in_tail = (along >= 0) & (along <= tail) & (np.abs(across) <= half_width)
    _paint(alpha, (in_head | in_tail).astype(np.float64), x0, y0)


def _flight(rng: np.random.Generator, n: int, sign: int) -> tuple[np.ndarray, np.ndarray]:
    """Distances (spread units, 0..1) and head radii (pixels) of ``n`` droplets, paired by rank."""
    rho = sign * rng.uniform(*CORRELATION)
    a, b = rng.standard_normal((2, n))
    # The copula's uniforms, pushed through the same marginals in every class.
    u = norm.cdf(np.stack([a, rho * a + np.sqrt(1 - rho**2) * b], axis=1))
    distance = 0.15 + 0.85 * u[:, 0] ** 0.8
    head = np.exp(np.log(HEAD[0]) + u[:, 1] * np.log(HEAD[1] / HEAD[0]))
    return distance, head


def _picture(rng: np.random.Generator, label: int) -> np.ndarray:
    inertia_sign = -1 if label >= 2 else 1
    outward = label % 2 == 0
    alpha = np.zeros((SIZE, SIZE))
    centre = rng.uniform(22, 42, size=2)
    radius = rng.uniform(4.0, 7.0)
    _blot(rng, alpha, centre, radius)
    n = int(rng.integers(DROPLETS[0], DROPLETS[1] + 1))
    distance, head = _flight(rng, n, inertia_sign)
    head = head * rng.uniform(0.85, 1.15)
    tail = head * rng.uniform(*TAIL, size=n)
    spread = rng.uniform(12.0, 22.0)
    # An oblique throw favours one direction; a straight one flings droplets all round.
    favoured, focus = rng.uniform(0, 2 * np.pi), rng.uniform(0.0, 1.5)
    placed, reaches = np.empty((0, 2)), np.empty(0)
    for i in np.argsort(-head):
        reach = (tail[i] + head[i]) / 2
        dist = radius * 1.3 + reach + GAP + distance[i] * spread
        # Up to 30 directions; the first that keeps clear of the droplets already placed wins.
        angles = rng.vonmises(favoured, focus, size=30)
        units = np.stack([np.cos(angles), np.sin(angles)], axis=1)
        spots = centre + dist * units
        gaps = np.linalg.norm(spots[:, None] - placed[None], axis=2) - reaches - reach - GAP
        clear = np.flatnonzero((gaps > 0).all(axis=1))
        pick = int(clear[0]) if len(clear) else 0
        placed, reaches = np.vstack([placed, spots[pick]]), np.append(reaches, reach)
        _droplet(alpha, spots[pick], units[pick], float(head[i]), float(tail[i]), outward)
    # Mist: tiny specks anywhere near the splash, with no rule.
    for _ in range(int(rng.integers(0, 12))):
        where = centre + rng.normal(0.0, spread * 0.8, size=2)
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
