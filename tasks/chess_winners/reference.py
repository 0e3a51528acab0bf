"""Reference solution for chess_winners: replay the SAN text on a small board, then boost trees.

No chess library is available in the sandbox, so the script keeps its own board: it finds
which piece made each move (with a pin check for the rare ambiguous case), so the material
of both sides is exact at every ply. Features describe how the game ended (mate sign, who
moved last, material balance and its recent trend, draw signs); a gradient-boosting
classifier learns the rest.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

# One thread per tree fit: on 1000 rows OpenMP gains nothing and spins badly on a busy CPU (a
# fit that takes a second alone took over 100 s on two cores shared with other work). Set, not
# defaulted: the sandbox sets OMP_NUM_THREADS to its core count.
os.environ["OMP_NUM_THREADS"] = "1"

import numpy as np
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.model_selection import cross_val_score

START = time.time()
LIMIT_S = float(os.environ.get("WEIRDML_TIME_LIMIT_S", "120"))  # the task's time limit; every budget scales with it
CV_BY_S = 45.0 * LIMIT_S / 120  # cross-validation runs only if predictions are written before this (45 s at 120 s)
DATA = Path("data")
VALUES = {"P": 1, "N": 3, "B": 3, "R": 5, "Q": 9, "K": 0}
KNIGHT = [(1, 2), (2, 1), (2, -1), (1, -2), (-1, -2), (-2, -1), (-2, 1), (-1, 2)]
KING = [(1, 0), (1, 1), (0, 1), (-1, 1), (-1, 0), (-1, -1), (0, -1), (1, -1)]
ROOK = [(1, 0), (-1, 0), (0, 1), (0, -1)]
BISHOP = [(1, 1), (1, -1), (-1, 1), (-1, -1)]

Board = dict[tuple[int, int], tuple[int, str]]  # (file, rank) -> (colour 0 white / 1 black, piece letter)


def start_board() -> Board:
    board: Board = {}
    for f, p in enumerate("RNBQKBNR"):
        board[(f, 0)] = (0, p)
        board[(f, 7)] = (1, p)
        board[(f, 1)] = (0, "P")
        board[(f, 6)] = (1, "P")
    return board


def on_board(f: int, r: int) -> bool:
    return 0 <= f < 8 and 0 <= r < 8


def reaches(board: Board, frm: tuple[int, int], to: tuple[int, int], piece: str) -> bool:
    """Whether a non-pawn piece on frm attacks to, given the pieces in between."""
    df, dr = to[0] - frm[0], to[1] - frm[1]
    if piece == "N":
        return (df, dr) in KNIGHT
    if piece == "K":
        return max(abs(df), abs(dr)) == 1
    straight = df == 0 or dr == 0
    diagonal = abs(df) == abs(dr)
    if (piece == "R" and not straight) or (piece == "B" and not diagonal) or not (straight or diagonal):
        return False
    if df == dr == 0:
        return False
    sf, sr = (df > 0) - (df < 0), (dr > 0) - (dr < 0)
    f, r = frm[0] + sf, frm[1] + sr
    while (f, r) != to:
        if (f, r) in board:
            return False
        f, r = f + sf, r + sr
    return True


def attacked(board: Board, sq: tuple[int, int], by: int) -> bool:
    for (f, r), (colour, piece) in board.items():
        if colour != by:
            continue
        if piece == "P":
            if sq[1] - r == (1 if by == 0 else -1) and abs(sq[0] - f) == 1:
                return True
        elif reaches(board, (f, r), sq, piece):
            return True
    return False


def play(board: Board, token: str, side: int) -> tuple[str | None, bool]:
    """Apply one SAN move; return (captured piece letter or None, whether it was a pawn move)."""
    san = token.rstrip("+#")
    home = 0 if side == 0 else 7
    if san.startswith("O-O"):
        king_to, rook_from, rook_to = (2, 0, 3) if san == "O-O-O" else (6, 7, 5)
        board.pop((4, home), None)
        board.pop((rook_from, home), None)
        board[(king_to, home)] = (side, "K")
        board[(rook_to, home)] = (side, "R")
        return None, False
    promo = None
    if "=" in san:
        san, promo = san.split("=")
    dest = (ord(san[-2]) - 97, int(san[-1]) - 1)
    piece = san[0] if san[0] in "KQRBN" else "P"
    hint = san[1:-2] if piece != "P" else san[:-2]
    hint = hint.replace("x", "")
    forward = 1 if side == 0 else -1
    captured = board.get(dest, (None, None))[1]
    if piece == "P":
        if "x" in san:
            frm = (ord(hint[0]) - 97, dest[1] - forward)
            if dest not in board:  # en passant
                captured = "P"
                board.pop((dest[0], dest[1] - forward), None)
        else:
            one = (dest[0], dest[1] - forward)
            frm = one if board.get(one) == (side, "P") else (dest[0], dest[1] - 2 * forward)
    else:
        cands = [
            sq
            for sq, (colour, p) in board.items()
            if colour == side
            and p == piece
            and reaches(board, sq, dest, piece)
            and all((c.isalpha() and sq[0] == ord(c) - 97) or (c.isdigit() and sq[1] == int(c) - 1) for c in hint)
        ]
        frm = cands[0]
        if len(cands) > 1:  # only a pin can make the SAN unambiguous: keep the candidate that is legal
            for sq in cands:
                trial = dict(board)
                trial[dest] = trial.pop(sq)
                king = next(s for s, v in trial.items() if v == (side, "K"))
                if not attacked(trial, king, 1 - side):
                    frm = sq
                    break
    board.pop(frm, None)
    board[dest] = (side, promo or piece)
    return captured, piece == "P"


def features(line: str) -> list[float]:
    tokens = [t.split(".")[-1] for t in line.split()]
    board = start_board()
    mat = [39, 39]
    diffs = [0.0]
    stats = np.zeros((2, 6))  # per side: captures, checks, promotions, castles, queen moves, king moves
    quiet = 0
    seen: dict[tuple, int] = {}
    max_rep = 1
    for i, tok in enumerate(tokens):
        side = i % 2
        captured, pawn_move = play(board, tok, side)
        if captured:
            mat[1 - side] -= VALUES[captured]
        if "=" in tok:
            mat[side] += VALUES[tok.rstrip("+#")[-1]] - 1
        stats[side] += [
            "x" in tok,
            "+" in tok or "#" in tok,
            "=" in tok,
            tok.startswith("O-O"),
            tok.startswith("Q"),
            tok.startswith("K"),
        ]
        quiet = 0 if captured or pawn_move else quiet + 1
        if quiet >= 4:  # a position can only repeat after several reversible moves
            key = (side, tuple(sorted(board.items())))
            seen[key] = seen.get(key, 0) + 1
            max_rep = max(max_rep, seen[key])
        diffs.append(mat[0] - mat[1])
    w, b = mat
    n = len(tokens)
    last_side = (n - 1) % 2  # 0: white moved last
    sign = 1.0 if last_side == 0 else -1.0
    last = tokens[-1] if tokens else ""
    d = np.array(diffs)
    pieces = [sum(1 for c, p in board.values() if c == s and p not in "PK") for s in (0, 1)]
    pawns = [sum(1 for c, p in board.values() if c == s and p == "P") for s in (0, 1)]
    return [
        n,
        n % 2,
        last_side,
        "#" in last,
        ("#" in last) * sign,
        "+" in last,
        ("+" in last) * sign,
        "x" in last,
        ("x" in last) * sign,
        w,
        b,
        w - b,
        (w - b) * sign,
        d[-5:].mean(),
        d[-11:].mean(),
        d.max(),
        d.min(),
        d[-2] if n > 1 else 0.0,
        quiet,
        max_rep,
        w + b,
        pieces[0],
        pieces[1],
        pawns[0],
        pawns[1],
        *stats[0],
        *stats[1],
    ]


def load_games(name: str) -> list[str]:
    return (DATA / name).read_text().splitlines()


def main() -> None:
    import torch  # only to report the device; trees run on the CPU

    n_threads = os.cpu_count() or 1
    torch.set_num_threads(n_threads)
    print(f"cpus {n_threads}, cuda {torch.cuda.is_available()}", flush=True)
    train_games, test_games = load_games("train_games.txt"), load_games("test_games.txt")
    y = np.load(DATA / "train_labels.npy")
    print(f"train {len(train_games)} games, test {len(test_games)}, labels {np.bincount(y, minlength=3)}", flush=True)
    x_train = np.array([features(g) for g in train_games], dtype=np.float64)
    x_test = np.array([features(g) for g in test_games], dtype=np.float64)
    print(f"features {x_train.shape} in {time.time() - START:.1f}s", flush=True)
    model = HistGradientBoostingClassifier(
        max_iter=300, learning_rate=0.05, max_leaf_nodes=15, l2_regularization=1.0, random_state=0
    )
    model.fit(x_train, y)
    preds = model.predict(x_test).astype(int)
    print(f"test prediction counts {np.bincount(preds, minlength=3)}", flush=True)
    Path("results").mkdir(exist_ok=True)
    np.savetxt("results/test_preds.txt", preds, fmt="%d")
    print(f"predictions written at {time.time() - START:.1f}s", flush=True)
    # Cross-validation only reports how well the model generalises; skip it when time is short.
    if time.time() - START < CV_BY_S:
        cv = cross_val_score(model, x_train, y, cv=3)
        print(f"3-fold CV accuracy {cv.mean():.4f} +- {cv.std():.4f} ({time.time() - START:.1f}s)", flush=True)
    print(f"done in {time.time() - START:.1f}s", flush=True)


if __name__ == "__main__":
    main()
