"""hidden_parity reference: measure what is drawn, then find the parity that explains the labels.

A network on raw pixels gets no signal from any single property when the label is a parity, so
this script measures each picture instead: it separates the objects from the background,
tells the outlined shape, the bar and the dots apart, and reads a handful of yes/no candidates
(is the outline square, is it warm or cool, is the number of dots odd, is the bar upright, its
colour, the dots' size). Each candidate's threshold is set without labels (the largest gap between
two clusters of its values). Then every subset of up to four candidates is scored by how often
its parity equals the training label; the best subset, checked on held-out training pictures,
predicts the test set.
"""

from __future__ import annotations

import itertools
import os
import time

import numpy as np
from scipy import ndimage

START = time.time()
x_train = np.load("data/train_data.npy")
y_train = np.load("data/train_labels.npy").astype(np.int64)
x_test = np.load("data/test_data.npy")
print(f"train {x_train.shape}, test {x_test.shape}, cores {len(os.sched_getaffinity(0))}")

NAMES = ("outline_square", "outline_cool", "dots_odd", "bar_upright", "bar_cool", "dots_large")


SIZE = x_train.shape[1]
_YY, _XX = np.mgrid[0:SIZE, 0:SIZE].astype(np.float64)
_PLANE = np.stack([np.ones(SIZE * SIZE), _XX.ravel() / SIZE, _YY.ravel() / SIZE], axis=1)


def objects(image: np.ndarray) -> list[dict[str, float]]:
    """Connected blobs that stand out from the background, with their size, form and colour."""
    rgb = image.reshape(-1, 3).astype(np.float64) / 255.0
    # The background is a colour with a gradient: fit a plane per channel to the pixels that are
    # not objects, twice, so the objects found the first time do not pull the fit.
    keep = np.ones(len(rgb), dtype=bool)
    for _ in range(2):
        coef = np.linalg.lstsq(_PLANE[keep], rgb[keep], rcond=None)[0]
        contrast = np.linalg.norm(rgb - _PLANE @ coef, axis=1)
        keep = contrast < 0.15
    contrast = contrast.reshape(SIZE, SIZE)
    # A low threshold keeps thin, dark outlines in one piece; weak specks of noise are dropped below.
    labels, n = ndimage.label(contrast > 0.2, structure=np.ones((3, 3)))
    colours = rgb.reshape(SIZE, SIZE, 3)
    found = []
    for k in range(1, n + 1):
        ys, xs = np.nonzero(labels == k)
        w = contrast[ys, xs]
        if w.max() < 0.45:
            continue  # background noise
        cy, cx = np.average(ys, weights=w), np.average(xs, weights=w)
        cov = np.cov(np.stack([xs, ys]), aweights=w) if len(ys) > 2 else np.eye(2)
        evals, evecs = np.linalg.eigh(cov)
        # Weighted distance from the centre by direction: flat for a ring, four bumps for a square.
        dist = np.hypot(ys - cy, xs - cx)
        sector = ((np.arctan2(ys - cy, xs - cx) + np.pi) / (2 * np.pi) * 16).astype(np.int64) % 16
        mass = np.bincount(sector, weights=w, minlength=16)
        profile = np.bincount(sector, weights=w * dist, minlength=16)[mass > 0] / mass[mass > 0]
        colour = np.average(colours[ys, xs], axis=0, weights=w)
        found.append(
            {
                "area": float(w.sum()),
                "extent": float(max(np.ptp(ys), np.ptp(xs)) + 1),
                "elong": float(np.sqrt(evals[1] / max(evals[0], 1e-2))),
                "upright": float(abs(evecs[1, 1])),
                "warmth": float(colour[0] - colour[2]),
                "radial_cv": float(profile.std() / max(profile.mean(), 1e-3)),
            }
        )
    return found


def measure(image: np.ndarray) -> np.ndarray:
    """The six candidate measurements of one picture (NaN where an object was not found)."""
    objs = objects(image)
    out = np.full(len(NAMES), np.nan)
    if not objs:
        return out
    # The outline spans the most pixels without being long and thin like the bar.
    shape = max(objs, key=lambda o: o["extent"] / np.sqrt(o["elong"]))
    rest = [o for o in objs if o is not shape]
    out[0] = shape["radial_cv"]
    out[1] = -shape["warmth"]
    if rest:
        bar = max(rest, key=lambda o: o["elong"] * min(o["area"], 12))
        dots = [o for o in rest if o is not bar]
        out[3] = bar["upright"]
        out[4] = -bar["warmth"]
        out[2] = len(dots) % 2
        if dots:
            out[5] = float(np.mean([o["area"] for o in dots]))
    return out


def threshold(values: np.ndarray) -> float:
    """Otsu's cut: the split of the values into two groups with the least spread inside each."""
    v = values[np.isfinite(values)]
    # A few wrong measurements far out would otherwise draw the cut towards them.
    v = np.sort(np.clip(v, *np.percentile(v, [3, 97])))
    n = np.arange(1, len(v))
    left = np.cumsum(v)[:-1]
    # Between-group variance of every split point, up to a constant factor.
    between = (left / n - (v.sum() - left) / (len(v) - n)) ** 2 * n * (len(v) - n)
    i = int(np.argmax(between))
    return float((v[i] + v[i + 1]) / 2)


feats_train = np.stack([measure(img) for img in x_train])
feats_test = np.stack([measure(img) for img in x_test])
print(f"measured {len(feats_train) + len(feats_test)} pictures in {time.time() - START:.1f}s")
cuts = [threshold(np.concatenate([feats_train[:, j], feats_test[:, j]])) for j in range(len(NAMES))]
cuts[2] = 0.5  # already a parity bit


def bits(feats: np.ndarray) -> np.ndarray:
    return np.nan_to_num(feats, nan=-np.inf) > np.array(cuts)


bits_train, bits_test = bits(feats_train), bits(feats_test)
for j, name in enumerate(NAMES):
    agree = np.mean(bits_train[:, j] == y_train)
    print(f"  {name:15s} cut {cuts[j]:7.3f}  on {bits_train[:, j].mean():.2f}  agrees with label {agree:.3f}")

# Choose the subset on one part of the training set and check it on the other.
rng = np.random.default_rng(0)
perm = rng.permutation(len(y_train))
fit, held = perm[: len(perm) * 4 // 5], perm[len(perm) * 4 // 5 :]
best, best_acc = (), 0.0
for size in range(1, 5):
    for subset in itertools.combinations(range(len(NAMES)), size):
        parity = np.bitwise_xor.reduce(bits_train[fit][:, list(subset)], axis=1).astype(np.int64)
        acc = max(np.mean(parity == y_train[fit]), np.mean(parity != y_train[fit]))
        if acc > best_acc:
            best, best_acc = subset, acc
parity = np.bitwise_xor.reduce(bits_train[:, list(best)], axis=1).astype(np.int64)
flip = int(np.mean(parity[fit] == y_train[fit]) < 0.5)
held_acc = np.mean((parity[held] ^ flip) == y_train[held])
print(f"best parity: {[NAMES[j] for j in best]} (flip {flip}); fit {best_acc:.3f}, held-out {held_acc:.3f}")

preds = np.bitwise_xor.reduce(bits_test[:, list(best)], axis=1).astype(np.int64) ^ flip
os.makedirs("results", exist_ok=True)
np.savetxt("results/test_preds.txt", preds, fmt="%d")
print(f"wrote {len(preds)} predictions, {np.bincount(preds, minlength=2).tolist()}, {time.time() - START:.1f}s")
