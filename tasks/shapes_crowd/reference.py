"""shapes_crowd reference: the points that chain together in the files become a fixed-size 2-D
image, a small CNN with global pooling answers five yes/no questions at once.

The clutter lies along lines, arcs and stretches of outlines as densely as the shapes do, so an
image of all points shows shapes that are not there. What sets the outlines apart is the files'
order: a shape's points are written in runs along its outline, so a file neighbour is a few
thousandths away, while clutter and noise come one point at a time in random order. Points linked
to their file neighbours (closer than LINK) in chains of at least MIN_CHAIN are kept, the rest
dropped; the image holds the kept points and lines drawn along each chain, scaled by the chains'
own spacing so that density does not matter. Shapes sit anywhere, so convolutions with global max
pooling look for each kind's local pattern (corners of 60, 90, 108 or 36 degrees, or none)
wherever it is. Several kinds can be present at once, so the head has five independent sigmoid
outputs trained with binary cross-entropy. The eight symmetries of the square keep the data's
distribution, so they serve as augmentation and test-time augmentation. Training runs on a
wall-clock budget that leaves room for prediction; it scales with WEIRDML_TIME_LIMIT_S (120 s by default).
"""

from __future__ import annotations

import math
import os
import time
from itertools import pairwise

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

START = time.time()
LIMIT_S = float(os.environ.get("WEIRDML_TIME_LIMIT_S", "120"))  # the task's time limit; every budget scales with it
MARGIN_S = 12.0 * LIMIT_S / 120  # kept free at the end (12 s at 120 s): writing, exiting, a busier machine
BINS = 48
KINDS = 5
LINK = 0.03  # file neighbours closer than this are linked
MIN_CHAIN = 3  # points in the shortest chain kept
SUB = 4  # points drawn along each link
torch.manual_seed(0)
np.random.seed(0)
cores = len(os.sched_getaffinity(0))
# Threads that spin on cores other processes are using slow training several-fold.
torch.set_num_threads(cores if os.getloadavg()[0] < cores else 1)
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def load(split: str) -> list[np.ndarray]:
    points = np.load(f"data/{split}_data.npy").astype(np.float32)
    offsets = np.load(f"data/{split}_offsets.npy")
    return [points[a:b] for a, b in pairwise(offsets)]


def chained(cloud: np.ndarray) -> list[np.ndarray]:
    """The chains of the cloud: stretches of at least MIN_CHAIN points one after another in the
    file, each within LINK of the one before."""
    close = np.linalg.norm(np.diff(cloud, axis=0), axis=1) < LINK
    # Chain boundaries: wherever a link breaks; a chain of k points has k - 1 close links.
    breaks = np.flatnonzero(~close) + 1
    return [c for c in np.split(cloud, breaks) if len(c) >= MIN_CHAIN]


def histogram(cloud: np.ndarray) -> np.ndarray:
    """(P, 2) points -> (2, BINS, BINS): the chained points, and lines drawn between the
    neighbours of each chain; scaled by the chains' own spacing so that density does not matter."""
    chains = chained(cloud)
    out = np.zeros((2, BINS * BINS), dtype=np.float64)
    if not chains:
        return out.reshape(2, BINS, BINS).astype(np.float32)
    kept = np.concatenate(chains)
    a = np.concatenate([c[:-1] for c in chains])
    b = np.concatenate([c[1:] for c in chains])
    spacing = float(np.median(np.linalg.norm(b - a, axis=1)))
    frac = (np.arange(SUB) + 0.5) / SUB
    lines = (a[:, None] * (1 - frac[:, None]) + b[:, None] * frac[:, None]).reshape(-1, 2)
    for channel, pts, weight in ((0, kept, spacing), (1, lines, spacing / SUB)):
        idx = np.clip((pts * BINS).astype(np.int64), 0, BINS - 1)
        out[channel] = np.bincount(idx[:, 1] * BINS + idx[:, 0], minlength=BINS * BINS) * weight
    # A straight outline across a bin gives about 1; square roots tame the dense runs.
    return np.sqrt(out * BINS).reshape(2, BINS, BINS).astype(np.float32)


train_clouds, test_clouds = load("train"), load("test")
y_all = np.load("data/train_labels.npy").astype(np.float32)
print(f"train {len(train_clouds)} clouds, test {len(test_clouds)}, device {device}, threads {torch.get_num_threads()}")
sizes = [len(c) for c in train_clouds]
print(f"points per cloud: min {min(sizes)}, median {int(np.median(sizes))}, max {max(sizes)}")
print(f"share of clouds holding each kind: {np.round(y_all.mean(0), 3).tolist()}")
h_all = torch.tensor(np.stack([histogram(c) for c in train_clouds]), device=device)
h_test = torch.tensor(np.stack([histogram(c) for c in test_clouds]), device=device)
print(f"histograms ready at {time.time() - START:.1f}s")
kept_share = np.mean([sum(len(c) for c in chained(cloud)) / len(cloud) for cloud in train_clouds[:200]])
print(f"share of points in chains: {kept_share:.3f}")

perm = np.random.permutation(len(h_all))
n_val = 200
val_idx, train_idx = perm[:n_val], perm[n_val:]
ht, yt = h_all[train_idx], torch.tensor(y_all[train_idx], device=device)
hv, yv = h_all[val_idx], torch.tensor(y_all[val_idx], device=device)


def symmetry(h: torch.Tensor, k: int) -> torch.Tensor:
    """The k-th of the eight symmetries of the square (k in 0..7)."""
    return torch.rot90(h.flip(3) if k >= 4 else h, k % 4, (2, 3))


def augment(h: torch.Tensor) -> torch.Tensor:
    """A random symmetry of the square per batch, plus a small random shift per sample."""
    h = symmetry(h, int(np.random.randint(8)))
    shift = np.random.randint(-3, 4, size=2)
    return torch.roll(h, shifts=(int(shift[0]), int(shift[1])), dims=(2, 3))


def conv(cin: int, cout: int, kernel: int = 3, stride: int = 1) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(cin, cout, kernel, stride, kernel // 2), nn.BatchNorm2d(cout), nn.ReLU())


class HistCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        # A strided first layer keeps the fine grid's detail at a quarter of the cost.
        self.features = nn.Sequential(
            conv(2, 24, 5, 2), conv(24, 32), nn.MaxPool2d(2), conv(32, 64), nn.MaxPool2d(2), conv(64, 96)
        )
        self.head = nn.Sequential(nn.Dropout(0.2), nn.Linear(192, KINDS))

    def forward(self, hist: torch.Tensor) -> torch.Tensor:
        f = self.features(hist)
        return self.head(torch.cat([f.amax(dim=(2, 3)), f.mean(dim=(2, 3))], dim=1))


def predict(model: nn.Module, hist: torch.Tensor) -> torch.Tensor:
    """Presence probabilities averaged over the eight symmetries of the square."""
    model.eval()
    probs = torch.zeros(len(hist), KINDS, device=device)
    with torch.no_grad():
        for start in range(0, len(hist), 250):
            h = hist[start : start + 250]
            for k in range(8):
                probs[start : start + 250] += torch.sigmoid(model(symmetry(h, k)))
    return probs / 8


def decide(probs: torch.Tensor) -> torch.Tensor:
    """Kinds above one half, but one to three of them: the likeliest always, never a fourth."""
    top3 = torch.zeros_like(probs, dtype=torch.bool).scatter_(1, probs.topk(3, dim=1).indices, True)
    rows = ((probs > 0.5) & top3).long()
    rows[torch.arange(len(probs)), probs.argmax(1)] = 1
    return rows


model = HistCNN().to(device)
# Training stops early enough to predict the test set with all eight symmetries; that cost is
# measured here (on the validation set, scaled to the test set's size), so a slow or busy
# machine trains for less rather than running out of time.
predict(model, hv[:16])  # the first call pays for setting up the kernels: not timed
tick = time.time()
predict(model, hv)
predict_s = (time.time() - tick) * (len(h_test) + len(hv)) / len(hv)
BUDGET_S = min(95.0 * LIMIT_S / 120, LIMIT_S - MARGIN_S - 1.5 * predict_s)
print(f"prediction takes about {predict_s:.1f}s; training until {BUDGET_S:.1f}s")
opt = torch.optim.AdamW(model.parameters(), lr=6e-3, weight_decay=1e-4)
peak_lr = 6e-3
batch_size = 64
epoch = 0
epoch_s = 0.0
while time.time() - START + epoch_s < BUDGET_S:
    tick = time.time()
    model.train()
    order = torch.randperm(len(ht), device=device)
    total = 0.0
    for i in range(0, len(order), batch_size):
        # Warm up, then cosine decay over the wall-clock budget.
        frac = min((time.time() - START) / BUDGET_S, 1.0)
        lr = peak_lr * min(1.0, frac / 0.05) * 0.5 * (1 + math.cos(math.pi * frac))
        for group in opt.param_groups:
            group["lr"] = lr
        idx = order[i : i + batch_size]
        loss = F.binary_cross_entropy_with_logits(model(augment(ht[idx])), yt[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        total += loss.item() * len(idx)
    epoch += 1
    epoch_s = time.time() - tick
    line = f"epoch {epoch:3d}  t={time.time() - START:5.1f}s  lr={lr:.2e}  loss={total / len(ht):.4f}"
    if epoch % 5 == 0:
        val_acc = (decide(predict(model, hv)) == yv.long()).float().mean().item()
        line += f"  val_acc={val_acc:.3f}"
    print(line)

val_acc = (decide(predict(model, hv)) == yv.long()).float().mean().item()
print(f"final val_acc={val_acc:.3f} (per entry) after {epoch} epochs")
preds = decide(predict(model, h_test)).cpu().numpy().astype(np.int64)
os.makedirs("results", exist_ok=True)
np.savetxt("results/test_preds.txt", preds, fmt="%d")
print(f"wrote {preds.shape} predictions, kinds per cloud {np.bincount(preds.sum(1), minlength=4).tolist()}")
print(f"total {time.time() - START:.1f}s")
