from __future__ import annotations

import ast
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from checks import assert_public_arrays, load_public

from pytest_weirdml.tasks import TaskData, load_builder, load_task

NAME = "digits_shift"
TASK_DIR = Path(__file__).resolve().parents[2] / "tasks" / NAME
SHAPES = {
    "train_data.npy": ((6000, 15, 7, 3), np.uint8),
    "train_labels.npy": ((6000,), np.int64),
    "train_styles.npy": ((6000,), np.int64),
    "test_data.npy": ((1000, 15, 7, 3), np.uint8),
}
LUMA = np.array([0.3, 0.59, 0.11])


@pytest.fixture(scope="module")
def data(built) -> TaskData:  # type: ignore[no-untyped-def]
    return built(NAME)


@pytest.fixture(scope="module")
def module() -> Any:
    return sys.modules[load_builder(load_task(TASK_DIR)).__module__]


def _small_build(out: Path, seed: int, **params: Any) -> np.ndarray:
    out.mkdir()
    return load_builder(load_task(TASK_DIR))(out, seed, n_train=60, n_test=40, **params)


def test_spec() -> None:
    spec = load_task(TASK_DIR)
    assert spec.name == NAME
    assert set(spec.markers) == {"images", "domain_shift", "digits"}
    assert spec.time_limit_s == 120
    assert sorted(spec.public_files) == sorted(SHAPES)
    blocks = re.findall(r"```python\n(.*?)```", spec.prompt, re.S)
    assert len(blocks) == 1 and spec.prompt.count("```") == 2
    for name in SHAPES:
        assert name in spec.prompt and name in blocks[0]
    assert "results/test_preds.txt" in blocks[0]


def test_shapes_and_dtypes(data: TaskData) -> None:
    assert_public_arrays(data, SHAPES)
    answers = data.answers()
    assert answers.shape == (1000,)
    assert np.issubdtype(answers.dtype, np.integer)


def test_labels_and_styles(data: TaskData, module: Any) -> None:
    labels, answers, styles = (
        load_public(data, "train_labels.npy"),
        data.answers(),
        load_public(data, "train_styles.npy"),
    )
    assert set(np.unique(labels)) == set(np.unique(answers)) == set(range(1, 7))
    assert set(np.unique(styles)) == {0, 1, 2}
    # Training digits and styles are drawn uniformly; the test digits follow unequal shares.
    for y, k in ((labels, 6), (styles, 3)):
        share = np.bincount(y - y.min(), minlength=k) / len(y)
        assert np.abs(share - 1 / k).max() < 0.05
    test_shares = np.sort(np.bincount(answers, minlength=7)[1:] / len(answers))[::-1]
    assert np.abs(test_shares - np.array(module.TEST_SHARES)).max() < 0.04
    # Every digit appears in every training style.
    assert len({(int(d), int(s)) for d, s in zip(labels, styles, strict=True)}) == 18


def test_styles_are_disjoint_the_test_pictures_scratched_and_the_brightness_order_a_coin(
    module: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Recorded at the renderer: training pictures are drawn by the renderer's own families, their
    recorded families are the public style codes; test pictures are 7-segment digits, each with one
    to three scratches; in both sets the digit is lighter than its background in some pictures and
    darker in others."""
    drawn: list[tuple[str, np.ndarray]] = []
    scratches: list[int] = []
    glyph_mask, test_mask, scratch = module.renderer._glyph_mask, module._test_mask, module._scratches

    def recording(rng: np.random.Generator, digit: int, style: str, fonts: Any) -> np.ndarray:
        mask = glyph_mask(rng, digit, style, fonts)
        drawn.append((style, mask))
        return mask

    def recording_test(rng: np.random.Generator, digit: int) -> np.ndarray:
        mask = test_mask(rng, digit)
        drawn.append(("test", mask))
        return mask

    def recording_scratch(rng: np.random.Generator, draw: Any) -> int:
        scratches.append(scratch(rng, draw))
        return scratches[-1]

    monkeypatch.setattr(module.renderer, "_glyph_mask", recording)
    monkeypatch.setattr(module, "_test_mask", recording_test)
    monkeypatch.setattr(module, "_scratches", recording_scratch)
    _small_build(tmp_path / "out", seed=5)
    train_styles = np.load(tmp_path / "out" / "train_styles.npy")
    assert [s for s, _ in drawn[:60]] == [("font", "hand", "bitmap")[k] for k in train_styles]
    assert [s for s, _ in drawn[60:100]] == ["test"] * 40
    assert len(scratches) == 40 and set(scratches) <= {1, 2, 3} and len(set(scratches)) > 1
    images = np.concatenate([np.load(tmp_path / "out" / "train_data.npy"), np.load(tmp_path / "out" / "test_data.npy")])
    lighter = []
    for i, (_, mask) in enumerate(drawn[:100]):
        luma = images[i].astype(np.float64) @ LUMA
        ink, ground = luma[mask >= 0.6 * mask.max()].mean(), luma[mask < 0.05].mean()
        lighter.append(ink > ground)
    assert 0.25 < np.mean(lighter[:60]) < 0.75 and 0.25 < np.mean(lighter[60:]) < 0.75


def test_reference_draws_the_test_digits_as_the_builder_does(module: Any) -> None:
    """The reference's own copy of the 7-segment geometry is the renderer's: the key to its score."""
    tree = ast.parse((TASK_DIR / "reference.py").read_text())
    consts = {
        node.targets[0].id: ast.literal_eval(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign)
        and isinstance(node.targets[0], ast.Name)
        and node.targets[0].id in ("LIT", "SEGMENTS")
    }
    assert consts == {"LIT": module.renderer.LIT, "SEGMENTS": module.renderer.SEGMENTS}
    assert f"torch.tensor({list(module.SCRATCH_P)!r})" in ast.unparse(tree)


def test_bad_test_style_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="test_style must be 'segment'"):
        _small_build(tmp_path / "bad", seed=0, test_style="cursive")


def test_raw_pixel_neighbours_do_not_transfer(data: TaskData) -> None:
    """Nearest neighbour on raw pixels, from training to test pictures, is near chance level:
    the test style does not look like the training styles pixel for pixel."""
    train = load_public(data, "train_data.npy")[:3000].reshape(3000, -1).astype(np.float64)
    labels = load_public(data, "train_labels.npy")[:3000]
    test = load_public(data, "test_data.npy").reshape(1000, -1).astype(np.float64)
    d = (test**2).sum(1)[:, None] - 2 * test @ train.T + (train**2).sum(1)[None, :]
    assert np.mean(labels[d.argmin(1)] == data.answers()) < 0.3  # the majority class alone is 0.26


def test_answers_not_in_public_files(data: TaskData) -> None:
    for name in SHAPES:
        if name != "test_data.npy":
            assert load_public(data, name).shape[0] != 1000
