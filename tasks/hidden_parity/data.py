"""Small colour pictures whose label is the parity of six hidden yes/no properties.

Every 32x32 picture shows one outlined shape, one bar and a few dots over a noisy background,
none of them touching. Six relevant properties, each a fair coin, are read off values the
generator draws per picture:

- the shape is a square outline (else a ring);
- there are 4 or more dots (of 1 to 6);
- the outline's hue lies in the half of the colour circle from 160 to 340 degrees (from green
  through cyan, blue and violet to pink; else red, orange, yellow and yellow-green), drawn
  uniformly on the circle;
- the bar's direction lies between 20 and 110 degrees (of 0 to 180, drawn uniformly, in picture
  coordinates: x to the right, y down);
- the outline's size lies in the middle half of its range (radius 5.25 to 6.75 of 4.5 to 7.5);
- the bar is longer than 9 pixels (of 6 to 12).

The label is the XOR of the six bits; the square-or-ring bit is set from the label and the
other five, so it stays a fair coin independent of them. No property, nor any set of five or
fewer, says anything about the label. Three of the cuts sit where no natural threshold does: on
a circle of hues, on a half circle of directions, and a band in the middle of a size range, so a
split of any one value at its median or at the obvious colour and direction boundaries misses them.
Everything else varies and carries no signal: positions, the stroke, the square's rotation, the
bar's width and hue, the dots' sizes and colours, saturation and brightness, the background's
tint, gradient and noise level.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import numpy as np

SIZE = 32
N_TRAIN = 2000
N_TEST = 1000
# The drawn values of a picture, one column each; the first six decide the label.
LATENTS = ("square", "n_dots", "shape_hue", "bar_angle", "shape_radius", "bar_length")
N_DOTS = (1, 6)
HUE_HALF = (160.0, 340.0)  # degrees: the outline's hue bit is 1 inside this half of the circle
BAR_ANGLE = (0.0, 180.0)
ANGLE_BAND = (20.0, 110.0)  # degrees, image coordinates (x right, y down)
SHAPE_RADIUS = (4.5, 7.5)  # ring radius; a square's half-side is 0.85 of it, for a similar area
RADIUS_BAND = (5.25, 6.75)
BAR_LENGTH = (6.0, 12.0)
LENGTH_CUT = 9.0
STROKE = (1.1, 1.8)
BAR_WIDTH = (1.4, 2.2)
DOT_RADIUS = (0.9, 2.0)
GAP = 2.5  # least distance between the discs that hold two objects, so no two objects touch

_YY, _XX = np.mgrid[0:SIZE, 0:SIZE].astype(np.float64) + 0.5


def _hsv_to_rgb(hue_deg: float, sat: float, val: float) -> np.ndarray:
    h = (hue_deg % 360.0) / 60.0
    c = val * sat
    x = c * (1 - abs(h % 2 - 1))
    rgb = [(c, x, 0), (x, c, 0), (0, c, x), (0, x, c), (x, 0, c), (c, 0, x)][int(h) % 6]
    return np.array(rgb) + (val - c)


def _colour(rng: np.random.Generator, hue_deg: float) -> np.ndarray:
    return _hsv_to_rgb(hue_deg, rng.uniform(0.65, 1.0), rng.uniform(0.75, 1.0))


def _coverage(distance: np.ndarray) -> np.ndarray:
    """Anti-aliased coverage of a pixel whose centre lies ``distance`` outside an edge."""
    return np.clip(0.5 - distance, 0.0, 1.0)


def _shape_distance(square: int, centre: np.ndarray, radius: float, angle: float) -> np.ndarray:
    u, v = _XX - centre[0], _YY - centre[1]
    if not square:
        return np.hypot(u, v) - radius
    ca, sa = np.cos(angle), np.sin(angle)
    ru, rv = ca * u + sa * v, -sa * u + ca * v
    return np.maximum(np.abs(ru), np.abs(rv)) - 0.85 * radius


def _bar_distance(centre: np.ndarray, length: float, angle: float) -> np.ndarray:
    """Distance from the bar's axis segment."""
    d = np.array([np.cos(angle), np.sin(angle)])
    u, v = _XX - centre[0], _YY - centre[1]
    t = np.clip(u * d[0] + v * d[1], -length / 2, length / 2)
    return np.hypot(u - t * d[0], v - t * d[1])


def _place(rng: np.random.Generator, radii: list[float]) -> list[np.ndarray] | None:
    """Centres for discs of these radii, inside the picture and GAP apart; None if stuck."""
    centres = np.empty((0, 2))
    for k, r in enumerate(radii):
        # Try 512 random spots at once and keep the first that is clear of the discs placed so far.
        spots = rng.uniform(r + 0.5, SIZE - r - 0.5, size=(512, 2))
        dist = np.hypot(*(spots[:, None, :] - centres[None, :, :]).transpose(2, 0, 1))
        clear = np.all(dist >= r + np.asarray(radii[:k]) + GAP, axis=1)
        if not clear.any():
            return None
        centres = np.vstack([centres, spots[np.argmax(clear)]])
    return list(centres)


def _background(rng: np.random.Generator) -> np.ndarray:
    base = _hsv_to_rgb(rng.uniform(0, 360), rng.uniform(0.0, 0.5), rng.uniform(0.08, 0.35))
    angle = rng.uniform(0, 2 * np.pi)
    ramp = ((_XX - SIZE / 2) * np.cos(angle) + (_YY - SIZE / 2) * np.sin(angle)) / SIZE
    image = base + rng.uniform(0.0, 0.15) * ramp[..., None]
    return image + rng.normal(0.0, rng.uniform(0.015, 0.05), size=(SIZE, SIZE, 3))


class Scene(NamedTuple):
    """Where the objects of one picture sit: the shape, the bar, then the dots."""

    centres: np.ndarray  # (2 + dots, 2) as (x, y) in pixels
    extents: np.ndarray  # (2 + dots,) radius of the disc that holds each object


def picture(rng: np.random.Generator, lat: np.ndarray) -> tuple[np.ndarray, Scene]:
    """One (SIZE, SIZE, 3) uint8 picture with the drawn values ``lat`` (see LATENTS), and its layout."""
    square, n_dots = int(lat[0]), int(lat[1])
    hue, bar_angle, radius, length = (float(v) for v in lat[2:6])
    stroke = rng.uniform(*STROKE)
    width = rng.uniform(*BAR_WIDTH)
    dot_r = rng.uniform(*DOT_RADIUS, size=n_dots)
    # A square's corners reach further than its half-side.
    extents = [radius * (1.2 if square else 1.0) + stroke / 2, length / 2 + width / 2, *(dot_r + 0.3)]
    while (centres := _place(rng, extents)) is None:
        pass
    shape = np.abs(_shape_distance(square, centres[0], radius, rng.uniform(0, np.pi / 2))) - stroke / 2
    shape_colour = _colour(rng, hue)
    bar_colour = _colour(rng, rng.uniform(0, 360))  # a distractor: any hue
    bar = _bar_distance(centres[1], length, np.radians(bar_angle)) - width / 2
    layers = [(_coverage(shape), shape_colour), (_coverage(bar), bar_colour)]
    for c, r in zip(centres[2:], dot_r, strict=True):
        dot_colour = _hsv_to_rgb(rng.uniform(0, 360), rng.uniform(0.0, 0.8), rng.uniform(0.75, 1.0))
        layers.append((_coverage(np.hypot(_XX - c[0], _YY - c[1]) - r), dot_colour))
    image = _background(rng)
    for alpha, colour in layers:
        image = image * (1 - alpha[..., None]) + colour * alpha[..., None]
    image = np.clip(np.round(image * 255), 0, 255).astype(np.uint8)
    return image, Scene(np.array(centres), np.array(extents))


def relevant_bits(lat: np.ndarray) -> np.ndarray:
    """(n, 6) int bits of the drawn values (n, len(LATENTS)): their parity is the label."""
    hue, angle, radius = lat[:, 2] % 360.0, lat[:, 3], lat[:, 4]
    return np.stack(
        [
            lat[:, 0] > 0.5,
            lat[:, 1] >= 4,
            (hue >= HUE_HALF[0]) & (hue < HUE_HALF[1]),
            (angle >= ANGLE_BAND[0]) & (angle < ANGLE_BAND[1]),
            (radius >= RADIUS_BAND[0]) & (radius < RADIUS_BAND[1]),
            lat[:, 5] >= LENGTH_CUT,
        ],
        axis=1,
    ).astype(np.int64)


def factors(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(n, len(LATENTS)) drawn values whose six bits' parity gives exactly balanced labels."""
    labels = rng.permutation(np.arange(n) % 2)
    lat = np.stack(
        [
            np.zeros(n),
            rng.integers(N_DOTS[0], N_DOTS[1] + 1, size=n),
            rng.uniform(0.0, 360.0, size=n),
            rng.uniform(*BAR_ANGLE, size=n),
            rng.uniform(*SHAPE_RADIUS, size=n),
            rng.uniform(*BAR_LENGTH, size=n),
        ],
        axis=1,
    )
    # The square-or-ring bit is set so that the parity equals the label; it stays a fair coin.
    lat[:, 0] = labels ^ np.bitwise_xor.reduce(relevant_bits(lat)[:, 1:], axis=1)
    return lat, labels


def _split(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    f, labels = factors(rng, n)
    images = np.stack([picture(rng, row)[0] for row in f])
    return images, labels.astype(np.int64), f


def build(out: Path, seed: int, *, n_train: int = N_TRAIN, n_test: int = N_TEST) -> np.ndarray:
    """Write train_data.npy, train_labels.npy and test_data.npy; return the test labels."""
    train_seq, test_seq = np.random.SeedSequence([seed, 0x9A21]).spawn(2)
    train_x, train_y, _ = _split(np.random.default_rng(train_seq), n_train)
    test_x, test_y, _ = _split(np.random.default_rng(test_seq), n_test)
    np.save(out / "train_data.npy", train_x, allow_pickle=False)
    np.save(out / "train_labels.npy", train_y, allow_pickle=False)
    np.save(out / "test_data.npy", test_x, allow_pickle=False)
    return test_y
