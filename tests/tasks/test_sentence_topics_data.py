"""sentence_topics and sentence_topics_bag: the built files and what the tasks promise."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from pytest_weirdml.errors import DataUnavailable
from pytest_weirdml.tasks import TaskData, TaskSpec, load_builder, load_task

TASKS_DIR = Path(__file__).resolve().parents[2] / "tasks"
N_TRAIN, N_TEST, CLASSES = 2000, 1000, 8
FILES = ("train_sentences.txt", "train_labels.npy", "test_sentences.txt")


@pytest.fixture(scope="module")
def spec() -> TaskSpec:
    return load_task(TASKS_DIR / "sentence_topics")


@pytest.fixture(scope="module")
def build(spec: TaskSpec) -> Callable[..., np.ndarray]:
    return load_builder(spec)


def _built(built: Callable[[str], TaskData], name: str) -> TaskData:
    try:
        return built(name)
    except DataUnavailable as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def data(built: Callable[[str], TaskData]) -> TaskData:
    return _built(built, "sentence_topics")


@pytest.fixture(scope="module")
def bag(built: Callable[[str], TaskData]) -> TaskData:
    return _built(built, "sentence_topics_bag")


@pytest.fixture(scope="module")
def definitions(build: Callable[..., np.ndarray]) -> list[set[str]]:
    """The WordNet definitions of each label, as the builder reads them."""
    module = build.__globals__
    by_lexfile = module["read_definitions"](module["_wordnet_file"](module["WORDNET_SYSTEM_DIR"]))
    return [set(by_lexfile[lexfile]) for _, lexfile in module["CATEGORIES"]]


def n_keys(spec: TaskSpec, build: Callable[..., np.ndarray]) -> int:
    """The task's number of keys: its params', else the builder's default."""
    return int(spec.params.get("n_keys", build.__globals__["N_KEYS"]))


def lines(data: TaskData, name: str) -> list[str]:
    return (data.public_dir / name).read_text(encoding="utf-8").splitlines()


def decode(
    build: Callable[..., np.ndarray], sentence: str, candidates: set[str], seed: int, n_keys: int
) -> tuple[int, str] | None:
    """The key of ``seed`` (of ``n_keys``) that turns ``sentence`` into one of ``candidates``, and that definition."""
    module = build.__globals__
    for which, key in enumerate(module["keys_for"](seed, n_keys)):
        plain = module["unsubstitute"](sentence, key)
        if plain in candidates:
            return which, plain
    return None


def test_specs() -> None:
    plain, shuffled = load_task(TASKS_DIR / "sentence_topics"), load_task(TASKS_DIR / "sentence_topics_bag")
    for spec in (plain, shuffled):
        assert spec.public_files == FILES
        assert spec.builder == TASKS_DIR / "sentence_topics" / "data.py"
        assert spec.reference_path == TASKS_DIR / "sentence_topics" / "reference.py"
        assert spec.prompt.count("```python") == 1 and spec.prompt.count("```") == 2
        # The prompt says the text is encoded and never how (issue 24; test_prompts.py lists the
        # phrases it must not contain, "0 to 25" among them).
        assert "wordnet" in spec.prompt.lower() and "has been encoded" in spec.prompt
        assert "0 to 25" not in spec.prompt and "shift" not in spec.prompt.lower()
    assert dict(plain.params) == {"shuffle_words": False, "n_keys": 192}
    assert dict(shuffled.params) == {"shuffle_words": True}
    assert set(plain.markers) == {"text", "sentences"}
    assert set(shuffled.markers) == {"text", "sentences", "bag_of_words"}


@pytest.mark.parametrize("variant", ["data", "bag"])
def test_files_shapes_dtypes_and_balance(variant: str, request: pytest.FixtureRequest) -> None:
    built: TaskData = request.getfixturevalue(variant)
    assert sorted(p.name for p in built.public_dir.iterdir()) == sorted(FILES)
    train, test = lines(built, "train_sentences.txt"), lines(built, "test_sentences.txt")
    labels, answers = np.load(built.public_dir / "train_labels.npy", allow_pickle=False), built.answers()
    assert len(train) == N_TRAIN and len(test) == N_TEST
    assert all(s.strip() == s and len(s.split()) >= 5 for s in train + test)
    assert labels.shape == (N_TRAIN,) and labels.dtype == np.int64
    assert answers.shape == (N_TEST,) and np.issubdtype(answers.dtype, np.integer)
    assert np.bincount(labels, minlength=CLASSES).tolist() == [N_TRAIN // CLASSES] * CLASSES
    assert np.bincount(answers, minlength=CLASSES).tolist() == [N_TEST // CLASSES] * CLASSES


def test_every_sentence_is_a_definition_of_its_category_in_one_of_the_keys(
    spec: TaskSpec, data: TaskData, build: Callable[..., np.ndarray], definitions: list[set[str]]
) -> None:
    """Read back through one of the seed's keys, each sentence is a WordNet definition filed under
    its label; every key carries a fair share of the sentences, in train and test alike."""
    labels = np.load(data.public_dir / "train_labels.npy")
    seen: dict[str, set[str]] = {"train": set(), "test": set()}
    used: dict[str, list[int]] = {"train": [], "test": []}
    for split, ys in (("train", labels), ("test", data.answers())):
        for sentence, label in zip(lines(data, f"{split}_sentences.txt"), ys, strict=True):
            found = decode(build, sentence, definitions[int(label)], spec.seed, n_keys(spec, build))
            assert found is not None, f"{sentence!r} is no coded definition of category {label}"
            used[split].append(found[0])
            seen[split].add(found[1])
    assert len(seen["train"]) == N_TRAIN and len(seen["test"]) == N_TEST, "a definition is used twice"
    assert not seen["train"] & seen["test"]
    n = n_keys(spec, build)
    counts = np.bincount(used["train"] + used["test"], minlength=n)
    # A key's count is binomial (3000 draws, 1/n each): about 16 for 192 keys, none under a quarter.
    assert len(counts) == n and counts.min() > 0.25 * (N_TRAIN + N_TEST) / n, counts
    assert len(set(used["test"])) > 0.9 * n, "nearly every key also writes test sentences"
    # Every category's definitions belong to it alone.
    assert all(not a & b for i, a in enumerate(definitions) for b in definitions[i + 1 :])


def test_the_keys_are_unrelated_orderings(build: Callable[..., np.ndarray], spec: TaskSpec) -> None:
    """192 keys (the bag variant: 64) of 3 distinct permutations of the letters each, none a rotation
    of another, a fixed set per seed and a new one for the next seed; a shorter list of a seed's keys
    is the start of a longer one."""
    module = build.__globals__
    lower = module["LOWER"]
    assert n_keys(spec, build) == 192
    assert n_keys(load_task(TASKS_DIR / "sentence_topics_bag"), build) == module["N_KEYS"] == 64
    keys = module["keys_for"](spec.seed, 192)
    assert len(keys) == 192 and {len(k) for k in keys} == {module["PERIOD"]} == {3}
    assert module["keys_for"](spec.seed) == keys[:64]
    alphabets = [a for k in keys for a in k]
    assert all(sorted(a) == list(lower) for a in alphabets)
    steps = {tuple((lower.index(a[(i + 1) % 26]) - lower.index(a[i])) % 26 for i in range(26)) for a in alphabets}
    assert len(steps) == len(alphabets) and all(len(set(s)) > 1 for s in steps)
    assert module["keys_for"](spec.seed, 192) == keys
    assert not {a for k in module["keys_for"](spec.seed + 1, 192) for a in k} & set(alphabets)


def test_the_alphabets_take_turns_along_each_word(build: Callable[..., np.ndarray], spec: TaskSpec) -> None:
    """Letter j of every word is written in the key's alphabet j % 3 (case kept, non-letters kept,
    the count restarting after each), so a word is spelt the same wherever a key writes it, while
    a repeated letter is, at neighbouring positions, never repeated in the spelling."""
    module = build.__globals__
    key = module["keys_for"](spec.seed)[0]
    text = "A see-saw of Trees, 12 and an Aardvark."
    coded = module["substitute"](text, key)
    assert module["unsubstitute"](coded, key) == text and len(coded) == len(text)
    assert [c for c in coded if not c.isalpha()] == [c for c in text if not c.isalpha()]
    assert [c.isupper() for c in coded] == [c.isupper() for c in text]
    assert coded.split()[1][:3] == key[0][18] + key[1][4] + key[2][4]  # "see"
    assert coded.split()[1][3] == "-" and coded.split()[1][4] == key[0][18]  # "saw" starts again
    assert coded.split()[-1][:2] == key[0][0].upper() + key[1][0]  # "Aa": two spellings of one letter
    assert module["substitute"]("trees trees", key).split()[0] == module["substitute"]("trees", key)


def test_no_sentence_keeps_its_repeated_letters(
    data: TaskData, build: Callable[..., np.ndarray], spec: TaskSpec, definitions: list[set[str]]
) -> None:
    """What broke data_version 2 sentence by sentence: a single spelling keeps which letters repeat.
    Now the letter counts of a sentence and of its coded form differ, and so does its pattern."""
    train = lines(data, "train_sentences.txt")[:200]
    labels = np.load(data.public_dir / "train_labels.npy")[:200]
    kept = same_counts = 0
    for sentence, label in zip(train, labels, strict=True):
        found = decode(build, sentence, definitions[int(label)], spec.seed, n_keys(spec, build))
        assert found is not None, sentence
        plain = found[1]
        letters_plain = [c for c in plain.lower() if c.isalpha()]
        letters_coded = [c for c in sentence.lower() if c.isalpha()]
        pattern = lambda s: [s.index(c) for c in s]  # noqa: E731
        kept += pattern(letters_plain) == pattern(letters_coded)
        same_counts += sorted(Counter(letters_plain).values()) == sorted(Counter(letters_coded).values())
    assert kept == 0 and same_counts < 0.05 * len(train)


def test_bag_has_the_same_sentences_with_shuffled_words(
    data: TaskData, bag: TaskData, build: Callable[..., np.ndarray], spec: TaskSpec, definitions: list[set[str]]
) -> None:
    """The same definitions and labels in the same order; the bag variant draws its sentence's key
    from its own 64, so it is read back word for word through those keys."""
    assert np.array_equal(data.answers(), bag.answers())
    assert (data.public_dir / "train_labels.npy").read_bytes() == (bag.public_dir / "train_labels.npy").read_bytes()
    module = build.__globals__
    bag_keys = module["keys_for"](spec.seed, n_keys(load_task(TASKS_DIR / "sentence_topics_bag"), build))
    train_labels = np.load(data.public_dir / "train_labels.npy")
    for name, ys in (("train_sentences.txt", train_labels), ("test_sentences.txt", data.answers())):
        ordered, shuffled = lines(data, name)[:100], lines(bag, name)[:100]
        for a, b, label in zip(ordered, shuffled, ys[:100], strict=True):
            found = decode(build, a, definitions[int(label)], spec.seed, n_keys(spec, build))
            assert found is not None, a
            words = sorted(found[1].split())
            assert any(sorted(module["unsubstitute"](b, k).split()) == words for k in bag_keys)
        assert np.mean([a.split() != b.split() for a, b in zip(ordered, shuffled, strict=True)]) > 0.95


def test_the_code_hides_the_words(data: TaskData) -> None:
    """The commonest English words appear in only a small share of the coded sentences, and the
    commonest coded word in not many more: each word has many spellings."""
    train = lines(data, "train_sentences.txt")
    for word in ("of", "the", "a"):
        assert np.mean([word in s.split() for s in train]) < 0.15
    words = Counter(w for s in train for w in set(s.lower().split()))
    assert words.most_common(1)[0][1] < 0.05 * len(train), words.most_common(3)


def test_neighbouring_test_answers_look_unrelated(data: TaskData) -> None:
    answers = data.answers()
    assert (answers[1:] == answers[:-1]).mean() < 0.3


def test_another_seed_writes_none_of_the_same_test_sentences(
    spec: TaskSpec, build: Callable[..., np.ndarray], data: TaskData, tmp_path: Path
) -> None:
    other = tmp_path / "other"
    other.mkdir()
    build(other, spec.seed + 1, **spec.params, n_train=80, n_test=80)
    theirs = (other / "test_sentences.txt").read_text(encoding="utf-8").splitlines()
    assert not set(theirs) & set(lines(data, "test_sentences.txt")[:80])


def test_missing_wordnet_raises_with_the_fix(
    build: Callable[..., np.ndarray], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("WEIRDML_WORDNET_DIR", str(empty))
    monkeypatch.setitem(build.__globals__, "WORDNET_SYSTEM_DIR", tmp_path / "no-such-dir")
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(DataUnavailable) as info:
        build(out, 0)
    assert "apt-get install wordnet-base" in str(info.value) and "WEIRDML_WORDNET_DIR" in str(info.value)
    assert not any(out.iterdir())
    monkeypatch.delenv("WEIRDML_WORDNET_DIR")
    with pytest.raises(DataUnavailable):
        build(out, 0, wordnet_dir=str(empty))
