"""Data builder for digits_shift: tiny coloured digits 1..6, tested on pictures drawn in another style.

The pictures come from the digits_unsup renderer (imported from tasks/digits_unsup/data.py):
15x7 colour images of one digit drawn in one of four families (a typeface, jittered
pen-stroke templates, 7-segment displays, a 3x5 bitmap font) with random size, slant, rotation,
offset, stroke width, colours, background and noise.

Training pictures use every family but ``test_style``, with the renderer's own placement, digits
drawn uniformly, and the family of each picture public. Test pictures differ in several entangled
ways at once, each drawn per picture:

- the family: ``test_style`` only (7-segment displays);
- the geometry: a wider range of sizes, more rotation and slant, and strokes from hairline to bold;
- clutter: every test picture carries one to three thin straight scratches that cross the whole
  picture in the digit's own colour;
- the class balance: the test digits follow unequal shares, which digit gets which share drawn
  from the seed.

In both sets the digit is lighter than its background in about half the pictures (a fair coin per
picture), so the brightness order is no systematic difference between them.
"""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, ImageDraw

N_TRAIN = 6000
N_TEST = 1000
TEST_STYLE = "segment"
STYLES = ("font", "hand", "segment", "bitmap")  # digits_unsup's drawing families
# Shares of the test digits; which digit gets which share is drawn from the seed.
TEST_SHARES = (0.26, 0.21, 0.17, 0.14, 0.12, 0.10)
SCRATCH_COUNTS = (1, 2, 3)
SCRATCH_P = (0.3, 0.5, 0.2)


def _load_renderer() -> Any:
    """digits_unsup's builder module, imported by path: its renderer draws our pictures."""
    path = Path(__file__).resolve().parent.parent / "digits_unsup" / "data.py"
    name = "_weirdml_digits_unsup_renderer"
    module = sys.modules.get(name)
    if module is None:
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return module


renderer = _load_renderer()
DIGITS = tuple(int(d) for d in renderer.DIGITS)
H, W, SS = renderer.HEIGHT, renderer.WIDTH, renderer.SS
LUMA = np.array([0.3, 0.59, 0.11])


def _test_placement(rng: np.random.Generator) -> Any:
    """The renderer's placement, then rescaled, rotated, slanted and re-stroked more widely."""
    place = renderer._Placement(rng)
    scale = rng.uniform(0.8, 1.1)
    angle = math.radians(rng.normal(0.0, 7.0))
    shear = rng.uniform(-0.25, 0.25)
    rot = np.array([[math.cos(angle), -math.sin(angle)], [math.sin(angle), math.cos(angle)]])
    place.matrix = scale * rot @ np.array([[1.0, shear], [0.0, 1.0]]) @ place.matrix
    place.stroke = rng.uniform(0.6, 2.2) * SS
    return place


def _scratches(rng: np.random.Generator, draw: ImageDraw.ImageDraw) -> int:
    """Thin straight lines through a random point of the picture, long enough to cross all of it;
    returns how many."""
    count = int(rng.choice(SCRATCH_COUNTS, p=SCRATCH_P))
    for _ in range(count):
        x, y = rng.uniform(0, W) * SS, rng.uniform(0, H) * SS
        a = rng.uniform(0, math.pi)
        dx, dy = 2 * H * SS * math.cos(a), 2 * H * SS * math.sin(a)
        draw.line([(x - dx, y - dy), (x + dx, y + dy)], fill=255, width=max(round(rng.uniform(0.6, 1.3) * SS), 1))
    return count


def _test_mask(rng: np.random.Generator, digit: int) -> np.ndarray:
    """A 7-segment digit (the renderer's segment geometry) with the test placement and scratches."""
    place = _test_placement(rng)
    canvas = Image.new("L", (W * SS, H * SS), 0)
    draw = ImageDraw.Draw(canvas)
    gap = rng.uniform(0.0, 0.12)
    strokes = []
    for name in renderer.LIT[digit]:
        p, q = np.asarray(renderer.SEGMENTS[name][0]), np.asarray(renderer.SEGMENTS[name][1])
        if digit == 1:
            p, q = p - [0.3, 0.0], q - [0.3, 0.0]
        d = q - p
        strokes.append(np.stack([p + gap * d, q - gap * d]))
    renderer._draw_strokes(draw, strokes, place)
    _scratches(rng, draw)
    small = canvas.resize((W, H), Image.Resampling.BOX)
    return np.asarray(small, dtype=np.float32) / 255.0


def _paint(rng: np.random.Generator, mask: np.ndarray, light: bool) -> np.ndarray:
    """Colour a glyph mask as digits_unsup does, with the digit lighter (or darker) than its background."""
    while True:
        bg, fg = renderer._colours(rng)
        if (float((fg.mean((0, 1)) - bg.mean((0, 1))) @ LUMA) > 0) == light:
            break
    m = mask[..., None]
    img = bg * (1 - m) + fg * m + rng.normal(0, rng.uniform(3, 16), size=bg.shape)
    return np.clip(np.rint(img), 0, 255).astype(np.uint8)


def build(
    out: Path,
    seed: int,
    n_train: int = N_TRAIN,
    n_test: int = N_TEST,
    test_style: str = TEST_STYLE,
) -> np.ndarray:
    """Write the public files into ``out``; return the test labels (1..6).

    The sizes are parameters so that tests can build small copies quickly.
    """
    if test_style != TEST_STYLE:
        raise ValueError(f"test_style must be {TEST_STYLE!r} (the test geometry is that family's), got {test_style!r}")
    # train_styles.npy numbers the training families in STYLES order: 0 font, 1 hand, 2 bitmap.
    families = [s for s in STYLES if s != test_style]
    rng = np.random.default_rng(seed)
    y_train = rng.choice(np.array(DIGITS), size=n_train)
    s_train = rng.integers(0, len(families), size=n_train)
    shares = np.zeros(len(DIGITS))
    shares[rng.permutation(len(DIGITS))] = TEST_SHARES
    y_test = rng.choice(np.array(DIGITS), size=n_test, p=shares)
    light_train = rng.random(n_train) < 0.5
    light_test = rng.random(n_test) < 0.5
    fonts = renderer._font_glyphs()
    x_train = np.stack(
        [
            _paint(rng, renderer._glyph_mask(rng, int(d), families[s], fonts), bool(lt))
            for d, s, lt in zip(y_train, s_train, light_train, strict=True)
        ]
    )
    x_test = np.stack(
        [_paint(rng, _test_mask(rng, int(d)), bool(lt)) for d, lt in zip(y_test, light_test, strict=True)]
    )
    np.save(out / "train_data.npy", x_train)
    np.save(out / "train_labels.npy", y_train.astype(np.int64))
    np.save(out / "train_styles.npy", s_train.astype(np.int64))
    np.save(out / "test_data.npy", x_test)
    return y_test.astype(np.int64)
