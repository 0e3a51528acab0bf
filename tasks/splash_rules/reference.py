"""splash_rules reference: measure every droplet, then learn the rule from a few relations.

A CNN sees paint texture, and the texture is alike in every class. The rule lives in how each
droplet relates to the blot it flew from, so this script measures that directly:

1. Separate paint from paper: the paper's colour is the median of the picture's border, the
   paint's is that of the pixels farthest from it; projecting every pixel onto the line between
   the two gives a paint coverage in [0, 1], whatever the colours.
2. Label the connected paint regions; the biggest is the blot, its centre the origin of flight.
3. For every droplet: its distance from the blot's centre, its amount of paint, and the skewness
   of its paint along the line of flight (a teardrop's thin tail makes the skewness positive on
   the side the tail points to).
4. Per picture: rank and linear correlations of size with distance, and summaries of the signed
   skewness; a small network learns the four rules from these features.
"""

from __future__ import annotations

import os
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from scipy import ndimage
from scipy.stats import spearmanr

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


def features(img: np.ndarray) -> np.ndarray:
    alpha = coverage(img)
    labels, n = ndimage.label(alpha > 0.35)
    if n < 3:
        return np.zeros(10)
    index = np.arange(1, n + 1)
    mass = ndimage.sum_labels(alpha, labels, index)
    blot = int(np.argmax(mass))
    ys, xs = np.indices(alpha.shape)
    w = alpha * (labels > 0)
    cy = ndimage.sum_labels(w * ys, labels, index) / mass
    cx = ndimage.sum_labels(w * xs, labels, index) / mass
    keep = (np.arange(n) != blot) & (mass >= 1.0)
    if keep.sum() < 3:
        return np.zeros(10)
    dy, dx = cy - cy[blot], cx - cx[blot]
    dist = np.hypot(dy, dx)
    uy, ux = dy / np.maximum(dist, 1e-9), dx / np.maximum(dist, 1e-9)
    # Position of every paint pixel along its droplet's line of flight, from the droplet's centroid.
    lab = labels - 1
    inside = labels > 0
    t = np.zeros_like(alpha)
    t[inside] = (ys[inside] - cy[lab[inside]]) * uy[lab[inside]] + (xs[inside] - cx[lab[inside]]) * ux[lab[inside]]
    m2 = ndimage.sum_labels(w * t**2, labels, index) / mass
    m3 = ndimage.sum_labels(w * t**3, labels, index) / mass
    skew = (m3 / np.maximum(m2, 1e-6) ** 1.5)[keep]
    dist, mass = dist[keep], mass[keep]
    size_rank = spearmanr(mass, dist).statistic
    size_lin = np.corrcoef(np.log(mass), dist)[0, 1]
    heavy = mass >= np.median(mass)
    return np.array([
        size_rank, size_lin, np.mean(skew), np.median(skew), np.mean(skew > 0),
        np.average(skew, weights=mass), np.mean(skew[heavy]), np.mean(np.sign(skew) * np.sqrt(np.abs(skew))),
        np.log(keep.sum()), dist[heavy].mean() / dist.mean() - 1,
    ])  # fmt: skip


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
