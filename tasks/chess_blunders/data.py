"""Chess positions from games between simulated weak players, each with a candidate move: is the move a blunder?

Positions come from games played like chess_winners plays them (its weak simulated players and
opening book, imported from tasks/chess_winners/data.py), at three random plies of each game.
A candidate move is drawn there, half the time the move a weak player would choose and half
the time a random legal move. Stockfish judges it at a fixed depth (DEPTH, one thread, a fixed
hash cleared before every position): a blunder loses at least BLUNDER_CP centipawns against the
best move; a move that loses at most SAFE_CP is not one; moves in between are never candidates.
The verdict must be the same at CHECK_DEPTH, so no label is an accident of one search horizon.
Each position first draws which class it looks for, then tries up to TRIES candidates; each
split keeps the first n/2 samples of each class in game order, so the classes are exactly
balanced, and the test split never repeats a training position.

The files show each position as a 64-character board in one hidden order of the squares, the same
for every row of both splits of a data set (``square_order``), with the side to move and the
candidate as the two positions in that string it leaves and reaches: a script cannot hand the
board to a chess library or its own move generator before it has worked out which character is
which square. Castling rights, the en-passant square and the move counters are not shown.
"""

from __future__ import annotations

import csv
import importlib.util
import io
import multiprocessing
import multiprocessing.util
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from pytest_weirdml.errors import DataUnavailable

try:
    import chess
except ImportError:  # pragma: no cover - depends on the machine
    chess = None  # type: ignore[assignment]

N_TRAIN = 1000
N_TEST = 1000
DEPTH = 8
CHECK_DEPTH = 4
BLUNDER_CP = 200
SAFE_CP = 50
# Evaluations are clipped here (mates included); positions already decided beyond it are skipped.
CLIP_CP = 1000
HASH_MB = 2
TRIES = 8  # candidate moves searched per position before giving it up
# Random candidates are more often blunders than not, so more positions look for a safe move.
SAFE_TARGET_P = 0.65
STOPS = ((12, 30), (10, 25), (10, 25))  # first sampled ply, then gaps to the next ones
BATCH = 32  # games per round of the pool after the first; results never depend on it
FIRST_ROUND = 0.7  # games per sample in the first round, a little under what a split needs
SPLITS = {"train": 1, "test": 2}
# Labels are the engine's verdicts, so one seed gives one data set only with one engine version.
STOCKFISH_VERSION = "Stockfish 15.1"
STOCKFISH_PATHS = ("/usr/games/stockfish", "/usr/bin/stockfish", "/usr/local/bin/stockfish")
COLUMNS = ["board", "turn", "from", "to", "promotion"]


def _load_chess_winners() -> Any:
    """The chess_winners builder, imported by path: its players and opening book make our games."""
    path = Path(__file__).resolve().parent.parent / "chess_winners" / "data.py"
    name = "_weirdml_chess_winners_players"
    module = sys.modules.get(name)
    if module is None:
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return module


cw = _load_chess_winners()


class Sample(NamedTuple):
    fen: str
    move: str  # UCI
    label: int  # 1 blunder, 0 not
    loss: int  # centipawns lost against the best move, at DEPTH
    kind: str  # "player" or "random": where the candidate came from
    game: int


class Engine:
    """Stockfish over plain UCI pipes: a position's score at a fixed depth, for one root move or all.

    One thread and a fixed hash, cleared before every position (``ucinewgame``): the same
    position always gets the same verdict, whatever ran before it in this process.
    """

    def __init__(self, path: str) -> None:
        self._proc = subprocess.Popen(
            [path], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, bufsize=1
        )
        self._send("uci")
        self.name = self._wait("id name")[len("id name ") :].strip()
        self._wait("uciok")
        self._send(f"setoption name Threads value 1\nsetoption name Hash value {HASH_MB}")
        self.new_position()

    def _send(self, text: str) -> None:
        assert self._proc.stdin is not None
        self._proc.stdin.write(text + "\n")

    def _wait(self, token: str) -> str:
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            if line.startswith(token):
                return line
        raise RuntimeError(f"Stockfish exited before answering {token!r}")

    def new_position(self) -> None:
        # The engine reads its commands in order, so the next search waits for the clearing by itself.
        self._send("ucinewgame")

    def score(self, fen: str, depth: int, move: str | None = None) -> int:
        """Centipawns for the side to move (mates as +-100000 minus the distance), clipped later."""
        assert self._proc.stdout is not None
        self._send(f"position fen {fen}\ngo depth {depth}" + (f" searchmoves {move}" if move else ""))
        score = None
        for line in self._proc.stdout:
            if line.startswith("bestmove"):
                break
            if line.startswith("info") and " score " in line and "bound" not in line:
                kind, value = line.split(" score ", 1)[1].split()[:2]
                score = int(value) if kind == "cp" else (100_000 - abs(int(value))) * (1 if int(value) > 0 else -1)
        if score is None:
            raise RuntimeError(f"Stockfish gave no score for {fen}")
        return score

    def quit(self) -> None:
        if self._proc.poll() is None:
            self._send("quit")
            self._proc.stdin.close()  # type: ignore[union-attr]
            self._proc.wait()


def find_stockfish() -> str:
    """The engine's path, once it is known to be the version the labels are defined by."""
    if chess is None:
        raise DataUnavailable("the chess_blunders task needs the 'chess' package: pip install chess")
    path = shutil.which("stockfish") or next((p for p in STOCKFISH_PATHS if os.access(p, os.X_OK)), None)
    if path is None:
        raise DataUnavailable("the chess_blunders task needs the Stockfish engine: apt-get install stockfish")
    engine = Engine(path)
    engine.quit()
    if engine.name != STOCKFISH_VERSION:
        raise DataUnavailable(
            f"the chess_blunders labels are {STOCKFISH_VERSION}'s verdicts, but {path} is {engine.name}: "
            f"install {STOCKFISH_VERSION} (Debian 12's package: apt-get install stockfish=15.1-4)"
        )
    return path


_ENGINE: Engine | None = None


def _start_engine(path: str) -> None:
    global _ENGINE
    _ENGINE = Engine(path)
    # A pool worker's own exit does not stop the engine: quit it, so no process is left behind.
    multiprocessing.util.Finalize(None, _ENGINE.quit, exitpriority=10)


def _loss(fen: str, move: str, depth: int, best: int) -> int:
    assert _ENGINE is not None
    return best - max(-CLIP_CP, min(CLIP_CP, _ENGINE.score(fen, depth, move)))


def _verdict(loss: int) -> int:
    return 1 if loss >= BLUNDER_CP else 0 if loss <= SAFE_CP else -1


def _positions(rng: random.Random) -> list[Any]:
    """Play one game as chess_winners does and keep the positions at a few random plies."""
    base = rng.betavariate(2.0, 2.0)
    white = cw._player(rng, base + cw.WHITE_EDGE + rng.gauss(0.0, 0.18))
    black = cw._player(rng, base + rng.gauss(0.0, 0.18))
    book_plies = rng.randint(0, 10)
    stops, ply = set(), 0
    for lo, hi in STOPS:
        ply += rng.randint(lo, hi)
        stops.add(ply)
    board = chess.Board()
    san: list[str] = []
    kept = []
    while board.ply() <= max(stops):
        if not any(board.generate_legal_moves()) or board.is_insufficient_material():
            break
        if board.ply() in stops:
            kept.append(board.copy(stack=False))
        player = white if board.turn == chess.WHITE else black
        book: set[str] = set()
        if len(san) < book_plies:
            book = {line[len(san)] for line in cw.BOOK if len(line) > len(san) and line[: len(san)] == tuple(san)}
        move = board.parse_san(rng.choice(sorted(book))) if book else cw.choose_move(board, player, rng)
        san.append(board.san(move))
        board.push(move)
    return kept


def _game_job(args: tuple[int, int, int]) -> list[Sample]:
    seed, split, g = args
    assert _ENGINE is not None
    rng = random.Random(int(np.random.SeedSequence((seed, split, g)).generate_state(2, np.uint64)[0]))
    out = []
    for board in _positions(rng):
        target = int(rng.random() >= SAFE_TARGET_P)
        fen = board.fen()
        _ENGINE.new_position()
        shallow_best = _ENGINE.score(fen, CHECK_DEPTH)
        if abs(shallow_best) > CLIP_CP:
            continue
        legal = sorted(board.legal_moves, key=lambda m: m.uci())
        player = cw._player(rng, rng.betavariate(2.0, 2.0))
        best: int | None = None
        tried = set()
        for _ in range(TRIES):
            kind = "player" if rng.random() < 0.5 else "random"
            move = (cw.choose_move(board, player, rng) if kind == "player" else rng.choice(legal)).uci()
            if move in tried:
                continue
            tried.add(move)
            if _verdict(_loss(fen, move, CHECK_DEPTH, shallow_best)) != target:
                continue
            if best is None:
                best = _ENGINE.score(fen, DEPTH)
                if abs(best) > CLIP_CP:
                    break
            loss = _loss(fen, move, DEPTH, best)
            if _verdict(loss) == target:
                out.append(Sample(fen, move, target, loss, kind, g))
                break
    return out


def _key(fen: str) -> str:
    """What the files show of a position (the board and the side to move): rows that would look alike."""
    return " ".join(fen.split()[:2])


def _select(samples: list[Sample], n: int, exclude: set[str]) -> list[Sample] | None:
    """The first n/2 samples of each class in game order, skipping positions already used."""
    by_class: dict[int, list[Sample]] = {0: [], 1: []}
    seen = set(exclude)
    for s in samples:
        if _key(s.fen) not in seen and len(by_class[s.label]) < n // 2 + s.label * (n % 2):
            seen.add(_key(s.fen))
            by_class[s.label].append(s)
    if len(by_class[0]) + len(by_class[1]) < n:
        return None
    return by_class[0] + by_class[1]


def generate(seed: int, sizes: dict[str, int], workers: int | None = None) -> dict[str, list[Sample]]:
    """``sizes[split]`` samples per split, half of them blunders, shuffled.

    Each game depends only on (seed, split, game index), so neither the worker count nor the
    batch size changes anything. Test positions never repeat a training position.
    """
    path = find_stockfish()
    workers = workers or len(os.sched_getaffinity(0)) or 1
    found: dict[str, list[Sample]] = {split: [] for split in sizes}
    chosen: dict[str, list[Sample] | None] = {split: None for split in sizes}
    games = 0
    with multiprocessing.get_context("fork").Pool(workers, initializer=_start_engine, initargs=(path,)) as pool:
        while any(c is None for c in chosen.values()):
            short = [split for split in sizes if chosen[split] is None]
            more = BATCH if games else max(int(FIRST_ROUND * max(sizes.values())), BATCH)
            jobs = [(seed, SPLITS[split], g) for split in short for g in range(games, games + more)]
            for (_, code, _), samples in zip(jobs, pool.map(_game_job, jobs, chunksize=2), strict=True):
                found[next(k for k, v in SPLITS.items() if v == code)] += samples
            games += more
            used: set[str] = set()
            for split in sizes:  # in order, so a later split avoids the positions of the earlier ones
                chosen[split] = _select(found[split], sizes[split], used)
                used |= {_key(s.fen) for s in chosen[split] or []}
        pool.close()
        pool.join()
    out = {}
    for split, picked in chosen.items():
        assert picked is not None
        order = np.random.default_rng((seed, SPLITS[split], 99)).permutation(len(picked))
        out[split] = [picked[i] for i in order]
    return out


def square_order(seed: int) -> np.ndarray:
    """The data set's hidden order: character ``i`` of every board is square ``square_order(seed)[i]``
    (python-chess numbering, a1 = 0, b1 = 1, ..., h8 = 63)."""
    return np.random.default_rng((seed, 64)).permutation(64)


def encode(fen: str, move: str, order: np.ndarray) -> list[str]:
    """One row of the files: the board in the hidden order, the side to move, the move's two positions."""
    board = chess.Board(fen)
    where = np.argsort(order)  # square -> its position in the string
    uci = chess.Move.from_uci(move)
    cells = "".join(p.symbol() if (p := board.piece_at(int(sq))) else "." for sq in order)
    promotion = chess.piece_symbol(uci.promotion) if uci.promotion else "-"
    return [cells, "w" if board.turn else "b", str(where[uci.from_square]), str(where[uci.to_square]), promotion]


def _csv(samples: list[Sample], order: np.ndarray) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(COLUMNS)
    writer.writerows(encode(s.fen, s.move, order) for s in samples)
    return buf.getvalue()


def build(out: Path, seed: int, n_train: int = N_TRAIN, n_test: int = N_TEST, workers: int | None = None) -> np.ndarray:
    samples = generate(seed, {"train": n_train, "test": n_test}, workers)
    train, test = samples["train"], samples["test"]
    order = square_order(seed)
    (out / "train_positions.csv").write_text(_csv(train, order), encoding="utf-8")
    np.save(out / "train_labels.npy", np.array([s.label for s in train], dtype=np.int64))
    (out / "test_positions.csv").write_text(_csv(test, order), encoding="utf-8")
    return np.array([s.label for s in test], dtype=np.int64)
