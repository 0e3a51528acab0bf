"""patch_match reference: seam strips of each candidate, in each orientation the generator uses
(TURNS = 4: the 4 quarter turns; 8 would add their mirror images), against the picture next to
the hole, scored by a small network trained on the labelled samples and on many more samples made
from the shown pictures the way the task's were made. A candidate's score is the log-sum-exp of
its orientations' scores (every candidate was turned after it was cut: the right one fits only
once turned back), softmax over the five.

For each side of the hole a strip holds the two picture lines outside it, the candidate's two
lines next to them and the steps across the seam, raw and after undoing the candidate's gain
(every candidate was scaled by an unknown factor in [exp(-0.25), exp(0.25)]; the factor is
estimated from the candidate's border against the ring of picture around the hole). One MLP per
strip (a 1-D CNN is 14 times slower on one core, with 20 oriented candidates per sample), shared
by the sides, orientations and candidates, its strip features summed over the four sides; the
picture's 180-degree turn and transpose (with the strips they move) as augmentation and test-time
augmentation. Training stops BUDGET_S seconds after start (105 s at the 120 s limit; it scales with
WEIRDML_TIME_LIMIT_S, and under a shorter limit fewer samples are made, below); prediction takes about 2 s.

Made samples: the 2000 labelled samples alone overfit. So new samples are cut from the 3000 shown
pictures (training pictures with their hole filled by the right candidate, test pictures away
from their hole): a new hole on garment, four distractors cut at the same place from the pictures
most like this one (14x14 block sums), each a different picture, none too close to another
candidate; every candidate turned by a random one of the TURNS symmetries of the square, scaled by
a random gain, noised (sd 0.03) and rounded to 1/255 steps; the training pictures' holes are filled
with the right candidate turned back by the orientation whose border fits the ring best. Strips
of all samples (20 oriented candidates each) are made once and kept in half precision (0.64 GB for
50000 samples); more made samples, not more epochs, is what raised the score (README). Making them
and their strips take time in proportion to their number, so a limit under 120 s makes that share
of the 48000 (12000 at 30 s); a longer one makes no more (memory) and trains longer.
"""

from __future__ import annotations

import math
import os
import time

import numpy as np

START = time.time()
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
import torch  # noqa: E402  (after OMP_WAIT_POLICY is set)
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

LIMIT_S = float(os.environ.get("WEIRDML_TIME_LIMIT_S", "120"))  # the task's time limit; every budget scales with it
BUDGET_S = 105.0 * LIMIT_S / 120  # seconds from start to the end of training (105 s at 120 s)
MIN_TRAIN_S = 10.0 * LIMIT_S / 120  # training time kept even when making the samples ran late (10 s at 120 s)
N_MADE = int(os.environ.get("N_MADE", round(48000 * min(1.0, LIMIT_S / 120))))
TURNS = int(os.environ.get("TURNS", 4))  # orientations tried per candidate, as in data.py
HOLE, K, SIDE, PAD = 8, 5, 28, 4
GAIN, NOISE, MIN_DIFF, INK, MIN_INK, NEAR = 0.25, 0.03, 0.04, 0.05, 0.5, 40
torch.set_num_threads(len(os.sched_getaffinity(0)))
torch.manual_seed(0)
rng = np.random.default_rng(0)


def layout():
    """Where each written pixel of a candidate sits in the square: every candidate's 64 pixels come
    in one unknown order. Neighbouring pixels of a picture are the most alike, so the order is read
    off the correlations of the written pixels over all 15000 candidates: a 2-D embedding of
    1 - correlation (classical scaling), snapped onto the 8x8 grid at the best angle, then pairs
    swapped while the summed correlation of grid neighbours grows. That gives the square up to
    its 8 symmetries; the quarter turns do not matter (every candidate is tried in all 4), the
    mirror image does: keep the one whose training answers fit the ring around their hole better."""
    from scipy.optimize import linear_sum_assignment

    flat = np.concatenate([np.load(f"data/{s}_patches.npy").reshape(-1, HOLE * HOLE) for s in ("train", "test")])
    corr = np.corrcoef(flat.T)
    grid = np.stack(np.divmod(np.arange(HOLE * HOLE), HOLE), 1).astype(float)
    near = (np.abs(grid[:, None] - grid[None]).sum(-1) == 1).astype(float)
    centre = np.eye(HOLE * HOLE) - 1 / (HOLE * HOLE)
    w, v = np.linalg.eigh(-0.5 * centre @ (1 - corr) @ centre)
    xy = v[:, -2:] * np.sqrt(np.maximum(w[-2:], 0))

    def fit(pos):
        return (corr * near[pos][:, pos]).sum()

    best = (-np.inf, None)
    for angle in np.linspace(0, np.pi / 2, 90, endpoint=False):
        z = xy @ np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]])
        z = (z - z.mean(0)) / (z.std(0) + 1e-9) * grid.std(0) + grid.mean(0)
        pos = linear_sum_assignment(((z[:, None] - grid[None]) ** 2).sum(-1))[1]
        best = max(best, (fit(pos), pos), key=lambda b: b[0])
    score, pos = best
    improved = True
    while improved:
        improved = False
        for a in range(HOLE * HOLE):
            for b in range(a + 1, HOLE * HOLE):
                q = pos.copy()
                q[a], q[b] = q[b], q[a]
                if fit(q) > score + 1e-9:
                    score, pos, improved = fit(q), q, True
    mirrored = (pos % HOLE) * HOLE + pos // HOLE
    images, holes, patches = (np.load(f"data/train_{n}.npy") for n in ("images", "holes", "patches"))
    right = patches[np.arange(len(patches)), np.load("data/train_labels.npy")].reshape(-1, HOLE * HOLE)
    misfits = []
    for option in (pos, mirrored):
        square = np.empty_like(right)
        square[:, option] = right
        turned = np.stack([orient(square.reshape(-1, HOLE, HOLE), t) for t in range(4)], 1)
        misfits.append(gains(images, holes, turned, misfit=True)[1].min(1).sum())
    return pos if misfits[0] <= misfits[1] else mirrored


def load(split):
    """Pictures, holes and candidates, the candidates' pixels put back in their square."""
    images, holes, patches = (np.load(f"data/{split}_{name}.npy") for name in ("images", "holes", "patches"))
    square = np.empty_like(patches.reshape(len(patches), K, -1))
    square[:, :, LAYOUT] = patches.reshape(len(patches), K, -1)
    return [images, holes, square.reshape(patches.shape)]


def gains(images, holes, patches, misfit=False):
    """Least-squares gain of each candidate's border against the ring of picture around the hole
    (with misfit: also the squared residual of that fit)."""
    img = np.pad(images, ((0, 0), (PAD, PAD), (PAD, PAD)))
    r, c = holes[:, :1] + PAD, holes[:, 1:] + PAD
    a, ix = np.arange(HOLE), np.arange(len(images))[:, None]
    ring = np.concatenate(
        [img[ix, r - 1, c + a], img[ix, r + HOLE, c + a], img[ix, r + a, c - 1], img[ix, r + a, c + HOLE]], 1
    )
    border = np.concatenate([patches[:, :, 0, :], patches[:, :, -1, :], patches[:, :, :, 0], patches[:, :, :, -1]], 2)
    gain = (border * ring[:, None]).sum(2) / ((border**2).sum(2) + 1e-3)
    gain = np.clip(gain, np.exp(-GAIN), np.exp(GAIN)).astype(np.float32)
    if misfit:
        return gain, ((border * gain[:, :, None] - ring[:, None]) ** 2).sum(2)
    return gain


def orient(p, t):
    """Element t of the square's symmetries on the last two axes: t % 4 quarter turns, then a
    transpose when t >= 4 (the set of all 8 is the same whether applied or undone)."""
    p = np.rot90(p, t % 4, axes=(-2, -1))
    return p.swapaxes(-1, -2) if t >= 4 else p


def oriented(patches):
    """(N, K, 8, 8) -> (N, K * TURNS, 8, 8): every candidate in every orientation, candidate-major."""
    return np.stack([orient(patches, t) for t in range(TURNS)], 2).reshape(len(patches), -1, HOLE, HOLE)


def strips(images, holes, patches):
    """(N, K * TURNS, 4 sides, C, 8) float32 tensor of seam features of every oriented candidate."""
    patches = oriented(patches)
    n, k = patches.shape[:2]
    img = np.pad(images, ((0, 0), (PAD, PAD), (PAD, PAD)))
    r, c = holes[:, :1] + PAD, holes[:, 1:] + PAD
    a, ix = np.arange(HOLE), np.arange(n)[:, None]
    gain = gains(images, holes, patches)[:, :, None]

    def row(rr):
        return img[ix, rr, c + a]

    def col(cc):
        return img[ix, r + a, cc]

    sides = (
        (row(r - 2), row(r - 1), patches[:, :, 0, :], patches[:, :, 1, :]),
        (row(r + HOLE + 1), row(r + HOLE), patches[:, :, -1, :], patches[:, :, -2, :]),
        (col(c - 2), col(c - 1), patches[:, :, :, 0], patches[:, :, :, 1]),
        (col(c + HOLE + 1), col(c + HOLE), patches[:, :, :, -1], patches[:, :, :, -2]),
    )
    out = []
    lg = np.broadcast_to(np.log(gain), (n, k, HOLE))
    for o2, o1, e1, e2 in sides:
        o2, o1 = np.repeat(o2[:, None], k, 1), np.repeat(o1[:, None], k, 1)
        n1, n2 = e1 * gain, e2 * gain
        out.append(
            np.stack(
                [o2, o1, e1, e2, e1 - o1, e1 - 3 * o1 + 2 * o2, n1 - o1, n1 - 2 * o1 + o2, (n2 - n1) - (o1 - o2), lg],
                axis=2,
            )
        )
    return torch.from_numpy(np.ascontiguousarray(np.stack(out, axis=2), dtype=np.float32))


def alter(squares):
    """Turn each square by a random symmetry, scale it by a random gain, add noise, round to 1/255
    steps (as every candidate was)."""
    turns = rng.integers(TURNS, size=len(squares))
    squares = np.stack([orient(q, t) for q, t in zip(squares, turns, strict=True)])
    g = np.exp(rng.uniform(-GAIN, GAIN, size=(len(squares), 1, 1)))
    noisy = squares * g + rng.normal(0.0, NOISE, size=squares.shape)
    return np.round(np.clip(noisy, 0, 1) * 255) / 255


def made_samples(n_made):
    """New samples cut from the shown pictures, as the task's samples were made."""
    tr_img, tr_holes, tr_patches = load("train")
    te_img, te_holes, _ = load("test")
    labels = np.load("data/train_labels.npy")
    pics = np.concatenate([tr_img, te_img]).astype(np.float32)
    known = np.ones(pics.shape, dtype=bool)
    # the right candidate, turned back by the orientation whose border fits the ring best
    right = oriented(tr_patches[np.arange(len(tr_img)), labels][:, None])  # (N, TURNS, 8, 8)
    g, misfit = gains(tr_img, tr_holes, right, misfit=True)
    best = misfit.argmin(1)
    for n, (r, c) in enumerate(tr_holes):
        pics[n, r : r + HOLE, c : c + HOLE] = right[n, best[n]] / g[n, best[n]]
    for n, (r, c) in enumerate(te_holes):
        known[len(tr_img) + n, r : r + HOLE, c : c + HOLE] = False
    pics = np.clip(pics, 0, 1)
    blocks = pics.reshape(len(pics), 14, 2, 14, 2).sum((2, 4)).reshape(len(pics), -1)
    sq = (blocks**2).sum(1)
    dist = sq[:, None] + sq[None] - 2 * blocks @ blocks.T
    np.fill_diagonal(dist, np.inf)
    near = np.argpartition(dist, NEAR, axis=1)[:, :NEAR]
    near = np.take_along_axis(near, np.argsort(np.take_along_axis(dist, near, 1), 1), 1)
    lo, hi = 2, SIDE - 2 - HOLE
    a = np.arange(HOLE)
    images, holes, patches = [], [], []
    while sum(len(h) for h in holes) < n_made:
        b = 4000  # draw pictures and places in batches; keep those that make a sample
        i = rng.integers(len(pics), size=b)
        r, c = rng.integers(lo, hi + 1, size=(2, b))
        rows, cols = (r[:, None] + a)[:, :, None], (c[:, None] + a)[:, None, :]
        true = pics[i[:, None, None], rows, cols]
        wide = np.arange(-2, HOLE + 2)
        ring_ok = known[i[:, None, None], (r[:, None] + wide)[:, :, None], (c[:, None] + wide)[:, None, :]].all((1, 2))
        keep = ((true > INK).mean((1, 2)) >= MIN_INK) & ring_ok
        i, r, c, true, rows, cols = i[keep], r[keep], c[keep], true[keep], rows[keep], cols[keep]
        mates = near[i]
        cut = pics[mates[:, :, None, None], rows[:, None], cols[:, None]]  # (B, NEAR, 8, 8)
        ok = known[mates[:, :, None, None], rows[:, None], cols[:, None]].all((2, 3))
        ok &= ((cut > INK).mean((2, 3)) >= MIN_INK) & (np.abs(cut - true[:, None]).mean((2, 3)) >= MIN_DIFF)
        taken = np.zeros(ok.shape, dtype=bool)
        for j in range(NEAR):  # greedy, nearest first: a mate joins unless it is close to one taken
            close = np.abs(cut[:, j : j + 1] - cut[:, :j]).mean((2, 3)) < MIN_DIFF
            taken[:, j] = ok[:, j] & (taken.sum(1) < K - 1) & ~(close & taken[:, :j]).any(1)
        full = taken.sum(1) == K - 1
        pick = np.argsort(~taken, axis=1, kind="stable")[:, : K - 1]
        chosen = np.take_along_axis(cut, pick[:, :, None, None], 1)
        chosen = np.concatenate([true[:, None], chosen], 1)[full]
        image = pics[i[full]].copy()
        image[np.arange(full.sum())[:, None, None], rows[full], cols[full]] = 0.0
        images.append(image)
        holes.append(np.stack([r[full], c[full]], 1))
        patches.append(alter(chosen.reshape(-1, HOLE, HOLE)).reshape(chosen.shape))
    images, holes = np.concatenate(images)[:n_made], np.concatenate(holes)[:n_made]
    patches = np.concatenate(patches)[:n_made]
    y = rng.integers(K, size=n_made)
    order = (np.arange(K)[None] + (K - y)[:, None]) % K  # the true square (index 0) lands at index y
    patches = np.take_along_axis(patches, order[:, :, None, None], 1)
    images = np.round(images * 255) / 255
    return images.astype(np.float32), holes, patches.astype(np.float32), torch.from_numpy(y)


LAYOUT = layout()
print(f"pixel layout read in {time.time() - START:.1f}s", flush=True)
C = 10
real = load("train")
y_real = torch.from_numpy(np.load("data/train_labels.npy").astype(np.int64))
test = load("test")
*made, y_made = made_samples(N_MADE)
print(f"made {len(y_made)} samples in {time.time() - START:.1f}s", flush=True)
perm = torch.randperm(len(y_real), generator=torch.Generator().manual_seed(0))
val = [a[perm[:300].numpy()] for a in real]  # fit on some real samples, all of which also train
yv = y_real[perm[:300]]
pool = [np.concatenate([a, b]) for a, b in zip(real, made, strict=True)]
yt = torch.cat([y_real, y_made])
# all strips at once, in half precision (N, K * TURNS, 4, C, 8): 0.64 GB for 50000 samples
xt = torch.cat([strips(*(a[s : s + 1000] for a in pool)).half() for s in range(0, len(yt), 1000)])


class Scorer(nn.Module):
    def __init__(self):
        super().__init__()
        # an MLP over each whole strip: 14 times faster than a 1-D CNN on one core, and 40 oriented
        # candidates per sample leave no time for the CNN
        self.side = nn.Sequential(nn.Linear(C * HOLE, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU())
        self.head = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 1))

    def forward(self, x):
        n, k = x.shape[:2]
        h = self.side(x.reshape(n, k, 4, C * HOLE)).sum(2)
        return self.head(h).squeeze(-1).reshape(n, K, TURNS).logsumexp(2)  # (N, K) candidate scores


def turned(x):  # 180-degree turn of the picture: top<->bottom, left<->right, strips reversed
    return x[:, :, [1, 0, 3, 2]].flip(-1)


def transposed(x):  # transpose of the picture: top<->left, bottom<->right
    return x[:, :, [2, 3, 0, 1]]


VIEWS = (lambda x: x, turned, transposed, lambda x: turned(transposed(x)))


def views(x):
    return tuple(view(x) for view in VIEWS)


def augment(x):
    """Each sample in a random one of its 4 views (each view made only for the samples that get it:
    making all 4 for the batch took 30% of the training time)."""
    pick, out = torch.randint(len(VIEWS), (len(x),)), torch.empty_like(x)
    for v, view in enumerate(VIEWS):
        out[pick == v] = view(x[pick == v])
    return out


def predict(m, arrays):
    m.eval()
    out = []
    with torch.no_grad():
        for s in range(0, len(arrays[0]), 250):
            x = strips(*(a[s : s + 250] for a in arrays))
            out.append(sum(F.softmax(m(v), 1) for v in views(x)))
    return torch.cat(out)


model = Scorer()
peak, bs, epoch = 4e-3, 256, 0
opt = torch.optim.AdamW(model.parameters(), lr=peak, weight_decay=1e-4)
t0 = time.time()
budget = max(BUDGET_S - (t0 - START), MIN_TRAIN_S)
while time.time() - t0 < budget:
    model.train()
    tot = 0
    for idx in torch.randperm(len(yt)).split(bs):
        frac = min((time.time() - t0) / budget, 1)
        if frac >= 1:
            break
        for g in opt.param_groups:
            g["lr"] = peak * min(1, frac / 0.05) * 0.5 * (1 + math.cos(math.pi * frac))
        x = xt[idx].float()
        loss = F.cross_entropy(model(augment(x)), yt[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        tot += loss.item() * len(idx)
    epoch += 1
    fit = (predict(model, val).argmax(1) == yv).float().mean()
    print(f"epoch {epoch} t={time.time() - START:.0f} loss {tot / len(yt):.3f} fit {fit:.3f}", flush=True)
preds = predict(model, test).argmax(1).numpy()
os.makedirs("results", exist_ok=True)
np.savetxt("results/test_preds.txt", preds, fmt="%d")
print(f"total {time.time() - START:.1f}s")
