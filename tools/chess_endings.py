"""How chess_winners' games end, and how often their final position alone gives the result.

    python tools/chess_endings.py              # the 2000 games of the task's seed 0
    python tools/chess_endings.py --seed 1 --games 600

Plays the games with the task's own generator (``generate`` in tasks/chess_winners/data.py) and
prints the mix of endings (mate, resignation, time, draw rules, agreed draws) and the accuracy of
a rule-based reader of the public move text. The reader replays the text with the ``chess``
package and reads the final position only:

- checkmate: the mated side loses; a mate in one for the side to move (the mating move was cut
  off the text): that side wins;
- stalemate, or neither side able to mate (insufficient material): a draw;
- a bare king against more: the other side wins;
- otherwise the side ahead in material (pawn 1, knight and bishop 3, rook 5, queen 9) wins;
  equal material: white wins (the most frequent result).

"decided" is the share of games whose final position falls under one of the first three rules
(the position itself decides the game), with the reader's accuracy on them; "material" is the
rest, read by the material count.
"""

from __future__ import annotations

import argparse
import collections
import importlib.util
import sys
import time
from pathlib import Path

import chess

TASK_DATA = Path(__file__).resolve().parents[1] / "tasks" / "chess_winners" / "data.py"
PAWNS = {chess.PAWN: 1, chess.KNIGHT: 3, chess.BISHOP: 3, chess.ROOK: 5, chess.QUEEN: 9, chess.KING: 0}
DRAW, WHITE_WINS, BLACK_WINS = 0, 1, 2


def _builder():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("_chess_winners_data", TASK_DATA)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def final_board(text: str) -> chess.Board:
    board = chess.Board()
    for token in text.split():
        board.push_san(token.rpartition(".")[2])
    return board


def _mate_in_one(board: chess.Board) -> bool:
    for move in board.legal_moves:
        board.push(move)
        mate = board.is_checkmate()
        board.pop()
        if mate:
            return True
    return False


def read_result(board: chess.Board) -> tuple[int, bool]:
    """The reader's result for a final position, and whether the position itself decides it."""
    mover_wins = WHITE_WINS if board.turn == chess.WHITE else BLACK_WINS
    mover_loses = BLACK_WINS if board.turn == chess.WHITE else WHITE_WINS
    if board.is_checkmate():
        return mover_loses, True
    if board.is_stalemate() or board.is_insufficient_material():
        return DRAW, True
    material = {
        color: sum(PAWNS[p.piece_type] for p in board.piece_map().values() if p.color == color)
        for color in (chess.WHITE, chess.BLACK)
    }
    bare = [color for color in material if board.occupied_co[color] == board.kings & board.occupied_co[color]]
    if bare:
        return (BLACK_WINS if bare[0] == chess.WHITE else WHITE_WINS), True
    if _mate_in_one(board):
        return mover_wins, True
    if material[chess.WHITE] == material[chess.BLACK]:
        return WHITE_WINS, False
    return (WHITE_WINS if material[chess.WHITE] > material[chess.BLACK] else BLACK_WINS), False


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--games", type=int, default=2000)
    parser.add_argument("--workers", type=int, default=None)
    args = parser.parse_args()
    start = time.perf_counter()
    games = _builder().generate(args.seed, args.games, args.workers)
    print(f"{len(games)} games of seed {args.seed} in {time.perf_counter() - start:.1f} s")
    endings = collections.Counter(g.ending for g in games)
    labels = collections.Counter(g.label for g in games)
    print("endings:", ", ".join(f"{k} {v / len(games):.1%}" for k, v in endings.most_common()))
    plies = sorted(len(g.text.split()) for g in games)
    median, p10 = plies[len(plies) // 2] / 2, plies[len(plies) // 10] / 2
    print(f"length: median {median:.1f} full moves, 10th percentile {p10:.1f}")
    shares = (f"{name} {labels[i] / len(games):.1%}" for i, name in enumerate(("draw", "white", "black")))
    print("results: " + ", ".join(shares))
    right: collections.Counter[str] = collections.Counter()
    total: collections.Counter[str] = collections.Counter()
    for g in games:
        guess, decided = read_result(final_board(g.text))
        for key in ("all", "decided" if decided else "material", f"ending {g.ending}"):
            total[key] += 1
            right[key] += guess == g.label
    for key in sorted(total, key=lambda k: (k.startswith("ending"), -total[k])):
        print(f"{key:18s} {total[key] / len(games):6.1%} of games, reader accuracy {right[key] / total[key]:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
