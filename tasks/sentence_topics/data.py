"""Dictionary definitions from WordNet, labelled by the kind of thing they define, each in one of
many spellings of the alphabet.

One builder serves both sentence tasks: ``build(out, seed, n_keys=192)`` for sentence_topics (the
definitions as written) and ``build(out, seed, shuffle_words=True)`` for sentence_topics_bag (for the
same seed, the same definitions in the same order, written with 64 keys, with their words in random
order, so only a bag of words remains).

Source: the noun definitions of WordNet 3.0 (Debian's ``wordnet-base``). Every noun synset sits in
one lexicographer file (``noun.animal``, ``noun.food``, ...); that file is the label, so the labels
are the lexicographers' own. Usage examples (the quoted parts of a gloss) are dropped: they often
show the word in a sentence about something else. A definition that occurs in more than one
category is dropped too, and every definition is used at most once per data set.

Each seed draws a new balanced sample of definitions and a new train/test split. Every sentence is
then written with one of ``n_keys`` keys (64 by default), drawn per sentence; a key is three random
orderings of the 26 letters, and letter j of every word (a run of letters) is written in the key's
alphabet j % 3 (case kept; spaces, digits and punctuation left as they are). Data version 2 used one
alphabet per key, and a strong model broke each sentence's (or small group's) spelling by English
statistics and hill climbing, since one alphabet keeps a sentence's repeated letters and letter
counts. Now a sentence of ~60 letters gives each of its three alphabets ~20 letters, and keeps
neither. A word is still spelt the same wherever one key writes it, so the ~47 sentences that share
a key share their words, which a learner can find, group, and line up with each other, alphabet by
alphabet, across many sentences (the reference does).

Data version 4 of sentence_topics gives it 192 keys (about 16 sentences a key instead of 47): a
strong model that pooled each key's sentences and lined the keys up (data version 3's blind run)
had ~47 sentences per key to do it with; with 16 its own scripts fall to about 0.54 while the
reference, which lines the keys up three times over different groupings and votes, stays above
0.85. The bag variant keeps 64 keys (its blind run meets its targets).
"""

from __future__ import annotations

import os
import string
from pathlib import Path

import numpy as np

from pytest_weirdml.errors import DataUnavailable

N_TRAIN = 2000
N_TEST = 1000
# (label name, WordNet lexicographer file number); the label is the index in this tuple.
CATEGORIES = (
    ("animal", 5),
    ("body", 8),
    ("food", 13),
    ("location", 15),
    ("person", 18),
    ("plant", 20),
    ("quantity", 23),
    ("time", 28),
)
N_KEYS = 64  # spellings per seed unless the task's params say (n_keys); one drawn per sentence
PERIOD = 3  # alphabets per key, taking turns along every word
ALPHABETS_STREAM = 1  # entropy word that keeps the alphabets' stream apart from the sample's
MIN_WORDS = 5  # shorter definitions ("a genus of Sciaenidae") say too little
MAX_CHARS = 300

WORDNET_ENV = "WEIRDML_WORDNET_DIR"
# Module constant so tests can point the system lookup at an empty directory.
WORDNET_SYSTEM_DIR = Path("/usr/share/wordnet")
NOUN_FILE = "data.noun"

LOWER, UPPER = string.ascii_lowercase, string.ascii_uppercase


def _wordnet_file(system_dir: Path) -> Path:
    candidates = [Path(os.environ[WORDNET_ENV])] if os.environ.get(WORDNET_ENV) else []
    candidates.append(system_dir)
    for candidate in candidates:
        if (candidate / NOUN_FILE).is_file():
            return candidate / NOUN_FILE
    looked = ", ".join(str(c) for c in candidates)
    raise DataUnavailable(
        f"WordNet's {NOUN_FILE} not found (looked in {looked}). Install the Debian package: "
        f"'sudo apt-get install wordnet-base' (puts it in {WORDNET_SYSTEM_DIR}), or set {WORDNET_ENV} to a "
        f"directory holding WordNet 3.0's {NOUN_FILE}."
    )


def _definition(gloss: str) -> str:
    """The gloss without its quoted usage examples."""
    parts = [p.strip() for p in gloss.split(";")]
    return "; ".join(p for p in parts if p and not p.startswith('"')).strip()


def read_definitions(path: Path) -> dict[int, list[str]]:
    """Definitions per lexicographer file number, sorted, each unique across the categories."""
    wanted = {lexfile for _, lexfile in CATEGORIES}
    found: dict[str, set[int]] = {}
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            if line.startswith("  "):  # the licence header
                continue
            head, sep, gloss = line.partition(" | ")
            fields = head.split(" ")
            if not sep or len(fields) < 3 or not fields[1].isdigit():
                raise DataUnavailable(f"{path} does not look like WordNet's {NOUN_FILE} (line {line[:60]!r})")
            lexfile = int(fields[1])
            if lexfile not in wanted:
                continue
            text = " ".join(_definition(gloss).split())
            if len(text.split()) >= MIN_WORDS and len(text) <= MAX_CHARS:
                found.setdefault(text, set()).add(lexfile)
    by_category: dict[int, list[str]] = {lexfile: [] for lexfile in wanted}
    for text, lexfiles in found.items():
        if len(lexfiles) == 1:
            by_category[next(iter(lexfiles))].append(text)
    return {lexfile: sorted(texts) for lexfile, texts in by_category.items()}


def make_keys(rng: np.random.Generator, n: int = N_KEYS, period: int = PERIOD) -> list[tuple[str, ...]]:
    """``n`` keys of ``period`` random orderings of the 26 letters each: alphabet ``a`` writes letter i as ``a[i]``."""
    return [tuple("".join(LOWER[i] for i in rng.permutation(26)) for _ in range(period)) for _ in range(n)]


def keys_for(seed: int, n: int = N_KEYS) -> list[tuple[str, ...]]:
    """The ``n`` keys of a data seed (from a stream of their own, so the sample does not move them;
    the first keys of a longer list are those of a shorter one)."""
    return make_keys(np.random.default_rng(np.random.SeedSequence([seed, ALPHABETS_STREAM])), n)


def substitute(text: str, key: tuple[str, ...]) -> str:
    """Write ``text`` with ``key``: the j-th letter of every word (a run of letters, counted from 0) in
    alphabet ``key[j % len(key)]``, case kept; everything that is not a letter stays as it is."""
    out, j = [], 0
    for ch in text:
        low = ch.lower()
        i = LOWER.find(low) if ch.isascii() else -1
        if i < 0:
            out.append(ch)
            j = 0
            continue
        coded = key[j % len(key)][i]
        out.append(coded.upper() if ch != low else coded)
        j += 1
    return "".join(out)


def unsubstitute(text: str, key: tuple[str, ...]) -> str:
    """The inverse of ``substitute``."""
    inverse = tuple("".join(LOWER[a.index(c)] for c in LOWER) for a in key)
    return substitute(text, inverse)


def _encode(
    texts: list[str],
    rng: np.random.Generator,
    words_rng: np.random.Generator | None,
    keys: list[tuple[str, ...]] | None,
) -> tuple[list[str], np.ndarray]:
    """Each text in one of ``keys``, drawn at random; its words shuffled first when ``words_rng`` is given.

    Returns the texts and the index of each one's key (-1 throughout without ``keys``).
    """
    out, used = [], []
    for text in texts:
        which = int(rng.integers(len(keys))) if keys else -1
        if words_rng is not None:
            words = text.split()
            text = " ".join(words[i] for i in words_rng.permutation(len(words)))
        out.append(substitute(text, keys[which]) if keys else text)
        used.append(which)
    return out, np.asarray(used, dtype=np.int64)


def _write_lines(path: Path, lines: list[str]) -> None:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def build(
    out: Path,
    seed: int,
    *,
    shuffle_words: bool = False,
    letter_code: bool = True,
    n_keys: int = N_KEYS,
    n_train: int = N_TRAIN,
    n_test: int = N_TEST,
    wordnet_dir: str | None = None,
) -> np.ndarray:
    """Write train_sentences.txt, train_labels.npy and test_sentences.txt; return the test labels.

    ``letter_code=False`` leaves the sentences as written (for calibration: what the code costs).
    """
    k = len(CATEGORIES)
    if n_train % k or n_test % k:
        raise ValueError(f"n_train and n_test must be multiples of {k} (balanced classes)")
    definitions = read_definitions(_wordnet_file(Path(wordnet_dir) if wordnet_dir else WORDNET_SYSTEM_DIR))
    # Both variants draw the same sentences, order, keys and choice of key for a seed; the
    # bag variant's word order comes from a stream of its own.
    pick_seq, train_seq, test_seq, words_seq = np.random.SeedSequence(seed).spawn(4)
    pick = np.random.default_rng(pick_seq)
    keys = keys_for(seed, n_keys) if letter_code else None
    words_rng = np.random.default_rng(words_seq) if shuffle_words else None
    splits: dict[str, tuple[list[str], list[int]]] = {"train": ([], []), "test": ([], [])}
    for label, (name, lexfile) in enumerate(CATEGORIES):
        pool = definitions[lexfile]
        need = (n_train + n_test) // k
        if len(pool) < need:
            raise DataUnavailable(f"only {len(pool)} WordNet definitions of noun.{name}; is {NOUN_FILE} complete?")
        chosen = [pool[i] for i in pick.choice(len(pool), size=need, replace=False)]
        for split, part in (("train", chosen[: n_train // k]), ("test", chosen[n_train // k :])):
            splits[split][0].extend(part)
            splits[split][1].extend([label] * len(part))
    labels = {}
    for split, seq in (("train", train_seq), ("test", test_seq)):
        rng = np.random.default_rng(seq)
        texts, ys = splits[split]
        order = rng.permutation(len(texts))
        coded, _ = _encode([texts[i] for i in order], rng, words_rng, keys)
        _write_lines(out / f"{split}_sentences.txt", coded)
        labels[split] = np.asarray(ys, dtype=np.int64)[order]
    np.save(out / "train_labels.npy", labels["train"], allow_pickle=False)
    return labels["test"]
