"""Data builder for digits_shift: tiny coloured digits 1..6, tested on a drawing style never trained on.

The pictures come from the digits_unsup renderer (imported from tasks/digits_unsup/data.py):
15x7 colour images of one digit drawn in one of four families (a typeface, jittered
pen-stroke templates, 7-segment displays, a 3x5 bitmap font) with random size, slant, rotation, offset,
stroke width, colours, background and noise. The training pictures use every family but
``test_style`` and show dark ink on a lighter background (print and pen strokes); the test
pictures use only ``test_style`` and show a digit lighter than its background (a lit display).
Colours are drawn as digits_unsup draws them and redrawn until the brightness order holds.
Digits are drawn uniformly in both sets; the family of each training picture is public.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import numpy as np

N_TRAIN = 6000
N_TEST = 1000
TEST_STYLE = "segment"
STYLES = ("font", "hand", "segment", "bitmap")  # digits_unsup's drawing families


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
LUMA = np.array([0.3, 0.59, 0.11])


def _picture(rng: np.random.Generator, digit: int, style: str, fonts: Any, light: bool) -> np.ndarray:
    """One picture as digits_unsup renders it, with the digit lighter (or darker) than its background."""
    mask = renderer._glyph_mask(rng, digit, style, fonts)[..., None]
    while True:
        bg, fg = renderer._colours(rng)
        if (float((fg.mean((0, 1)) - bg.mean((0, 1))) @ LUMA) > 0) == light:
            break
    img = bg * (1 - mask) + fg * mask + rng.normal(0, rng.uniform(3, 16), size=bg.shape)
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
    if test_style not in STYLES:
        raise ValueError(f"test_style must be one of {STYLES}, got {test_style!r}")
    # train_styles.npy numbers the training families in STYLES order: 0 font, 1 hand, 2 bitmap.
    families = [s for s in STYLES if s != test_style]
    rng = np.random.default_rng(seed)
    y_train = rng.choice(np.array(DIGITS), size=n_train)
    s_train = rng.integers(0, len(families), size=n_train)
    y_test = rng.choice(np.array(DIGITS), size=n_test)
    fonts = renderer._font_glyphs()
    x_train = np.stack(
        [_picture(rng, int(d), families[s], fonts, light=False) for d, s in zip(y_train, s_train, strict=True)]
    )
    x_test = np.stack([_picture(rng, int(d), test_style, fonts, light=True) for d in y_test])
    np.save(out / "train_data.npy", x_train)
    np.save(out / "train_labels.npy", y_train.astype(np.int64))
    np.save(out / "train_styles.npy", s_train.astype(np.int64))
    np.save(out / "test_data.npy", x_test)
    return y_test.astype(np.int64)
