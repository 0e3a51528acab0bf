"""patch_match reference: score how well each candidate's edges continue the picture around the hole.

The distractors come from pictures much like the true one, so a candidate's content says little;
what gives it away is whether its border continues the picture across the hole's four sides. For
each side of the hole the script takes a strip: the two rows of picture just outside the hole,
the candidate's two rows next to them, and their differences (the step across the seam, and the
step against a straight continuation of the picture's gradient). One small 1-D CNN, shared by the
four sides and the five candidates, turns each strip into features; the sides' features are
summed and a small head gives the candidate's score; a softmax over the five scores is trained on
the index of the right candidate. Sharing makes the model blind to the candidates' order and the
sides' roles; turning a whole puzzle by 180 degrees (every strip reversed) gives a puzzle of the
same kind, used as augmentation and test-time augmentation.
"""

from __future__ import annotations

import math
import os
import time

import numpy as np

START = time.time()
# Idle OpenMP threads must sleep, not spin: on a busy CPU spinning makes each step many times slower.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

BUDGET_S = 60.0  # training stops here (counted from the start), leaving room on a loaded machine
HOLE = 8
cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
torch.set_num_threads(cores)
torch.manual_seed(0)
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def strips(split: str) -> torch.Tensor:
    """(N, K, 4 sides, 7 channels, 8) seam strips of every candidate."""
    images = np.load(f"data/{split}_images.npy").astype(np.float32)
    holes = np.load(f"data/{split}_holes.npy").astype(np.int64)
    patches = np.load(f"data/{split}_patches.npy").astype(np.float32)
    n, k = patches.shape[:2]
    r, c, a, rows_of = holes[:, :1], holes[:, 1:], np.arange(HOLE), np.arange(n)[:, None]

    def row(rr: np.ndarray) -> np.ndarray:
        return images[rows_of, rr, c + a]

    def col(cc: np.ndarray) -> np.ndarray:
        return images[rows_of, r + a, cc]

    # (outer, next to the hole) picture lines and (edge, next inside) candidate lines, per side.
    sides = (
        (row(r - 2), row(r - 1), patches[:, :, 0, :], patches[:, :, 1, :]),
        (row(r + HOLE + 1), row(r + HOLE), patches[:, :, -1, :], patches[:, :, -2, :]),
        (col(c - 2), col(c - 1), patches[:, :, :, 0], patches[:, :, :, 1]),
        (col(c + HOLE + 1), col(c + HOLE), patches[:, :, :, -1], patches[:, :, :, -2]),
    )
    out = []
    for outer2, outer1, edge1, edge2 in sides:
        o2, o1 = np.repeat(outer2[:, None], k, 1), np.repeat(outer1[:, None], k, 1)
        steps = (edge1 - o1, edge1 - (2 * o1 - o2), (edge2 - edge1) - (o1 - o2))
        out.append(np.stack([o2, o1, edge1, edge2, *steps], axis=2))
    return torch.tensor(np.stack(out, axis=2), device=device)


x_all = strips("train")
y_all = torch.tensor(np.load("data/train_labels.npy").astype(np.int64), device=device)
x_test = strips("test")
print(f"strips: train {tuple(x_all.shape)}, test {tuple(x_test.shape)}, device {device}, threads {cores}")

perm = torch.randperm(len(x_all), generator=torch.Generator().manual_seed(0)).to(device)
val_idx, train_idx = perm[:200], perm[200:]
xt, yt, xv, yv = x_all[train_idx], y_all[train_idx], x_all[val_idx], y_all[val_idx]


class Scorer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.side = nn.Sequential(nn.Conv1d(7, 32, 3, padding=1), nn.ReLU(), nn.Conv1d(32, 32, 3, padding=1), nn.ReLU())
        self.head = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n, k = x.shape[:2]
        h = self.side(x.reshape(-1, 7, HOLE))
        h = torch.cat([h.mean(dim=2), h.amax(dim=2)], dim=1).reshape(n, k, 4, 64).sum(dim=2)
        return self.head(h).squeeze(-1)


def turn(x: torch.Tensor) -> torch.Tensor:
    """Turn a random half of the puzzles by 180 degrees: every strip reversed."""
    flip = torch.rand(len(x), device=device) < 0.5
    return torch.where(flip[:, None, None, None, None], x.flip(4), x)


def predict(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    model.eval()
    with torch.no_grad():
        return F.softmax(model(x), dim=1) + F.softmax(model(x.flip(4)), dim=1)


model = Scorer().to(device)
opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=1e-4)
peak_lr, batch_size, epoch = 3e-3, 64, 0
train_start = time.time()
budget = max(BUDGET_S - (train_start - START), 10.0)
while time.time() - train_start < budget:
    model.train()
    total = 0.0
    for idx in torch.randperm(len(xt), device=device).split(batch_size):
        # Warm up, then cosine decay over the wall-clock budget.
        frac = min((time.time() - train_start) / budget, 1.0)
        lr = peak_lr * min(1.0, frac / 0.05) * 0.5 * (1 + math.cos(math.pi * frac))
        for group in opt.param_groups:
            group["lr"] = lr
        loss = F.cross_entropy(model(turn(xt[idx])), yt[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        total += loss.item() * len(idx)
    epoch += 1
    line = f"epoch {epoch:3d}  t={time.time() - START:5.1f}s  lr={lr:.2e}  loss={total / len(xt):.4f}"
    if epoch % 5 == 0:
        line += f"  val_acc={(predict(model, xv).argmax(1) == yv).float().mean().item():.3f}"
    print(line)

print(f"final val_acc={(predict(model, xv).argmax(1) == yv).float().mean().item():.3f} after {epoch} epochs")
preds = predict(model, x_test).argmax(1).cpu().numpy()
os.makedirs("results", exist_ok=True)
np.savetxt("results/test_preds.txt", preds, fmt="%d")
print(f"wrote {len(preds)} predictions {np.bincount(preds, minlength=5).tolist()}, total {time.time() - START:.1f}s")
