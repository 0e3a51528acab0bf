"""patch_match reference: seam strips of each candidate against the picture next to the hole.

For each side of the hole a strip holds the two picture lines outside it, the candidate's two
lines next to them and the steps across the seam, raw and after undoing the candidate's gain
(every candidate was scaled by an unknown factor in [exp(-0.25), exp(0.25)]; the factor is
estimated from the candidate's border against the ring of picture around the hole). One 1-D CNN
shared by the sides and candidates, softmax over the five scores, 180-degree turns as
augmentation and test-time augmentation. The shift machinery covers candidates cut off the
hole's place; the generator cuts them in place (JITTER = 0), so one shift is used.
"""
from __future__ import annotations
import math, os, time
import numpy as np
START = time.time()
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
import torch, torch.nn as nn, torch.nn.functional as F

BUDGET_S = float(os.environ.get("BUDGET", 100))
HOLE, GAP, PAD = 8, 0, 4
SHIFTS = [(0, 0)]
cores = len(os.sched_getaffinity(0))
torch.set_num_threads(cores)
torch.manual_seed(0)


def strips(split):
    """(N, K, 9 shifts, 4 sides, C, 8)."""
    images = np.load(f"data/{split}_images.npy").astype(np.float32)
    holes = np.load(f"data/{split}_holes.npy").astype(np.int64)
    patches = np.load(f"data/{split}_patches.npy").astype(np.float32)
    n, k = patches.shape[:2]
    img = np.pad(images, ((0, 0), (PAD, PAD), (PAD, PAD)))
    r, c = holes[:, :1] + PAD, holes[:, 1:] + PAD
    a, ix = np.arange(HOLE), np.arange(n)[:, None]
    eye = np.eye(3, dtype=np.float32)
    # Each candidate's pixels were scaled by an unknown gain: estimate it from its border against the ring.
    ring = np.concatenate([img[ix, r - 1, c + a], img[ix, r + HOLE, c + a], img[ix, r + a, c - 1], img[ix, r + a, c + HOLE]], 1)
    border = np.concatenate([patches[:, :, 0, :], patches[:, :, -1, :], patches[:, :, :, 0], patches[:, :, :, -1]], 2)
    gain = (border * ring[:, None]).sum(2) / ((border**2).sum(2) + 1e-3)
    gain = np.clip(gain, np.exp(-0.25), np.exp(0.25))[:, :, None].astype(np.float32)
    per_shift = []
    for dr, dc in SHIFTS:
        def row(rr): return img[ix, rr, c + dc + a]
        def col(cc): return img[ix, r + dr + a, cc]
        sides = (
            (row(r - GAP - 2), row(r - GAP - 1), patches[:, :, 0, :], patches[:, :, 1, :], dr + 2),
            (row(r + HOLE + GAP + 1), row(r + HOLE + GAP), patches[:, :, -1, :], patches[:, :, -2, :], 2 - dr),
            (col(c - GAP - 2), col(c - GAP - 1), patches[:, :, :, 0], patches[:, :, :, 1], dc + 2),
            (col(c + HOLE + GAP + 1), col(c + HOLE + GAP), patches[:, :, :, -1], patches[:, :, :, -2], 2 - dc),
        )
        out = []
        for o2, o1, e1, e2, dist in sides:
            o2, o1 = np.repeat(o2[:, None], k, 1), np.repeat(o1[:, None], k, 1)
            oh = np.broadcast_to(eye[dist - 1][None, None, :, None], (n, k, 3, HOLE))
            n1, n2 = e1 * gain, e2 * gain
            lg = np.broadcast_to(np.log(gain), e1.shape)
            feats = np.stack([o2, o1, e1, e2, e1 - o1, e1 - o1 - (o1 - o2) * dist, n1 - o1, n1 - 2 * o1 + o2,
                              (n2 - n1) - (o1 - o2), lg], axis=2)
            out.append(np.concatenate([feats, oh], axis=2))
        per_shift.append(np.stack(out, axis=2))
    return torch.tensor(np.stack(per_shift, axis=2))


C = 13
x_all = strips("train")
y_all = torch.tensor(np.load("data/train_labels.npy").astype(np.int64))
x_test = strips("test")
print(f"strips {tuple(x_all.shape)} in {time.time()-START:.1f}s", flush=True)
perm = torch.randperm(len(x_all), generator=torch.Generator().manual_seed(0))
val_idx, train_idx = perm[:200], perm[200:]
train_idx = perm  # the validation lines report fit only; all samples train
xt, yt, xv, yv = x_all[train_idx], y_all[train_idx], x_all[val_idx], y_all[val_idx]


class Scorer(nn.Module):
    def __init__(self):
        super().__init__()
        self.side = nn.Sequential(nn.Conv1d(C, 32, 3, padding=1), nn.ReLU(), nn.Conv1d(32, 32, 3, padding=1), nn.ReLU())
        self.head = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 1))

    def forward(self, x):
        n, k, s = x.shape[:3]
        h = self.side(x.reshape(-1, C, HOLE))
        h = torch.cat([h.mean(2), h.amax(2)], 1).reshape(n, k, s, 4, 64).sum(3)
        return torch.logsumexp(self.head(h).squeeze(-1), dim=2)


# 180-degree turn: sides swap top<->bottom, left<->right, strips reversed, shifts negated
TURN_SHIFT = [0]
def turned(x):
    return x[:, :, TURN_SHIFT][:, :, :, [1, 0, 3, 2]].flip(-1)
def turn(x):
    f = torch.rand(len(x)) < 0.5
    return torch.where(f[:, None, None, None, None, None], turned(x), x)
def predict(m, x):
    m.eval()
    with torch.no_grad():
        return sum(F.softmax(torch.cat([m(b) for b in xx.split(250)]), 1) for xx in (x, turned(x)))

model = Scorer()
opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=1e-4)
peak, bs, epoch = 3e-3, 64, 0
t0 = time.time(); budget = max(BUDGET_S - (t0 - START), 10)
while time.time() - t0 < budget:
    model.train(); tot = 0
    for idx in torch.randperm(len(xt)).split(bs):
        frac = min((time.time() - t0) / budget, 1)
        for g in opt.param_groups: g["lr"] = peak * min(1, frac / 0.05) * 0.5 * (1 + math.cos(math.pi * frac))
        loss = F.cross_entropy(model(turn(xt[idx])), yt[idx])
        opt.zero_grad(); loss.backward(); opt.step(); tot += loss.item() * len(idx)
    epoch += 1
    print(f"epoch {epoch} t={time.time()-START:.0f} loss {tot/len(xt):.3f} val {(predict(model, xv).argmax(1)==yv).float().mean():.3f}", flush=True)
preds = predict(model, x_test).argmax(1).numpy()
os.makedirs("results", exist_ok=True)
np.savetxt("results/test_preds.txt", preds, fmt="%d")
print(f"total {time.time()-START:.1f}s")
