from __future__ import annotations

import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pytest

from pytest_weirdml.errors import DataUnavailable
from pytest_weirdml.tasks import TaskData, load_builder, load_task

chess = pytest.importorskip("chess")

NAME = "chess_winners"
TASK_DIR = Path(__file__).resolve().parents[2] / "tasks" / NAME
N_GAMES = 1000
# One SAN token, with the ply number glued to white's moves: "23.Nbd2", "exd8=Q+", "O-O-O#".
TOKEN = re.compile(r"^(\d+\.)?(O-O(-O)?|[KQRBN][a-h]?[1-8]?x?[a-h][1-8]|([a-h]x)?[a-h][1-8](=[QRBN])?)[+#]?$")


class Replay(NamedTuple):
    plies: int
    mate: bool  # the final position shown is checkmate
    last_marked_mate: bool  # the last token ends with '#'
    final: Any  # the final chess.Board


@pytest.fixture(scope="module")
def data(built: Callable[[str], TaskData]) -> TaskData:
    return built(NAME)


@pytest.fixture(scope="module")
def builder() -> Callable[..., np.ndarray]:
    return load_builder(load_task(TASK_DIR))


@pytest.fixture(scope="module")
def module() -> Any:
    # The builder's own module, for its helpers (generate, the chess import).
    return sys.modules[load_builder(load_task(TASK_DIR)).__module__]


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def _replay(line: str, check_san: bool) -> Replay:
    board = chess.Board()
    tokens = line.split()
    for i, token in enumerate(tokens):
        number, _, san = token.rpartition(".")
        # White's moves carry their ply number (1, 3, 5, ...), black's never do.
        assert number == (str(i + 1) if i % 2 == 0 else ""), (i, token)
        move = board.parse_san(san)
        if check_san:
            assert board.san(move) == san, (i, token)
        board.push(move)
    return Replay(len(tokens), board.is_checkmate(), bool(tokens) and tokens[-1].endswith("#"), board)


@pytest.fixture(scope="module")
def replays(data: TaskData) -> dict[str, list[Replay]]:
    """Every game replayed from the start position; canonical SAN is compared on every 4th game."""
    out = {}
    for name in ("train_games.txt", "test_games.txt"):
        out[name] = [_replay(line, i % 4 == 0) for i, line in enumerate(_lines(data.public_dir / name))]
    return out


def test_public_files_shapes_and_dtypes(data: TaskData) -> None:
    spec = load_task(TASK_DIR)
    assert sorted(p.name for p in data.public_dir.iterdir()) == sorted(spec.public_files)
    for name in ("train_games.txt", "test_games.txt"):
        raw = (data.public_dir / name).read_bytes()
        assert raw.endswith(b"\n") and b"\r" not in raw
        lines = raw.decode("ascii").splitlines()
        assert len(lines) == N_GAMES
        assert all(line and line == line.strip() and "  " not in line for line in lines)
    labels = np.load(data.public_dir / "train_labels.npy", allow_pickle=False)
    assert labels.shape == (N_GAMES,) and labels.dtype == np.int64
    answers = data.answers()
    assert answers.shape == (N_GAMES,) and np.issubdtype(answers.dtype, np.integer)


def test_text_is_san_without_results(data: TaskData) -> None:
    for name in ("train_games.txt", "test_games.txt"):
        text = (data.public_dir / name).read_text(encoding="utf-8")
        for result in ("1-0", "0-1", "1/2", "*", "{", "[", ";"):
            assert result not in text, (name, result)
        bad = [t for t in text.split() if not TOKEN.match(t)]
        assert not bad, bad[:5]


def test_every_game_replays_legally(replays: dict[str, list[Replay]]) -> None:
    # The fixture asserts legality and canonical SAN move by move; here: the mate marks agree.
    for games in replays.values():
        assert len(games) == N_GAMES
        assert all(g.mate == g.last_marked_mate for g in games)
        # A position after mate is never continued, and no game is empty.
        assert min(g.plies for g in games) >= 2


def test_labels_in_range_and_frequencies(data: TaskData) -> None:
    labels = np.load(data.public_dir / "train_labels.npy")
    answers = data.answers()
    for y in (labels, answers):
        assert set(np.unique(y)) <= {0, 1, 2}
        freq = np.bincount(y, minlength=3) / len(y)
        assert 0.025 <= freq[0] <= 0.10, freq  # draws are rare
        assert 0.44 <= freq[1] <= 0.57, freq  # "always white" scores about 50%
        assert 0.36 <= freq[2] <= 0.50, freq
    both = np.bincount(np.concatenate([labels, answers]), minlength=3)
    assert both[1] > both[2]


def test_mate_and_label_agree(data: TaskData, replays: dict[str, list[Replay]]) -> None:
    labels = {"train_games.txt": np.load(data.public_dir / "train_labels.npy"), "test_games.txt": data.answers()}
    n_mates = 0
    for name, games in replays.items():
        for game, label in zip(games, labels[name], strict=True):
            if game.mate:
                n_mates += 1
                # The side that made the last move mated: white when the number of plies is odd.
                assert label == (1 if game.plies % 2 == 1 else 2)
            if game.final.is_stalemate() or game.final.is_insufficient_material():
                assert label == 0
    # About 30% of games end in mate (data version 3) and half of those keep their mating move.
    assert 0.1 < n_mates / (2 * N_GAMES) < 0.35


def test_game_lengths_are_realistic(replays: dict[str, list[Replay]]) -> None:
    full_moves = np.array([g.plies / 2 for games in replays.values() for g in games])
    assert 30 <= np.median(full_moves) <= 45
    assert np.percentile(full_moves, 10) >= 12
    assert np.percentile(full_moves, 90) >= 50
    assert full_moves.max() <= 200


def test_answers_not_in_public_files(data: TaskData) -> None:
    answers = data.answers()
    labels = np.load(data.public_dir / "train_labels.npy")
    assert not np.array_equal(labels, answers)
    # The test order carries no label information: neighbours agree about as often as chance.
    same = np.mean(answers[1:] == answers[:-1])
    p = np.bincount(answers, minlength=3) / len(answers)
    assert abs(same - np.sum(p**2)) < 0.06


def test_truncation_about_half(module: Any) -> None:
    games = module.generate(3, 120, workers=1)
    truncated = np.array([g.truncated for g in games])
    assert 0.35 < truncated.mean() < 0.65
    # A truncated game never shows the mating move; an intact mate always does.
    for g in games:
        if g.ending == "mate":
            assert g.text.endswith("#") != g.truncated
        assert g.ending in {"mate", "resign", "time", "stalemate", "repetition", "material", "fifty", "agreed"}
        if g.ending in {"stalemate", "repetition", "material", "fifty", "agreed"}:
            assert g.label == 0


def test_build_is_deterministic(builder: Callable[..., np.ndarray], tmp_path: Path) -> None:
    outs = []
    for seed, workers in ((7, 2), (7, 1)):
        out = tmp_path / f"s{seed}w{workers}"
        out.mkdir()
        answers = builder(out, seed, n_train=24, n_test=24, workers=workers)
        outs.append(({p.name: p.read_bytes() for p in out.iterdir()}, answers))
    (a, ans_a), (b, ans_b) = outs
    assert a == b and np.array_equal(ans_a, ans_b)  # the worker count changes nothing
    assert len(a["train_labels.npy"]) > 0 and len(ans_a) == 24


def test_missing_chess_package_raises_data_unavailable(module: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(module, "chess", None)
    with pytest.raises(DataUnavailable, match="pip install chess"):
        module.generate(0, 2, workers=1)


def test_prompt_names_every_file(data: TaskData) -> None:
    prompt = load_task(TASK_DIR).prompt
    for name in load_task(TASK_DIR).public_files:
        assert f"data/{name}" in prompt or name in prompt
    assert prompt.count("```python") == 1
    assert "np.savetxt('results/test_preds.txt', preds, fmt='%d')" in prompt
