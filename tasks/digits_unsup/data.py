"""Data builder for digits_unsup: tiny 15x7 colour images of the digits 1..6.

Every image is one glyph drawn in one of four families (Pillow's bundled font, hand-drawn
stroke templates with jittered control points, 7-segment displays, a 3x5 bitmap font), placed
with a random size, slant, rotation, offset and stroke width, then painted in a random colour
over a random background (flat, gradient, blotchy texture or stripes) with pixel noise.
The unlabelled and test sets share one heavily imbalanced class distribution; the 26 labelled
images are spread almost evenly over the classes, which over-represents the rare ones.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFont

HEIGHT, WIDTH = 15, 7
SS = 4  # supersampling factor: glyphs are drawn at 4x and box-filtered down, for anti-aliasing
N_UNLABELED = 15962
N_TEST = 500
N_LABELED = 26
DIGITS = (1, 2, 3, 4, 5, 6)
# Class frequencies shared by the unlabelled and the test set; which digit gets which share is
# drawn from the seed, so the majority class is not always the same digit.
SHARES = (0.40, 0.20, 0.15, 0.11, 0.10, 0.04)
STYLE_WEIGHTS = {"font": 0.3, "hand": 0.35, "segment": 0.2, "bitmap": 0.15}

Stroke = list[tuple[float, float]]


def _arc(cx: float, cy: float, rx: float, ry: float, a0: float, a1: float, n: int = 10) -> Stroke:
    # Angles in degrees with y pointing down, so 90 is the bottom of the ellipse.
    t = np.radians(np.linspace(a0, a1, n))
    return [(float(cx + rx * math.cos(a)), float(cy + ry * math.sin(a))) for a in t]


# Hand-drawn templates in a unit box (x right, y down); each digit has several writing styles.
HAND: dict[int, list[list[Stroke]]] = {
    1: [
        [[(0.5, 0.0), (0.5, 1.0)]],
        [[(0.15, 0.25), (0.55, 0.0), (0.55, 1.0)]],
        [[(0.15, 0.25), (0.55, 0.0), (0.55, 1.0)], [(0.15, 1.0), (0.95, 1.0)]],
    ],
    2: [
        [[*_arc(0.5, 0.28, 0.42, 0.28, -170, 20), (0.05, 1.0), (0.95, 1.0)]],
        [[*_arc(0.5, 0.3, 0.42, 0.3, -180, 45), (0.08, 0.95), (0.3, 0.88), (0.95, 0.98)]],
    ],
    3: [
        [_arc(0.5, 0.27, 0.4, 0.27, -160, 90) + _arc(0.5, 0.75, 0.45, 0.25, -90, 160)],
        [[(0.1, 0.0), (0.9, 0.0), (0.4, 0.42), *_arc(0.5, 0.7, 0.42, 0.3, -100, 160)]],
    ],
    4: [
        [[(0.7, 1.0), (0.7, 0.0), (0.05, 0.7), (0.95, 0.7)]],
        [[(0.2, 0.0), (0.1, 0.6), (0.95, 0.6)], [(0.72, 0.15), (0.72, 1.0)]],
    ],
    5: [
        [[(0.85, 0.0), (0.2, 0.0), (0.15, 0.45), *_arc(0.48, 0.7, 0.42, 0.3, -125, 150)]],
        [[(0.2, 0.0), (0.15, 0.45), *_arc(0.48, 0.7, 0.42, 0.3, -125, 150)], [(0.2, 0.0), (0.9, 0.02)]],
    ],
    6: [
        [_arc(0.55, 0.6, 0.45, 0.6, -70, -200) + _arc(0.52, 0.72, 0.4, 0.28, 180, -180, 16)],
        [[(0.8, 0.0), (0.25, 0.5), *_arc(0.52, 0.72, 0.4, 0.28, 200, -160, 16)]],
    ],
}

# 7-segment displays: segment endpoints in the unit box and the segments each digit lights.
SEGMENTS = {
    "a": ((0.0, 0.0), (1.0, 0.0)),
    "b": ((1.0, 0.0), (1.0, 0.5)),
    "c": ((1.0, 0.5), (1.0, 1.0)),
    "d": ((0.0, 1.0), (1.0, 1.0)),
    "e": ((0.0, 0.5), (0.0, 1.0)),
    "f": ((0.0, 0.0), (0.0, 0.5)),
    "g": ((0.0, 0.5), (1.0, 0.5)),
}
LIT = {1: "bc", 2: "abged", 3: "abgcd", 4: "fgbc", 5: "afgcd", 6: "afgedc"}

BITMAP = {
    1: (".#.", "##.", ".#.", ".#.", "###"),
    2: ("##.", "..#", ".#.", "#..", "###"),
    3: ("##.", "..#", ".#.", "..#", "##."),
    4: ("#.#", "#.#", "###", "..#", "..#"),
    5: ("###", "#..", "##.", "..#", "##."),
    6: (".##", "#..", "###", "#.#", "###"),
}


def _font_glyphs() -> dict[tuple[int, int], Image.Image]:
    """Glyph masks of Pillow's bundled font, cropped to one box shared by all digits."""
    font = ImageFont.load_default(size=40)
    raw: dict[tuple[int, int], Image.Image] = {}
    for weight in (0, 1, 2, 3):
        for digit in DIGITS:
            img = Image.new("L", (48, 64), 0)
            ImageDraw.Draw(img).text((6, 2), str(digit), font=font, fill=255, stroke_width=weight, stroke_fill=255)
            raw[digit, weight] = img
    glyphs: dict[tuple[int, int], Image.Image] = {}
    for weight in (0, 1, 2, 3):
        # A common crop keeps each digit's own width (a "1" stays narrow).
        boxes = np.array([raw[d, weight].getbbox() for d in DIGITS])
        box = (int(boxes[:, 0].min()), int(boxes[:, 1].min()), int(boxes[:, 2].max()), int(boxes[:, 3].max()))
        for digit in DIGITS:
            glyphs[digit, weight] = raw[digit, weight].crop(box)
    return glyphs


class _Placement:
    """A random map from the glyph's unit box to canvas pixels: size, slant, rotation, offset."""

    def __init__(self, rng: np.random.Generator) -> None:
        h = rng.uniform(8.5, 13.5)
        w = min(h * rng.uniform(0.42, 0.6), 6.3)
        shear = rng.uniform(-0.3, 0.3)
        angle = math.radians(rng.normal(0.0, 5.0))
        cx = WIDTH / 2 + rng.uniform(-1.0, 1.0) * (max(WIDTH - w, 0.0) / 2 + 0.4)
        cy = HEIGHT / 2 + rng.uniform(-1.0, 1.0) * (max(HEIGHT - h, 0.0) / 2 + 0.5)
        rot = np.array([[math.cos(angle), -math.sin(angle)], [math.sin(angle), math.cos(angle)]])
        self.matrix = SS * rot @ np.array([[1.0, shear], [0.0, 1.0]]) @ np.diag([w, h])
        self.offset = SS * np.array([cx, cy])
        self.stroke = rng.uniform(0.75, 1.9) * SS

    def apply(self, points: np.ndarray) -> list[tuple[float, float]]:
        out = (points - 0.5) @ self.matrix.T + self.offset
        return [(float(x), float(y)) for x, y in out]


def _draw_strokes(draw: ImageDraw.ImageDraw, strokes: list[np.ndarray], place: _Placement) -> None:
    width = max(round(place.stroke), 1)
    r = place.stroke / 2
    for stroke in strokes:
        pts = place.apply(stroke)
        draw.line(pts, fill=255, width=width, joint="curve")
        for x, y in (pts[0], pts[-1]):
            draw.ellipse((x - r, y - r, x + r, y + r), fill=255)


Fonts = dict[tuple[int, int], Image.Image]


def _glyph_mask(rng: np.random.Generator, digit: int, style: str, fonts: Fonts) -> np.ndarray:
    place = _Placement(rng)
    canvas = Image.new("L", (WIDTH * SS, HEIGHT * SS), 0)
    if style == "font":
        glyph = fonts[digit, int(rng.integers(0, 4))]
        gw, gh = glyph.size
        # Pillow wants the inverse map: canvas pixel -> glyph pixel.
        inv = np.diag([gw, gh]) @ np.linalg.inv(place.matrix)
        shift = np.array([gw, gh]) * 0.5 - inv @ place.offset
        data = (inv[0, 0], inv[0, 1], shift[0], inv[1, 0], inv[1, 1], shift[1])
        canvas = glyph.transform(canvas.size, Image.Transform.AFFINE, data, resample=Image.Resampling.BILINEAR)
    else:
        draw = ImageDraw.Draw(canvas)
        if style == "hand":
            templates = HAND[digit]
            template = templates[int(rng.integers(0, len(templates)))]
            # A shared wobble plus per-point jitter imitates an unsteady hand.
            wobble = rng.normal(0.0, 0.04, size=2)
            strokes = [np.asarray(s) + wobble + rng.normal(0.0, 0.035, size=(len(s), 2)) for s in template]
            _draw_strokes(draw, strokes, place)
        elif style == "segment":
            gap = rng.uniform(0.0, 0.12)
            strokes = []
            for name in LIT[digit]:
                p, q = np.asarray(SEGMENTS[name][0]), np.asarray(SEGMENTS[name][1])
                if digit == 1:
                    # A lone right-hand bar at x=1 would sit on the image border; pull it inwards.
                    p, q = p - [0.3, 0.0], q - [0.3, 0.0]
                d = q - p
                strokes.append(np.stack([p + gap * d, q - gap * d]))
            _draw_strokes(draw, strokes, place)
        else:
            cells = [(r, c) for r, row in enumerate(BITMAP[digit]) for c, ch in enumerate(row) if ch == "#"]
            for r, c in cells:
                quad = np.array([[c, r], [c + 1, r], [c + 1, r + 1], [c, r + 1]], dtype=float) / [3.0, 5.0]
                draw.polygon(place.apply(quad), fill=255)
    small = canvas.resize((WIDTH, HEIGHT), Image.Resampling.BOX)
    return np.asarray(small, dtype=np.float32) / 255.0


def _smooth_field(rng: np.random.Generator, grid: tuple[int, int]) -> np.ndarray:
    """A blotchy (HEIGHT, WIDTH, 3) field in [-1, 1]: a coarse random grid upsampled bilinearly."""
    coarse = rng.uniform(-1.0, 1.0, size=(grid[0], grid[1], 3))
    ys = np.linspace(0, grid[0] - 1, HEIGHT)
    xs = np.linspace(0, grid[1] - 1, WIDTH)
    y0 = np.minimum(ys.astype(int), grid[0] - 2)
    x0 = np.minimum(xs.astype(int), grid[1] - 2)
    fy = (ys - y0)[:, None, None]
    fx = (xs - x0)[None, :, None]
    top = coarse[y0][:, x0] * (1 - fx) + coarse[y0][:, x0 + 1] * fx
    bottom = coarse[y0 + 1][:, x0] * (1 - fx) + coarse[y0 + 1][:, x0 + 1] * fx
    return top * (1 - fy) + bottom * fy


def _colours(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Background and foreground colour fields, (HEIGHT, WIDTH, 3) each, in 0..255."""
    yy, xx = np.mgrid[0:HEIGHT, 0:WIDTH].astype(np.float64)
    bg0 = rng.uniform(0, 255, size=3)
    while True:
        fg0 = rng.uniform(0, 255, size=3)
        # Keep enough contrast that the digit stays readable, in colour distance and in brightness.
        if np.linalg.norm(fg0 - bg0) > 120 and abs((fg0 - bg0) @ [0.3, 0.59, 0.11]) > 35:
            break
    theta = rng.uniform(0, 2 * math.pi)
    ramp = (math.cos(theta) * (xx - WIDTH / 2) / WIDTH + math.sin(theta) * (yy - HEIGHT / 2) / HEIGHT)[..., None]
    bg = bg0 + ramp * rng.normal(0, 45, size=3)
    kind = rng.choice(["flat", "gradient", "blotches", "stripes"], p=[0.15, 0.35, 0.3, 0.2])
    if kind == "blotches":
        bg = bg + _smooth_field(rng, (int(rng.integers(3, 6)), int(rng.integers(2, 4)))) * rng.uniform(10, 35)
    elif kind == "stripes":
        period = rng.uniform(2.0, 5.0)
        phi = rng.uniform(0, 2 * math.pi)
        direction = rng.uniform(0, 2 * math.pi)
        wave = np.sin(2 * math.pi * (math.cos(direction) * xx + math.sin(direction) * yy) / period + phi)
        bg = bg + wave[..., None] * rng.normal(0, 15, size=3)
    elif kind == "flat":
        bg = np.broadcast_to(bg0, bg.shape).copy()
    fg = fg0 + ramp * rng.normal(0, 20, size=3)
    return bg, fg


def _random_style(rng: np.random.Generator) -> str:
    styles = list(STYLE_WEIGHTS)
    return styles[int(rng.choice(len(styles), p=list(STYLE_WEIGHTS.values())))]


def _render(rng: np.random.Generator, digit: int, style: str, fonts: Fonts) -> np.ndarray:
    mask = _glyph_mask(rng, digit, style, fonts)[..., None]
    bg, fg = _colours(rng)
    img = bg * (1 - mask) + fg * mask + rng.normal(0, rng.uniform(3, 16), size=bg.shape)
    return np.clip(np.rint(img), 0, 255).astype(np.uint8)


def draw_labels(rng: np.random.Generator, n_pool: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Class shares per digit, labels of the unlabelled+test pool, labelled images per digit."""
    shares = np.zeros(len(DIGITS))
    shares[rng.permutation(len(DIGITS))] = SHARES
    pool_labels = rng.choice(np.array(DIGITS), size=n_pool, p=shares)
    # The labelled set: 4 per class, 5 for the two rarest, so rare classes are over-represented.
    per_class = np.full(len(DIGITS), 4)
    per_class[np.argsort(shares)[:2]] = 5
    return shares, pool_labels, per_class


def build(out: Path, seed: int, n_unlabeled: int = N_UNLABELED, n_test: int = N_TEST) -> np.ndarray:
    """Write the four public files into ``out``; return the test labels (1..6).

    The sizes are parameters only so that tests can build small copies quickly.
    """
    rng = np.random.default_rng(seed)
    _, pool_labels, per_class = draw_labels(rng, n_unlabeled + n_test)
    # Each class shows every drawing family once; without that, a family seen for no class at
    # all would be a guess for any method, not a test of using the unlabelled images.
    lab_pairs = []
    for digit, count in zip(DIGITS, per_class, strict=True):
        styles = [str(s) for s in rng.permutation(list(STYLE_WEIGHTS))]
        styles += [_random_style(rng) for _ in range(count - len(styles))]
        lab_pairs += [(digit, style) for style in styles]
    order = rng.permutation(len(lab_pairs))
    lab_pairs = [lab_pairs[i] for i in order]
    labeled = np.array([d for d, _ in lab_pairs])
    pairs = lab_pairs + [(int(d), _random_style(rng)) for d in pool_labels]

    fonts = _font_glyphs()
    images = np.stack([_render(rng, digit, style, fonts) for digit, style in pairs])

    n_lab = len(labeled)
    np.save(out / "train_data_labeled.npy", images[:n_lab])
    np.save(out / "train_labels.npy", labeled.astype(np.int64))
    np.save(out / "train_data_unlabeled.npy", images[n_lab : n_lab + n_unlabeled])
    np.save(out / "test_data.npy", images[n_lab + n_unlabeled :])
    return pool_labels[n_unlabeled:].astype(np.int64)
