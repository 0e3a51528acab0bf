"""Chess games between weak simulated players; predict who won from the move text.

Each player may follow a few moves of a common opening, then looks one move ahead: it likes
captures, checks and good squares, and it sometimes checks whether the square it moves to is
defended, whether its own pieces hang and whether a check mates. Strength varies per player
and decides how often it does those checks, how noisy its choices are and how often it plays
a random move. A game stops at checkmate, a draw rule, an agreed draw, a resignation once a
player is far enough behind in material, or a loss on time at a random move (which keeps the
final material from deciding every game). The label is the winner; the public text never
carries the result, and half the games lose their last move.
"""

from __future__ import annotations

import math
import multiprocessing
import os
import random
from pathlib import Path
from typing import NamedTuple

import numpy as np

from pytest_weirdml.errors import DataUnavailable

try:
    import chess
except ImportError:  # pragma: no cover - depends on the machine
    chess = None  # type: ignore[assignment]

DRAW, WHITE_WINS, BLACK_WINS = 0, 1, 2
N_TRAIN = 1000
N_TEST = 1000
TRUNCATE_P = 0.5
MAX_PLIES = 400
RESIGN_P = 0.05  # chance per move to resign once far enough behind
RESIGN_SHOCK_P = 0.2  # the same, right after a blow that lost SHOCK pawns or more
SHOCK = 3
RESIGN_AT = (3.0, 10.0)  # range of the material deficit (pawns) at which a player resigns
NEVER_RESIGN_P = 0.05  # share of players who play on to the end
FLAG_P = 0.8  # share of games with a clock that runs out at a random move
FLAG_PLIES = (44, 150)  # range of the ply at which that clock runs out
WHITE_EDGE = 0.05
# chess_blunders plays its positions with _player and WHITE_EDGE: what only this task's endings
# need is drawn in play_game, so that chess_blunders' games stay as they are.
RESULT_EDGE = 0.03  # white's extra edge in the games played for their result
AGREE_P = 0.08  # chance per move to agree a draw in a level endgame

# Centipawn values by piece type (index 0 unused, 6 = king).
VALUE = (0, 100, 320, 330, 500, 900, 0)
# Material in pawns, as a player counts it when deciding to resign.
PAWNS = (0, 1, 3, 3, 5, 9, 0)
# Opening lines many club beginners know a few moves of; a game follows one of them for a
# random number of plies while its moves match.
OPENINGS = (
    "e4 e5 Nf3 Nc6 Bc4 Bc5 c3 Nf6 d3 d6",
    "e4 e5 Nf3 Nc6 Bc4 Nf6 Ng5 d5 exd5 Na5",
    "e4 e5 Nf3 Nc6 Bc4 Be7 d4 exd4",
    "e4 e5 Nf3 Nc6 Bb5 a6 Ba4 Nf6 O-O Be7",
    "e4 e5 Nf3 Nc6 d4 exd4 Nxd4 Nf6 Nc3 Bb4",
    "e4 e5 Nf3 d6 d4 exd4 Nxd4 Nf6 Nc3 Be7",
    "e4 e5 Nf3 Nf6 Nxe5 d6 Nf3 Nxe4",
    "e4 e5 Bc4 Nf6 d3 Bc5 Nf3 d6",
    "e4 e5 Qh5 Nc6 Bc4 g6 Qf3 Nf6",
    "e4 e5 Nc3 Nf6 Nf3 Nc6 Bc4 Bc5",
    "e4 e5 f4 exf4 Nf3 g5 h4 g4",
    "e4 e5 d4 exd4 Qxd4 Nc6 Qe3 Nf6",
    "e4 c5 Nf3 d6 d4 cxd4 Nxd4 Nf6 Nc3 a6",
    "e4 c5 Nc3 Nc6 g3 g6 Bg2 Bg7",
    "e4 e6 d4 d5 Nc3 Nf6 e5 Nfd7",
    "e4 c6 d4 d5 Nc3 dxe4 Nxe4 Bf5",
    "e4 d5 exd5 Qxd5 Nc3 Qa5 d4 Nf6",
    "e4 Nc6 Nf3 e5 Bc4 Nf6",
    "e4 d6 d4 Nf6 Nc3 g6",
    "d4 d5 c4 e6 Nc3 Nf6 Bg5 Be7",
    "d4 d5 c4 dxc4 e3 Nf6 Bxc4 e6",
    "d4 d5 Bf4 Nf6 e3 c5 c3 Nc6",
    "d4 d5 Nf3 Nf6 e3 e6 Bd3 c5",
    "d4 d5 e4 dxe4 Nc3 Nf6 f3 exf3",
    "d4 Nf6 c4 g6 Nc3 Bg7 e4 d6",
    "d4 Nf6 c4 e6 Nc3 Bb4 e3 O-O",
    "c4 e5 Nc3 Nf6 g3 d5 cxd5 Nxd5",
    "Nf3 d5 g3 Nf6 Bg2 e6 O-O Be7",
)
BOOK = tuple(tuple(line.split()) for line in OPENINGS)


def _centre_distance(square: int) -> float:
    return max(abs(square % 8 - 3.5), abs(square // 8 - 3.5)) - 0.5


def _tables() -> tuple[tuple[tuple[int, ...], ...], tuple[tuple[int, ...], ...]]:
    """Piece-square bonuses from white's side, (middlegame, endgame), indexed [piece_type][square]."""
    mg: list[list[int]] = [[0] * 64 for _ in range(7)]
    eg: list[list[int]] = [[0] * 64 for _ in range(7)]
    for sq in range(64):
        file, rank = sq % 8, sq // 8
        cd = _centre_distance(sq)
        central_file = 1.0 if file in (3, 4) else 0.5 if file in (2, 5) else 0.0
        mg[1][sq] = int(6 * rank + 18 * central_file * (rank in (3, 4)))
        eg[1][sq] = int(4 * rank * rank)
        mg[2][sq] = eg[2][sq] = int(-14 * cd)
        mg[3][sq] = int(-7 * cd - 12 * (rank == 0))
        eg[3][sq] = int(-5 * cd)
        mg[4][sq] = eg[4][sq] = int(20 * (rank == 6) + 4 * central_file)
        mg[5][sq] = int(-3 * cd)
        eg[5][sq] = int(-6 * cd)
        mg[6][sq] = int(-25 * rank + (25 if file in (1, 2, 6) and rank == 0 else 0))
        eg[6][sq] = int(-12 * cd)
    # Doubled so that good squares are not lost in the players' noise.
    return tuple(tuple(2 * v for v in t) for t in mg), tuple(tuple(2 * v for v in t) for t in eg)


PST_MG, PST_EG = _tables()


class Player(NamedTuple):
    temperature: float  # centipawns of Gumbel noise added to every move's score
    p_random: float  # chance of a random legal move
    p_safety: float  # chance to look whether the destination square is defended
    p_rescue: float  # chance to notice own pieces that hang
    p_mate: float  # chance to look for a mate in one
    p_greed: float  # chance to notice what a capture wins
    resign_at: float  # material deficit in pawns at which the player may resign; inf: never


def _player(rng: random.Random, strength: float) -> Player:
    s = min(max(strength, 0.0), 1.0)
    resign_at = math.inf if rng.random() < 0.1 else rng.uniform(5.0, 15.0)
    return Player(
        temperature=15.0 + 60.0 * (1.0 - s),
        p_random=0.003 + 0.02 * (1.0 - s),
        p_safety=0.9 + 0.09 * s,
        p_rescue=0.8 + 0.19 * s,
        p_mate=0.4 + 0.55 * s,
        p_greed=0.45 + 0.45 * s,
        resign_at=resign_at,
    )


def _resign_at(rng: random.Random) -> float:
    return math.inf if rng.random() < NEVER_RESIGN_P else rng.uniform(*RESIGN_AT)


def _material(board: chess.Board, color: bool) -> int:
    return sum(PAWNS[pt] * board.pieces_mask(pt, color).bit_count() for pt in range(1, 6))


def _checking_squares(board: chess.Board, them: bool) -> dict[int, int]:
    """Squares from which each piece type of the side to move would attack the enemy king.

    Discovered checks and lines the moving piece itself opens are ignored: a weak player
    misses those too.
    """
    k = board.king(them)
    if k is None:
        return {}
    occ = board.occupied
    diag = chess.BB_DIAG_ATTACKS[k][chess.BB_DIAG_MASKS[k] & occ]
    line = chess.BB_RANK_ATTACKS[k][chess.BB_RANK_MASKS[k] & occ]
    line |= chess.BB_FILE_ATTACKS[k][chess.BB_FILE_MASKS[k] & occ]
    return {
        chess.PAWN: chess.BB_PAWN_ATTACKS[them][k],
        chess.KNIGHT: chess.BB_KNIGHT_ATTACKS[k],
        chess.BISHOP: diag,
        chess.ROOK: line,
        chess.QUEEN: diag | line,
        chess.KING: 0,
    }


class _Side(NamedTuple):
    """What one side's pieces attack, computed once per move instead of once per candidate."""

    types: dict[int, int]  # square -> piece type
    once: int  # squares attacked at least once
    twice: int  # squares attacked at least twice
    by_value: list[tuple[int, int]]  # (attacker value, squares attacked), cheapest first

    def min_attacker(self, square_bb: int) -> int:
        return next(value for value, squares in self.by_value if squares & square_bb)


def _side(board: chess.Board, color: bool) -> _Side:
    types: dict[int, int] = {}
    pawns = board.pieces_mask(chess.PAWN, color)
    for sq in chess.scan_forward(pawns):
        types[sq] = chess.PAWN
    if color == chess.WHITE:
        left, right = (pawns & ~chess.BB_FILE_A) << 7 & chess.BB_ALL, (pawns & ~chess.BB_FILE_H) << 9 & chess.BB_ALL
    else:
        left, right = (pawns & ~chess.BB_FILE_A) >> 9, (pawns & ~chess.BB_FILE_H) >> 7
    once, twice = left | right, left & right
    by_value = [(VALUE[chess.PAWN], once)]
    for pt in (chess.KNIGHT, chess.BISHOP, chess.ROOK, chess.QUEEN, chess.KING):
        union = 0
        for sq in chess.scan_forward(board.pieces_mask(pt, color)):
            types[sq] = pt
            attacks = board.attacks_mask(sq)
            twice |= once & attacks
            once |= attacks
            union |= attacks
        by_value.append((VALUE[pt] or 10_000, union))
    return _Side(types, once, twice, by_value)


def _threat(board: chess.Board, color: bool) -> int:
    """Centipawns the side ``color`` stands to lose to its most valuable hanging piece."""
    mine, theirs = _side(board, color), _side(board, not color)
    worst = 0
    for sq, pt in mine.types.items():
        sq_bb = chess.BB_SQUARES[sq]
        if pt != chess.KING and theirs.once & sq_bb:
            loss = VALUE[pt] if not mine.once & sq_bb else VALUE[pt] - theirs.min_attacker(sq_bb)
            worst = max(worst, loss)
    return worst


def _mating_score(board: chess.Board, move: chess.Move, them: bool, player: Player, rng: random.Random) -> float:
    """Drive a lone king to the edge and mate it; sometimes stalemate it by accident."""
    board.push(move)
    try:
        n_replies = board.legal_moves.count()
        if n_replies == 0:
            if board.is_check():
                return 100_000.0
            return -5_000.0 if rng.random() < player.p_safety else 0.0
        their_king = board.king(them)
        our_king = board.king(not them)
        assert their_king is not None and our_king is not None
        closeness = chess.square_distance(our_king, their_king)
        return -12.0 * n_replies + 25.0 * _centre_distance(their_king) - 8.0 * closeness
    finally:
        board.pop()


def choose_move(board: chess.Board, player: Player, rng: random.Random) -> chess.Move:
    # Pseudo-legal candidates are scored and the best legal one is played: generating only
    # legal moves costs several times more in python-chess and would blow the build budget.
    in_check = board.is_check()
    gen = board.generate_legal_moves() if in_check else board.generate_pseudo_legal_moves()
    # Sorted so that the choice does not depend on the generator's move order.
    moves = sorted(gen, key=lambda m: (m.from_square, m.to_square, m.promotion or 0))
    if rng.random() < player.p_random:
        legal = moves if in_check else [m for m in moves if board.is_legal(m)]
        return rng.choice(legal)
    us, them = board.turn, not board.turn
    checks = _checking_squares(board, them)
    if rng.random() < player.p_mate:
        for move in moves:
            pt = board.piece_type_at(move.from_square)
            if pt and chess.BB_SQUARES[move.to_square] & checks[move.promotion or pt] and board.is_legal(move):
                board.push(move)
                mate = board.is_checkmate()
                board.pop()
                if mate:
                    return move
    look_safety = rng.random() < player.p_safety
    greedy = rng.random() < player.p_greed
    last_to = board.peek().to_square if board.move_stack else -1
    mine, theirs = _side(board, us), _side(board, them)
    hanging: dict[int, int] = {}
    if rng.random() < player.p_rescue:
        for sq, pt in mine.types.items():
            sq_bb = chess.BB_SQUARES[sq]
            if pt != chess.KING and theirs.once & sq_bb:
                value = VALUE[pt]
                threat = value if not mine.once & sq_bb else value - theirs.min_attacker(sq_bb)
                if threat > 0:
                    hanging[sq] = threat
    non_pawn = sum(VALUE[pt] for pt in mine.types.values()) + sum(VALUE[pt] for pt in theirs.types.values())
    non_pawn -= VALUE[chess.PAWN] * board.pawns.bit_count()
    phase = min(max((non_pawn - 1300) / 4000.0, 0.0), 1.0)  # 1: middlegame, 0: endgame
    their_pieces = board.occupied_co[them] & ~board.pawns & ~board.kings
    mating = their_pieces == 0 and _material(board, us) - _material(board, them) >= 5
    mirror = 0 if us == chess.WHITE else 56
    squares, ep_square, temperature = chess.BB_SQUARES, board.ep_square, player.temperature
    mg, eg = PST_MG, PST_EG
    scored: list[tuple[float, int]] = []
    for i, move in enumerate(moves):
        frm, to = move.from_square, move.to_square
        to_bb = squares[to]
        pt = mine.types[frm]
        new_pt = move.promotion or pt
        captured = theirs.types.get(to, 0)
        if pt == chess.PAWN and to == ep_square:
            captured = chess.PAWN
        # Taking the piece that just moved (a recapture, say) is never overlooked.
        gain = VALUE[captured] if greedy or to == last_to else 0
        score = float(gain + VALUE[new_pt] - VALUE[pt])
        if look_safety and pt != chess.KING:
            if theirs.once & to_bb:
                # The moving piece attacks its destination, so another defender shows as a second attack.
                self_attacks = pt != chess.PAWN or captured
                defended = (mine.twice if self_attacks else mine.once) & to_bb
                loss = VALUE[new_pt] if not defended else VALUE[new_pt] - theirs.min_attacker(to_bb)
                score -= max(loss, 0)
                safe = loss <= 0
            else:
                safe = True
            if safe and frm in hanging:
                score += hanging[frm]
        fs, ts = frm ^ mirror, to ^ mirror
        score += phase * (mg[new_pt][ts] - mg[pt][fs]) + (1 - phase) * (eg[new_pt][ts] - eg[pt][fs])
        if to_bb & checks[new_pt]:
            score += 30.0
        if pt == chess.KING and abs(frm - to) == 2:
            score += 60.0
        score += temperature * -math.log(-math.log(rng.random() or 1e-12))
        scored.append((score, i))
    scored.sort(reverse=True)
    if mating:
        # Only the few best-looking moves are examined closely: searching all is too slow.
        top = [
            (score + _mating_score(board, moves[i], them, player, rng), i)
            for score, i in scored[:6]
            if board.is_legal(moves[i])
        ]
        top.sort(reverse=True)
        scored = top + scored
    for _, i in scored:
        if in_check or board.is_legal(moves[i]):
            return moves[i]
    raise AssertionError("choose_move called in a position without legal moves")


def san_of(board: chess.Board, move: chess.Move) -> str:
    """The move's SAN without the check suffix; the caller adds '+' or '#' after pushing it."""
    frm, to = move.from_square, move.to_square
    pt = board.piece_type_at(frm)
    if pt == chess.KING and abs(frm - to) == 2:
        return "O-O" if to > frm else "O-O-O"
    capture = board.piece_at(to) is not None or board.is_en_passant(move)
    dest = chess.SQUARE_NAMES[to]
    if pt == chess.PAWN:
        text = (chess.FILE_NAMES[chess.square_file(frm)] + "x" if capture else "") + dest
        return text + ("=" + chess.piece_symbol(move.promotion).upper() if move.promotion else "")
    assert pt is not None
    text = chess.piece_symbol(pt).upper()
    rivals = board.attackers_mask(board.turn, to) & board.pieces_mask(pt, board.turn) & ~chess.BB_SQUARES[frm]
    others = [sq for sq in chess.scan_forward(rivals) if board.is_legal(chess.Move(sq, to))]
    if others:
        same_file = any(chess.square_file(sq) == chess.square_file(frm) for sq in others)
        same_rank = any(chess.square_rank(sq) == chess.square_rank(frm) for sq in others)
        if not same_file:
            text += chess.FILE_NAMES[chess.square_file(frm)]
        elif not same_rank:
            text += chess.RANK_NAMES[chess.square_rank(frm)]
        else:
            text += chess.SQUARE_NAMES[frm]
    return text + ("x" if capture else "") + dest


def play_game(seed_words: tuple[int, ...]) -> tuple[list[str], int, str]:
    """Play one game; return its SAN moves, its label and how it ended."""
    rng = random.Random(int(np.random.SeedSequence(seed_words).generate_state(2, np.uint64)[0]))
    base = rng.betavariate(2.0, 2.0)
    # A small edge for white stands in for the first-move advantage seen in real games.
    white = _player(rng, base + WHITE_EDGE + RESULT_EDGE + rng.gauss(0.0, 0.18))
    black = _player(rng, base + rng.gauss(0.0, 0.18))
    # Weak players resign at a moderate deficit, and some never do.
    white, black = (p._replace(resign_at=_resign_at(rng)) for p in (white, black))
    book_plies = rng.randint(0, 10)
    # Some games are blitz games that one side loses on time at a random point.
    flag_ply = rng.randint(*FLAG_PLIES) if rng.random() < FLAG_P else MAX_PLIES
    board = chess.Board()
    san: list[str] = []
    last_deficit = {chess.WHITE: 0, chess.BLACK: 0}  # each side's deficit on its previous turn
    while True:
        us = board.turn
        player = white if us == chess.WHITE else black
        if not any(board.generate_legal_moves()):
            if board.is_check():
                return san, BLACK_WINS if us == chess.WHITE else WHITE_WINS, "mate"
            return san, DRAW, "stalemate"
        if board.is_insufficient_material():
            return san, DRAW, "material"
        if board.halfmove_clock >= 100:
            return san, DRAW, "fifty"
        if board.halfmove_clock >= 8 and board.is_repetition(3):
            return san, DRAW, "repetition"
        winner = WHITE_WINS if us == chess.BLACK else BLACK_WINS
        if board.ply() >= flag_ply:
            if board.has_insufficient_material(not us):
                return san, DRAW, "time"
            return san, winner, "time"
        deficit = _material(board, not us) - _material(board, us)
        # Players resign over material already lost or about to be lost (a piece that hangs
        # counts half: it may still be saved), most often at once after the blow that lost it;
        # early in a game they rarely give up, and the urge to resign later grows with the move.
        shock = deficit - last_deficit[us] >= SHOCK
        last_deficit[us] = deficit
        if (
            board.ply() >= 30
            and deficit >= 2
            and deficit + 4.5 >= player.resign_at
            and deficit + _threat(board, us) / 200 >= player.resign_at
            and rng.random() < (RESIGN_SHOCK_P if shock else RESIGN_P * min(1.0, (board.ply() - 30) / 60))
        ):
            return san, winner, "resign"
        # Level endgames are sometimes agreed drawn.
        if board.ply() >= 40 and abs(deficit) <= 1 and _material(board, us) <= 20 and rng.random() < AGREE_P:
            return san, DRAW, "agreed"
        book: set[str] = set()
        if len(san) < book_plies:
            book = {line[len(san)] for line in BOOK if len(line) > len(san) and line[: len(san)] == tuple(san)}
        move = board.parse_san(rng.choice(sorted(book))) if book else choose_move(board, player, rng)
        text = san_of(board, move)
        board.push(move)
        if board.is_check():
            text += "#" if not any(board.generate_legal_moves()) else "+"
        san.append(text)


def format_game(san: list[str]) -> str:
    """White's moves carry their ply number, as in the published data: "1.e4 e5 3.Nf3 Nc6"."""
    return " ".join(f"{i + 1}.{move}" if i % 2 == 0 else move for i, move in enumerate(san))


class Game(NamedTuple):
    text: str  # the public move text
    label: int
    ending: str  # how the game ended: mate, resign, time, stalemate, repetition, ...
    truncated: bool  # whether the last move was deleted from the text


def _game_job(args: tuple[int, int]) -> Game:
    seed, index = args
    san, label, ending = play_game((seed, index))
    # The truncation draw uses its own stream so it does not depend on how long the game was.
    truncated = bool(np.random.default_rng((seed, index, 1)).random() < TRUNCATE_P)
    return Game(format_game(san[:-1] if truncated else san), label, ending, truncated)


def generate(seed: int, n: int, workers: int | None = None) -> list[Game]:
    """Play ``n`` games; each game's seed depends only on (seed, index), not on the workers."""
    if chess is None:
        raise DataUnavailable("the chess_winners task needs the 'chess' package: pip install chess")
    jobs = [(seed, i) for i in range(n)]
    workers = workers or os.cpu_count() or 1
    if workers > 1 and "fork" in multiprocessing.get_all_start_methods():
        with multiprocessing.get_context("fork").Pool(workers) as pool:
            return pool.map(_game_job, jobs, chunksize=8)
    return [_game_job(job) for job in jobs]


def build(out: Path, seed: int, n_train: int = N_TRAIN, n_test: int = N_TEST, workers: int | None = None) -> np.ndarray:
    games = generate(seed, n_train + n_test, workers)
    train, test = games[:n_train], games[n_train:]
    (out / "train_games.txt").write_text("".join(g.text + "\n" for g in train), encoding="utf-8")
    np.save(out / "train_labels.npy", np.array([g.label for g in train], dtype=np.int64))
    (out / "test_games.txt").write_text("".join(g.text + "\n" for g in test), encoding="utf-8")
    return np.array([g.label for g in test], dtype=np.int64)
