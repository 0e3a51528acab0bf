from __future__ import annotations

import csv
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pytest_weirdml.errors import DataUnavailable
from pytest_weirdml.tasks import TaskData, import_file, load_builder, load_task

chess = pytest.importorskip("chess")

NAME = "chess_blunders"
TASK_DIR = Path(__file__).resolve().parents[2] / "tasks" / NAME
N = 1000
CELLS = re.compile(r"^[.KQRBNPkqrbnp]{64}$")


@pytest.fixture(scope="module")
def module() -> Any:
    return sys.modules[load_builder(load_task(TASK_DIR)).__module__]


@pytest.fixture(scope="module")
def data(built: Callable[[str], TaskData], module: Any) -> TaskData:
    try:
        module.find_stockfish()
    except DataUnavailable as exc:
        pytest.skip(str(exc))
    return built(NAME)


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="ascii") as f:
        reader = csv.DictReader(f)
        assert reader.fieldnames == ["board", "turn", "from", "to", "promotion"]
        return list(reader)


def _board(row: dict[str, str], order: np.ndarray) -> tuple[Any, Any]:
    """The row as python-chess reads it (castling rights and en passant are not in the files):
    the board put back in square order, and the candidate move."""
    assert CELLS.match(row["board"]) and row["turn"] in ("w", "b")
    board = chess.Board(None)
    for place, ch in enumerate(row["board"]):
        if ch != ".":
            board.set_piece_at(int(order[place]), chess.Piece.from_symbol(ch))
    board.turn = row["turn"] == "w"
    promotion = None if row["promotion"] == "-" else chess.PIECE_SYMBOLS.index(row["promotion"])
    move = chess.Move(int(order[int(row["from"])]), int(order[int(row["to"])]), promotion)
    # Every castling right the board still allows, and en passant when the candidate is one.
    board.castling_rights = chess.BB_CORNERS
    board.castling_rights = board.clean_castling_rights()
    pawn_step = board.piece_type_at(move.from_square) == chess.PAWN and board.piece_at(move.to_square) is None
    if pawn_step and chess.square_file(move.from_square) != chess.square_file(move.to_square):
        board.ep_square = move.to_square
    return board, move


def _small(builder: Callable[..., np.ndarray], out: Path, seed: int, workers: int) -> dict[str, Any]:
    out.mkdir()
    answers = builder(out, seed, n_train=24, n_test=16, workers=workers)
    return {"answers": answers, **{p.name: p.read_bytes() for p in out.iterdir()}}


def test_spec_and_prompt() -> None:
    spec = load_task(TASK_DIR)
    assert spec.name == NAME and spec.time_limit_s == 120
    assert set(spec.markers) == {"chess", "tabular"}
    blocks = re.findall(r"```python\n(.*?)```", spec.prompt, re.S)
    assert len(blocks) == 1 and spec.prompt.count("```") == 2
    for name in spec.public_files:
        assert name in blocks[0]
    assert 'np.savetxt("results/test_preds.txt", preds, fmt="%d")' in blocks[0]


def test_files_shapes_and_dtypes(data: TaskData) -> None:
    spec = load_task(TASK_DIR)
    assert sorted(p.name for p in data.public_dir.iterdir()) == sorted(spec.public_files)
    for name in ("train_positions.csv", "test_positions.csv"):
        raw = (data.public_dir / name).read_bytes()
        assert raw.endswith(b"\n") and b"\r" not in raw
        assert len(_rows(data.public_dir / name)) == N
    labels = np.load(data.public_dir / "train_labels.npy", allow_pickle=False)
    assert labels.shape == (N,) and labels.dtype == np.int64
    answers = data.answers()
    assert answers.shape == (N,) and np.issubdtype(answers.dtype, np.integer)


def test_positions_and_moves_are_legal_in_the_hidden_order(data: TaskData, module: Any) -> None:
    """Read back in the builder's square order, every board is a valid position and every candidate
    a legal move (given the castling rights the board still allows and, for a pawn's diagonal step
    to an empty square, that en passant); in the usual order most are not."""
    order = module.square_order(load_task(TASK_DIR).seed)
    assert sorted(order) == list(range(64)) and np.mean(order == np.arange(64)) < 0.1
    pieces, sides, usual = [], [], 0
    for name in ("train_positions.csv", "test_positions.csv"):
        for row in _rows(data.public_dir / name):
            board, move = _board(row, order)
            assert board.is_valid(), row
            assert move in board.legal_moves, row
            pieces.append(len(board.piece_map()))
            sides.append(board.turn)
            as_usual, usual_move = _board(row, np.arange(64))
            usual += usual_move in as_usual.pseudo_legal_moves
    # Positions come from the opening to the middle game, with both sides to move.
    assert 16 <= np.median(pieces) <= 30
    assert 0.35 < np.mean(sides) < 0.65
    assert usual < 0.15 * len(pieces)  # read in the usual order, few moves would even be possible


def test_the_reference_finds_the_order_from_the_moves(data: TaskData, monkeypatch: pytest.MonkeyPatch) -> None:
    """The reference's local search recovers the hidden order, up to the mirror image that swaps the
    a- and h-files (which no material count can tell apart), from the two files' moves alone."""
    spec = load_task(TASK_DIR)
    reference = import_file("_chess_blunders_reference", spec.reference_path)
    rows = _rows(data.public_dir / "train_positions.csv") + _rows(data.public_dir / "test_positions.csv")
    cells = np.array([list(r["board"]) for r in rows])
    white = np.array([r["turn"] == "w" for r in rows])
    frm = np.array([int(r["from"]) for r in rows])
    to = np.array([int(r["to"]) for r in rows])
    found, fits = reference.square_order(cells, white, frm, to)
    truth = sys.modules[load_builder(spec).__module__].square_order(spec.seed)
    mirror = truth - truth % 8 + 7 - truth % 8
    assert np.array_equal(found, truth) or np.array_equal(found, mirror)
    assert fits == len(rows)
    # Boards whose places were shuffled again no longer match their moves: no order fits them all.
    assert reference.geometry()[0].sum() == 336  # the knight's 336 jumps on an empty board
    monkeypatch.setattr(reference, "ORDER_BUDGET_S", 3.0)
    shuffled = cells[:, np.random.default_rng(1).permutation(64)]
    assert reference.square_order(shuffled, white, frm, to)[1] < 0.9 * len(rows)


def test_classes_exactly_balanced(data: TaskData) -> None:
    labels = np.load(data.public_dir / "train_labels.npy")
    for y in (labels, data.answers()):
        assert set(np.unique(y)) == {0, 1}
        assert np.bincount(y).tolist() == [N // 2, N // 2]


def test_no_test_position_repeats_a_training_position(data: TaskData) -> None:
    def key(row: dict[str, str]) -> str:
        return row["board"] + row["turn"]

    train = {key(r) for r in _rows(data.public_dir / "train_positions.csv")}
    test = [key(r) for r in _rows(data.public_dir / "test_positions.csv")]
    assert len(train) == N and len(set(test)) == N
    assert not train & set(test)


def test_labels_agree_with_a_fresh_stockfish_search(data: TaskData, module: Any) -> None:
    """A fresh engine (another hash history) confirms the verdicts of a sample of test rows: blunders
    lose at least 150 centipawns at the labelling depth, the others at most 100."""
    rows = _rows(data.public_dir / "test_positions.csv")
    answers = data.answers()
    order = module.square_order(load_task(TASK_DIR).seed)
    engine = module.Engine(module.find_stockfish())
    try:
        agree = 0
        picks = np.random.default_rng(0).choice(N, size=40, replace=False)
        for i in picks:
            board, move = _board(rows[i], order)
            fen = board.fen()
            engine.new_position()
            best = engine.score(fen, module.DEPTH)
            cand = max(-module.CLIP_CP, min(module.CLIP_CP, engine.score(fen, module.DEPTH, move.uci())))
            loss = best - cand
            agree += (loss >= 150) if answers[i] == 1 else (loss <= 100)
    finally:
        engine.quit()
    assert agree >= 36


def test_build_is_deterministic_whatever_the_workers(module: Any, tmp_path: Path) -> None:
    builder = load_builder(load_task(TASK_DIR))
    try:
        module.find_stockfish()
    except DataUnavailable as exc:
        pytest.skip(str(exc))
    one = _small(builder, tmp_path / "w1", seed=7, workers=1)
    two = _small(builder, tmp_path / "w2", seed=7, workers=2)
    assert one.keys() == two.keys()
    for name in one:
        assert np.array_equal(one[name], two[name]) if name == "answers" else one[name] == two[name], name
    assert np.bincount(one["answers"]).tolist() == [8, 8]


def test_answers_not_in_public_files(data: TaskData) -> None:
    labels = np.load(data.public_dir / "train_labels.npy")
    assert not np.array_equal(labels, data.answers())
    # Neighbouring test rows agree about as often as chance: the order says nothing.
    answers = data.answers()
    assert abs(np.mean(answers[1:] == answers[:-1]) - 0.5) < 0.06


def test_missing_or_other_stockfish_raises_data_unavailable(module: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    found = module.shutil.which("stockfish") or next((p for p in module.STOCKFISH_PATHS if Path(p).is_file()), None)
    monkeypatch.setattr(module, "STOCKFISH_PATHS", ())
    monkeypatch.setattr(module.shutil, "which", lambda name: None)
    with pytest.raises(DataUnavailable, match="apt-get install stockfish"):
        module.find_stockfish()
    if found is None:
        pytest.skip("no Stockfish here to check the version test against")
    monkeypatch.setattr(module.shutil, "which", lambda name: found)
    monkeypatch.setattr(module, "STOCKFISH_VERSION", "Stockfish 0.1")
    with pytest.raises(DataUnavailable, match=r"install Stockfish 0\.1"):
        module.find_stockfish()


def test_missing_chess_package_raises_data_unavailable(module: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(module, "chess", None)
    with pytest.raises(DataUnavailable, match="pip install chess"):
        module.find_stockfish()
