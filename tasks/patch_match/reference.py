"""patch_match reference: put every candidate in the hole and let one small CNN score the seams.

The distractors come from pictures much like the true one, so a candidate's content says little;
what gives it away is whether its edges continue the picture around the hole. So each candidate is
pasted into the hole and a window around the hole (the patch plus a 4-pixel ring of picture) goes
through one shared CNN that returns a score; a softmax over the five scores is trained with the
index of the right candidate. Sharing the scorer makes the model blind to the candidates' order,
and a hand-made seam cost (how far each border row of the patch is from the picture just outside
it) is fed in as a second channel. Left-right and up-down mirrors of a whole puzzle are puzzles of
the same kind, so they serve as augmentation and as test-time augmentation.
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

BUDGET_S = 75.0  # training stops here, leaving room for prediction on a loaded machine
HOLE, RING, PAD = 8, 4, 2
WIN = HOLE + 2 * RING
cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
torch.set_num_threads(cores)
torch.manual_seed(0)
np.random.seed(0)
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def load(split: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(N, K, 2, WIN, WIN): each candidate pasted into its picture, the window around the hole, and
    the seam cost map; and (N,) labels or nothing."""
    images = np.load(f"data/{split}_images.npy").astype(np.float32)
    holes = np.load(f"data/{split}_holes.npy").astype(np.int64)
    patches = np.load(f"data/{split}_patches.npy").astype(np.float32)
    n, k = patches.shape[:2]
    # Padding lets a window with a 4-pixel ring fit around a hole 2 pixels from the border.
    padded = np.pad(images, ((0, 0), (PAD, PAD), (PAD, PAD)))
    out = np.zeros((n, k, 2, WIN, WIN), dtype=np.float32)
    for i in range(n):
        r, c = holes[i] + PAD - RING
        window = padded[i, r : r + WIN, c : c + WIN]
        for j in range(k):
            pasted = window.copy()
            pasted[RING : RING + HOLE, RING : RING + HOLE] = patches[i, j]
            out[i, j, 0] = pasted
            # Seam cost: how much each pixel differs from its neighbours across the hole's border.
            dy = np.abs(np.diff(pasted, axis=0))
            dx = np.abs(np.diff(pasted, axis=1))
            seam = np.zeros((WIN, WIN), dtype=np.float32)
            seam[RING - 1, RING : RING + HOLE] = dy[RING - 1, RING : RING + HOLE]
            seam[RING + HOLE - 1, RING : RING + HOLE] = dy[RING + HOLE - 1, RING : RING + HOLE]
            seam[RING : RING + HOLE, RING - 1] = dx[RING : RING + HOLE, RING - 1]
            seam[RING : RING + HOLE, RING + HOLE - 1] = dx[RING : RING + HOLE, RING + HOLE - 1]
            out[i, j, 1] = seam
    return torch.tensor(out, device=device), torch.tensor(holes)


x_all, _ = load("train")
y_all = torch.tensor(np.load("data/train_labels.npy").astype(np.int64), device=device)
x_test, _ = load("test")
print(f"train {tuple(x_all.shape)}, test {tuple(x_test.shape)}, device {device}, threads {torch.get_num_threads()}")
print(f"windows ready at {time.time() - START:.1f}s")

perm = torch.randperm(len(x_all), generator=torch.Generator().manual_seed(0))
val_idx, train_idx = perm[:200], perm[200:]
xt, yt, xv, yv = x_all[train_idx], y_all[train_idx], x_all[val_idx], y_all[val_idx]


class Scorer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(2, 32, 3, padding=1),
            nn.ReLU(),
            nn.Conv2d(32, 32, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Flatten(),
            nn.Linear(64 * (WIN // 4) ** 2, 64),
            nn.ReLU(),
            nn.Linear(64, 1),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n, k = x.shape[:2]
        return self.net(x.reshape(n * k, *x.shape[2:])).reshape(n, k)


def mirror(x: torch.Tensor) -> torch.Tensor:
    """Random left-right and up-down mirrors of whole puzzles (the seam map mirrors with them)."""
    flip_w = torch.rand(len(x), device=device) < 0.5
    flip_h = torch.rand(len(x), device=device) < 0.5
    x = torch.where(flip_w[:, None, None, None, None], x.flip(4), x)
    return torch.where(flip_h[:, None, None, None, None], x.flip(3), x)


def predict(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    model.eval()
    out = torch.zeros(x.shape[:2], device=device)
    with torch.no_grad():
        for start in range(0, len(x), 250):
            chunk = x[start : start + 250]
            for view in (chunk, chunk.flip(4), chunk.flip(3), chunk.flip(3).flip(4)):
                out[start : start + 250] += F.softmax(model(view), dim=1)
    return out


model = Scorer().to(device)
opt = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=1e-4)
peak_lr, batch_size, epoch = 2e-3, 64, 0
train_start = time.time()
budget = BUDGET_S - (train_start - START)
while time.time() - train_start < budget:
    model.train()
    order = torch.randperm(len(xt), device=device)
    total = 0.0
    for i in range(0, len(order), batch_size):
        frac = min((time.time() - train_start) / budget, 1.0)
        lr = peak_lr * min(1.0, frac / 0.05) * 0.5 * (1 + math.cos(math.pi * frac))
        for group in opt.param_groups:
            group["lr"] = lr
        idx = order[i : i + batch_size]
        loss = F.cross_entropy(model(mirror(xt[idx])), yt[idx])
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
