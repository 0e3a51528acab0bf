"""Reference solution for chess_blunders: a small material search, then boosted trees.

A blunder loses material (or the game) against the best move, and that shows in a shallow
search: no chess library is available in the sandbox, so the script carries its own board
(10x12 mailbox), move generator and alpha-beta search over material with a capture search at
the leaves. For each position it measures what the best move keeps and what the candidate
keeps, one and two plies deep; a gradient-boosting classifier turns those losses (and what
moves and what is taken) into a verdict, calibrated on the training labels.
"""

from __future__ import annotations

import os
import time

START = time.time()
os.environ.setdefault("OMP_NUM_THREADS", "1")  # one thread per tree fit: spinning hurts on a busy CPU

import multiprocessing  # noqa: E402

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from sklearn.ensemble import HistGradientBoostingClassifier  # noqa: E402
from sklearn.model_selection import cross_val_score  # noqa: E402

BUDGET_S = 85.0  # feature extraction for the training set stops here
VALUE = (0, 100, 320, 330, 500, 900, 20000)  # by piece code 1..6: P N B R Q K
MATE = 20000
CLIP = 1000
KING_VALUE = VALUE[6]
N_OFF = (-21, -19, -12, -8, 8, 12, 19, 21)
K_OFF = (-11, -10, -9, -1, 1, 9, 10, 11)
B_OFF = (-11, -9, 9, 11)
R_OFF = (-10, -1, 1, 10)
OFF = 7  # off-board marker in the 10x12 mailbox


def sq120(file: int, rank: int) -> int:
    return 21 + file + 10 * rank


def parse(fen: str) -> tuple[list[int], int, int]:
    """Board (pieces +1..+6 white, -1..-6 black, 0 empty, OFF outside), side (+1/-1), en-passant square."""
    board = [OFF] * 120
    for rank in range(8):
        for file in range(8):
            board[sq120(file, rank)] = 0
    fields = fen.split()
    for r, row in enumerate(fields[0].split("/")):
        file = 0
        for ch in row:
            if ch.isdigit():
                file += int(ch)
            else:
                code = "PNBRQK".index(ch.upper()) + 1
                board[sq120(file, 7 - r)] = code if ch.isupper() else -code
                file += 1
    side = 1 if fields[1] == "w" else -1
    ep = -1 if fields[3] == "-" else sq120(ord(fields[3][0]) - 97, int(fields[3][1]) - 1)
    return board, side, ep


def moves(board: list[int], side: int, ep: int, captures_only: bool) -> list[tuple[int, int, int, int]]:
    """Pseudo-legal moves (score for ordering, from, to, promotion); castling is left out."""
    out = []
    fwd = 10 * side
    start_rank_lo, start_rank_hi = (31, 38) if side == 1 else (81, 88)
    promo_lo, promo_hi = (91, 98) if side == 1 else (21, 28)
    for frm in range(21, 99):
        p = board[frm] * side
        if p <= 0 or p == OFF * side:
            continue
        if p == 1:
            to = frm + fwd
            for cap in (to - 1, to + 1):
                t = board[cap]
                if (t != OFF and t * side < 0) or cap == ep:
                    victim = VALUE[-t * side] if cap != ep else 100
                    promo = 5 if promo_lo <= cap <= promo_hi else 0
                    out.append((10 * victim - 1 + (800 if promo else 0), frm, cap, promo))
            if board[to] == 0:
                promo = 5 if promo_lo <= to <= promo_hi else 0
                if promo or not captures_only:
                    out.append((8000 if promo else 0, frm, to, promo))
                if not captures_only and start_rank_lo <= frm <= start_rank_hi and board[to + fwd] == 0:
                    out.append((0, frm, to + fwd, 0))
            continue
        attacker = VALUE[p]
        if p == 2 or p == 6:
            for d in N_OFF if p == 2 else K_OFF:
                t = board[frm + d]
                if t == OFF:
                    continue
                if t == 0:
                    if not captures_only:
                        out.append((0, frm, frm + d, 0))
                elif t * side < 0:
                    out.append((10 * VALUE[-t * side] - attacker // 100, frm, frm + d, 0))
            continue
        dirs = B_OFF if p == 3 else R_OFF if p == 4 else K_OFF
        for d in dirs:
            to = frm + d
            t = board[to]
            while t == 0:
                if not captures_only:
                    out.append((0, frm, to, 0))
                to += d
                t = board[to]
            if t != OFF and t * side < 0:
                out.append((10 * VALUE[-t * side] - attacker // 100, frm, to, 0))
    out.sort(reverse=True)
    return out


def make(board: list[int], side: int, ep: int, frm: int, to: int, promo: int) -> tuple[int, int, int]:
    """Play a move in place; return (captured piece, new en-passant square, material gain for side)."""
    piece = board[frm]
    captured = board[to]
    gain = VALUE[abs(captured)] if captured else 0
    board[frm] = 0
    board[to] = piece if not promo else promo * side
    if promo:
        gain += VALUE[promo] - 100
    new_ep = -1
    if piece * side == 1:
        if to == ep:
            board[to - 10 * side] = 0
            gain += 100
        elif abs(to - frm) == 20:
            new_ep = frm + 10 * side
    elif piece * side == 6 and abs(to - frm) == 2:  # castling, only ever as the candidate move
        rook_from, rook_to = (frm + 3, frm + 1) if to > frm else (frm - 4, frm - 1)
        board[rook_to], board[rook_from] = board[rook_from], 0
    return captured, new_ep, gain


def unmake(board: list[int], side: int, ep: int, frm: int, to: int, promo: int, captured: int) -> None:
    piece = board[to] if not promo else side
    board[frm] = piece
    board[to] = captured
    if piece * side == 1 and to == ep:
        board[to - 10 * side] = -side
    elif piece * side == 6 and abs(to - frm) == 2:
        rook_from, rook_to = (frm + 3, frm + 1) if to > frm else (frm - 4, frm - 1)
        board[rook_from], board[rook_to] = board[rook_to], 0


def attacked(board: list[int], sq: int, by: int) -> bool:
    """Whether side ``by`` attacks square ``sq``."""
    pawn_from = -10 * by
    if board[sq + pawn_from - 1] == by or board[sq + pawn_from + 1] == by:
        return True
    for d in N_OFF:
        if board[sq + d] == 2 * by:
            return True
    for d in K_OFF:
        if board[sq + d] == 6 * by:
            return True
    for dirs, sliders in ((B_OFF, (3 * by, 5 * by)), (R_OFF, (4 * by, 5 * by))):
        for d in dirs:
            to = sq + d
            while board[to] == 0:
                to += d
            if board[to] in sliders:
                return True
    return False


def in_check(board: list[int], side: int) -> bool:
    return attacked(board, board.index(6 * side), -side)


def quiesce(board: list[int], side: int, ep: int, alpha: int, beta: int, stand: int, depth: int) -> int:
    """Captures only; ``stand`` is the material balance for the side to move."""
    if stand >= beta:
        return stand
    alpha = max(alpha, stand)
    if depth > 6:
        return stand
    for _, frm, to, promo in moves(board, side, ep, True):
        if board[to] * side == -6:
            return MATE
        captured, new_ep, gain = make(board, side, ep, frm, to, promo)
        score = -quiesce(board, -side, new_ep, -beta, -alpha, -(stand + gain), depth + 1)
        unmake(board, side, ep, frm, to, promo, captured)
        if score >= beta:
            return score
        alpha = max(alpha, score)
    return alpha


def search(board: list[int], side: int, ep: int, depth: int, alpha: int, beta: int, stand: int) -> int:
    """Alpha-beta over pseudo-legal moves; capturing the king ends the line (the last move was illegal)."""
    if depth == 0:
        return quiesce(board, side, ep, alpha, beta, stand, 0)
    best = -MATE - 1
    for _, frm, to, promo in moves(board, side, ep, False):
        if board[to] * side == -6:
            return MATE
        captured, new_ep, gain = make(board, side, ep, frm, to, promo)
        score = -search(board, -side, new_ep, depth - 1, -beta, -max(alpha, best), -(stand + gain))
        unmake(board, side, ep, frm, to, promo, captured)
        if score > best:
            best = score
            if best >= beta:
                return best
    if best <= -MATE + 100 and not in_check(board, side):
        return 0  # no legal move and not in check: stalemate
    return best


def material(board: list[int], side: int) -> int:
    total = 0
    for sq in range(21, 99):
        p = board[sq]
        if p and p != OFF:
            total += VALUE[abs(p)] * (1 if p * side > 0 else -1) if abs(p) != 6 else 0
    return total


def clip(x: int) -> int:
    return max(-CLIP, min(CLIP, x))


def features(row: tuple[str, str]) -> list[float]:
    fen, uci = row
    board, side, ep = parse(fen)
    stand = material(board, side)
    frm = sq120(ord(uci[0]) - 97, int(uci[1]) - 1)
    to = sq120(ord(uci[2]) - 97, int(uci[3]) - 1)
    promo = "nbrq".index(uci[4]) + 2 if len(uci) == 5 else 0
    piece = abs(board[frm])
    victim = abs(board[to]) if board[to] else (1 if piece == 1 and to == ep else 0)
    out: list[float] = []
    for depth in (1, 2):
        best = search(board, side, ep, depth, -MATE - 1, MATE + 1, stand)
        captured, new_ep, gain = make(board, side, ep, frm, to, promo)
        cand = -search(board, -side, new_ep, depth - 1, -MATE - 1, MATE + 1, -(stand + gain))
        if depth == 1:
            gives_check = in_check(board, -side)
        unmake(board, side, ep, frm, to, promo, captured)
        out += [clip(best) - clip(cand), clip(best) - stand, clip(cand) - stand]
    # One ply deeper for the candidate alone: the reply it allows and our best answer to it (forks,
    # pins and mating threats show here); the best move's own value stays the 2-ply one.
    captured, new_ep, gain = make(board, side, ep, frm, to, promo)
    cand3 = -search(board, -side, new_ep, 2, -MATE - 1, MATE + 1, -(stand + gain))
    unmake(board, side, ep, frm, to, promo, captured)
    out += [clip(best) - clip(cand3), clip(cand3) - stand]
    return [*out, piece, victim, promo, gives_check, stand, in_check(board, side)]


def extract(rows: list[tuple[str, str]], pool: multiprocessing.pool.Pool, deadline: float) -> np.ndarray:
    """Features for as many rows as fit before the deadline, in chunks over the pool."""
    feats: list[list[float]] = []
    chunk = 64
    for i in range(0, len(rows), chunk):
        if time.time() > deadline:
            break
        feats += pool.map(features, rows[i : i + chunk], chunksize=4)
    return np.array(feats, dtype=np.float64)


def main() -> None:
    train = pd.read_csv("data/train_positions.csv")
    test = pd.read_csv("data/test_positions.csv")
    y = np.load("data/train_labels.npy")
    print(f"train {len(train)} (blunder share {y.mean():.2f}), test {len(test)}", flush=True)
    workers = len(os.sched_getaffinity(0))
    with multiprocessing.get_context("fork").Pool(workers) as pool:
        x_test = extract(list(zip(test.fen, test.move, strict=True)), pool, float("inf"))
        print(f"test features {x_test.shape} ({time.time() - START:.1f} s, {workers} processes)", flush=True)
        x_train = extract(list(zip(train.fen, train.move, strict=True)), pool, START + BUDGET_S)
    y = y[: len(x_train)]
    print(f"train features {x_train.shape} ({time.time() - START:.1f} s)", flush=True)
    for j, name in ((0, "1 ply"), (3, "2 plies")):
        acc = np.mean((x_train[:, j] >= 150) == y)
        print(f"loss >= 150 cp at {name}: train accuracy {acc:.3f}", flush=True)
    model = HistGradientBoostingClassifier(max_iter=200, learning_rate=0.05, max_leaf_nodes=15, random_state=0)
    if time.time() - START < 100:
        cv = cross_val_score(model, x_train, y, cv=4)
        print(f"cross-validated accuracy {cv.mean():.3f}", flush=True)
    model.fit(x_train, y)
    preds = model.predict(x_test).astype(np.int64)
    os.makedirs("results", exist_ok=True)
    np.savetxt("results/test_preds.txt", preds, fmt="%d")
    print(f"wrote {len(preds)} predictions, blunder share {preds.mean():.2f} ({time.time() - START:.1f} s)")


if __name__ == "__main__":
    main()
