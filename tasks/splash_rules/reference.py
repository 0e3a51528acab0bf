"""splash_rules reference: find the droplets, then test their layout for each symmetry.

A CNN sees paint texture, and the texture is alike in every class. The rule shows in how
droplets far apart relate to each other around the blot, so this script measures that:

1. Separate paint from paper: the paper's colour is the median of the picture's border, the
   paint's is that of the pixels farthest from it; projecting every pixel onto the line between
   the two gives a paint coverage in [0, 1], whatever the colours.
2. Label the connected paint regions; the biggest is the blot, the rest are droplets, each
   reduced to its position (relative to the blot's centre) and its amount of paint.
3. For each candidate symmetry (turns by 1/2, 1/3, and, as controls, 1/4 and 1/5 of a circle;
   mirrors about the best of 72 lines), move every droplet and see how well it lands on another
   droplet of similar size; the centre is refined over a small grid because the blot is not
   symmetric.
4. A small network learns the four rules from these match scores and the droplet count.
"""

from __future__ import annotations

import os
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from scipy import ndimage

START = time.time()
torch.manual_seed(0)
np.random.seed(0)
# The network is tiny: one thread is fastest, and it never fights other processes for cores.
torch.set_num_threads(1)
CLASSES = 4

x_train = np.load("data/train_data.npy")
y_train = np.load("data/train_labels.npy").astype(np.int64)
x_test = np.load("data/test_data.npy")
print(f"train {x_train.shape} {x_train.dtype}, test {x_test.shape}, labels {np.bincount(y_train).tolist()}")


def coverage(img: np.ndarray) -> np.ndarray:
    """Share of paint in each pixel, from the paper's and the paint's colours."""
    rgb = img.astype(np.float64) / 255
    border = np.concatenate([rgb[:2].reshape(-1, 3), rgb[-2:].reshape(-1, 3), rgb[:, :2].reshape(-1, 3),
                             rgb[:, -2:].reshape(-1, 3)])  # fmt: skip
    paper = np.median(border, axis=0)
    far = np.linalg.norm(rgb - paper, axis=2)
    paint = rgb[far >= np.quantile(far, 0.995)].mean(axis=0)
    axis = paint - paper
    return np.clip(((rgb - paper) @ axis) / (axis @ axis), 0.0, 1.0)


def droplets(img: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Droplet positions as complex offsets from the blot's centre, and their amounts of paint."""
    alpha = coverage(img)
    labels, n = ndimage.label(alpha > 0.35)
    if n < 2:
        return np.zeros(0, complex), np.zeros(0)
    index = np.arange(1, n + 1)
    mass = ndimage.sum_labels(alpha, labels, index)
    centres = np.array(ndimage.center_of_mass(alpha, labels, index))
    points = centres[:, 1] + 1j * centres[:, 0]
    blot = int(np.argmax(mass))
    keep = (np.arange(n) != blot) & (mass >= 1.0)
    return points[keep] - points[blot], mass[keep]


SHIFTS = (np.arange(-2, 3) * 0.75)[:, None] + 1j * (np.arange(-2, 3) * 0.75)[None, :]
SHIFTS = SHIFTS.reshape(-1)  # candidate corrections of the centre, in pixels
LINES = np.exp(2j * np.linspace(0, np.pi, 72, endpoint=False))  # mirror about a line: z -> line * conj(z)


def match(moved: np.ndarray, points: np.ndarray, logm: np.ndarray) -> np.ndarray:
    """How well moved droplets (..., n) land on other droplets of similar size, in [0, 1]."""
    d2 = np.abs(moved[..., :, None] - points[..., None, :]) ** 2
    n = points.shape[-1]
    d2 = d2 + np.eye(n) * 1e6  # a droplet is not its own twin
    near = np.exp(-d2 / (2 * 1.5**2)) * np.exp(-((logm[:, None] - logm[None]) ** 2) / (2 * 0.4**2))
    return near.max(axis=-1).mean(axis=-1)


def features(img: np.ndarray) -> np.ndarray:
    points, mass = droplets(img)
    if len(points) < 2:
        return np.zeros(8)
    logm = np.log(mass)
    # Every candidate centre at once: (shifts, n) positions relative to it.
    z = points[None, :] - SHIFTS[:, None]
    scores = []
    for turns in (2, 3, 4, 5):
        rot = np.exp(2j * np.pi / turns)
        both = (match(z * rot, z, logm) + match(z / rot, z, logm)) / 2
        scores.append(both.max())
    mirrored = LINES[None, :, None] * np.conj(z)[:, None, :]
    scores.append(match(mirrored, np.broadcast_to(z[:, None, :], mirrored.shape), logm).max())
    return np.array([*scores, np.log(len(points)), np.mean(np.abs(points)), np.median(logm)])


f_train = np.nan_to_num(np.stack([features(img) for img in x_train]))
f_test = np.nan_to_num(np.stack([features(img) for img in x_test]))
print(f"features {f_train.shape} ready at {time.time() - START:.1f}s")
mean, std = f_train.mean(0), f_train.std(0) + 1e-6
f_train, f_test = (f_train - mean) / std, (f_test - mean) / std

perm = np.random.permutation(len(f_train))
n_val = 300
val_idx, train_idx = perm[:n_val], perm[n_val:]


def fit(x: np.ndarray, y: np.ndarray, steps: int = 500, seed: int = 0) -> nn.Module:
    """A small MLP on the standardised features; the whole training set is one batch."""
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(x.shape[1], 64), nn.ReLU(), nn.Dropout(0.1), nn.Linear(64, CLASSES))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=1e-3)
    xt, yt = torch.tensor(x, dtype=torch.float32), torch.tensor(y)
    model.train()
    for _ in range(steps):
        loss = F.cross_entropy(model(xt), yt, label_smoothing=0.05)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model.eval()


def predict(model: nn.Module, x: np.ndarray) -> np.ndarray:
    with torch.no_grad():
        return model(torch.tensor(x, dtype=torch.float32)).argmax(1).numpy()


val_acc = np.mean(predict(fit(f_train[train_idx], y_train[train_idx]), f_train[val_idx]) == y_train[val_idx])
print(f"validation accuracy {val_acc:.3f} at {time.time() - START:.1f}s")
preds = predict(fit(f_train, y_train), f_test).astype(np.int64)
os.makedirs("results", exist_ok=True)
np.savetxt("results/test_preds.txt", preds, fmt="%d")
print(f"wrote {len(preds)} predictions, class counts {np.bincount(preds, minlength=CLASSES).tolist()}")
print(f"total {time.time() - START:.1f}s")
