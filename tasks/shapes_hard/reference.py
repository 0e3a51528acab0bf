"""shapes_hard reference: a 2-D histogram of each cloud, a small CNN, heavy geometric augmentation.

Size, position and rotation are random, so the network must find the outline's local pattern
(corners of 60, 90, 108 or 36 degrees, or none) wherever it is: convolutions with global pooling
give translation invariance, random rotations, scales, shifts and mirrors teach the rest, and the
eight symmetries of the square serve as test-time augmentation (they map the square onto itself,
so they leave the data's distribution unchanged).
"""

from __future__ import annotations

import math
import os
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

START = time.time()
LIMIT_S = float(os.environ.get("WEIRDML_TIME_LIMIT_S", "120"))  # the task's time limit; every budget scales with it
BUDGET_S = 80.0 * LIMIT_S / 120  # training stops here (80 s at 120 s), leaving room for prediction on a loaded machine
BINS = 32
LO, HI = -0.05, 1.05  # some points lie slightly outside the unit square
torch.manual_seed(0)
np.random.seed(0)
cores = os.cpu_count() or 1
# Threads that spin on cores other processes are using slow training several-fold.
torch.set_num_threads(cores if os.getloadavg()[0] < cores else 1)
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

x_all = np.load("data/train_data.npy").astype(np.float32)
y_all = np.load("data/train_flags.npy").astype(np.int64)
x_test = np.load("data/test_data.npy").astype(np.float32)
print(f"train {x_all.shape}, test {x_test.shape}, device {device}, threads {torch.get_num_threads()}")

perm = np.random.permutation(len(x_all))
n_val = 100
val_idx, train_idx = perm[:n_val], perm[n_val:]
xt = torch.tensor(x_all[train_idx], device=device)
yt = torch.tensor(y_all[train_idx], device=device)
xv = torch.tensor(x_all[val_idx], device=device)
yv = torch.tensor(y_all[val_idx], device=device)
xs = torch.tensor(x_test, device=device)


def dense(points: torch.Tensor) -> torch.Tensor:
    """1.0 for the 40% of each cloud's points with the closest 8th neighbour, else 0.0.

    Outline points crowd along a line while most noise is spread out; the ranking depends only
    on distances, so it survives every rotation, scale and shift the augmentation applies.
    """
    out = []
    for start in range(0, len(points), 100):
        chunk = points[start : start + 100]
        kth = torch.cdist(chunk, chunk).topk(9, dim=2, largest=False).values[..., -1]
        out.append((kth <= kth.quantile(0.4, dim=1, keepdim=True)).float())
    return torch.cat(out)


def histogram(points: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """(N, P, 2) points -> (N, 2, BINS, BINS): all points and dense points, square-rooted counts."""
    u = (points - LO) / (HI - LO)
    keep = ((u >= 0) & (u < 1)).all(dim=2).float()
    idx = (u.clamp(0, 1 - 1e-6) * BINS).long()
    flat = idx[..., 1] * BINS + idx[..., 0]
    counts = torch.zeros(len(points), 2, BINS * BINS, device=points.device)
    counts[:, 0].scatter_add_(1, flat, keep)
    counts[:, 1].scatter_add_(1, flat, keep * weight)
    return counts.view(-1, 2, BINS, BINS).sqrt()


def augment(points: torch.Tensor) -> torch.Tensor:
    """Random rotation, scale, mirror and shift about the square's centre."""
    n = len(points)
    angle = torch.rand(n, device=device) * 2 * math.pi
    scale = torch.exp(0.12 * torch.randn(n, device=device))
    cos, sin = torch.cos(angle) * scale, torch.sin(angle) * scale
    rot = torch.stack([torch.stack([cos, sin], 1), torch.stack([-sin, cos], 1)], 1)
    mirror = torch.where(torch.rand(n, device=device) < 0.5, -1.0, 1.0)
    rot[:, 0, :] *= mirror[:, None]
    shift = (torch.rand(n, 1, 2, device=device) - 0.5) * 0.2
    return (points - 0.5) @ rot + 0.5 + shift


def block(cin: int, cout: int) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(), nn.MaxPool2d(2))


class HistCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            block(2, 16),
            block(16, 32),
            block(32, 64),
            nn.Conv2d(64, 128, 3, padding=1),
            nn.BatchNorm2d(128),
            nn.ReLU(),
        )
        self.head = nn.Sequential(nn.Dropout(0.3), nn.Linear(256, 5))

    def forward(self, hist: torch.Tensor) -> torch.Tensor:
        f = self.features(hist)
        return self.head(torch.cat([f.amax(dim=(2, 3)), f.mean(dim=(2, 3))], dim=1))


def predict(model: nn.Module, points: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """Class probabilities averaged over the 8 symmetries of the square."""
    model.eval()
    probs = torch.zeros(len(points), 5, device=device)
    with torch.no_grad():
        for start in range(0, len(points), 250):
            hist = histogram(points[start : start + 250], weight[start : start + 250])
            for flip in (False, True):
                h = hist.flip(3) if flip else hist
                for k in range(4):
                    probs[start : start + 250] += F.softmax(model(torch.rot90(h, k, (2, 3))), dim=1)
    return probs / 8


wt, wv, ws = dense(xt), dense(xv), dense(xs)
print(f"density weights ready at {time.time() - START:.1f}s")
model = HistCNN().to(device)
opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=1e-4)
peak_lr = 3e-3
batch_size = 50
epoch = 0
while time.time() - START < BUDGET_S:
    model.train()
    order = torch.randperm(len(xt), device=device)
    total = 0.0
    for i in range(0, len(order), batch_size):
        # Warm up, then cosine decay over the wall-clock budget.
        frac = min((time.time() - START) / BUDGET_S, 1.0)
        lr = peak_lr * min(1.0, frac / 0.05) * 0.5 * (1 + math.cos(math.pi * frac))
        for group in opt.param_groups:
            group["lr"] = lr
        idx = order[i : i + batch_size]
        loss = F.cross_entropy(model(histogram(augment(xt[idx]), wt[idx])), yt[idx], label_smoothing=0.05)
        opt.zero_grad()
        loss.backward()
        opt.step()
        total += loss.item() * len(idx)
    epoch += 1
    line = f"epoch {epoch:3d}  t={time.time() - START:5.1f}s  lr={lr:.2e}  loss={total / len(xt):.4f}"
    if epoch % 5 == 0:
        val_acc = (predict(model, xv, wv).argmax(1) == yv).float().mean().item()
        line += f"  val_acc={val_acc:.3f}"
    print(line)

val_acc = (predict(model, xv, wv).argmax(1) == yv).float().mean().item()
print(f"final val_acc={val_acc:.3f} after {epoch} epochs")
preds = predict(model, xs, ws).argmax(1).cpu().numpy()
os.makedirs("results", exist_ok=True)
np.savetxt("results/test_preds.txt", preds, fmt="%d")
counts = np.bincount(preds, minlength=5).tolist()
print(f"wrote {len(preds)} predictions, class counts {counts}, total {time.time() - START:.1f}s")
