"""sentence_topics reference: group the sentences by their spelling, line the spellings up, then n-grams.

Every sentence is written in one of 64 spellings of the alphabet (the generator's constant), each a
random ordering of the letters; which one a sentence uses is drawn at random. No single sentence is
long enough to read its spelling off, but the ~47 sentences that share a spelling share its words
too ("of", "a", "the" come out the same in all of them), so:

1. Group: spectral clustering of the sentences on the cosine similarity of their word TF-IDF
   vectors (words are only shared within a spelling, bar chance collisions), into 96 groups, more
   than there are spellings, so that no group holds two.
2. Line up: every group's letter-pair counts (with a word-boundary symbol) are mapped onto one
   common spelling by a permutation of the 26 letters, chosen by hill climbing on the log-likelihood
   of the group's pairs under the pooled pairs of all the other groups, started from the letter
   frequency ranks; groups that end far below the others restart at random.
3. Reassign: each sentence goes to the group whose permutation makes its pairs likeliest, and steps
   2 and 3 repeat until no sentence moves.
4. Classify: once every sentence reads in the common spelling (a fixed relabelling of English,
   which a classifier does not mind), TF-IDF word 1-2-grams and character 2-5-grams with a linear
   support vector machine, its C chosen on a held-out fifth. The script is the same for
   sentence_topics_bag, whose words are in random order: the letter pairs live inside the words.
"""

from __future__ import annotations

import os
import string
import time

import numpy as np
from scipy.sparse import hstack
from sklearn.cluster import SpectralClustering
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.svm import LinearSVC

START = time.time()
SPELLINGS = 64  # the generator's number of spellings
# More groups than spellings: a spelling split over two groups is lined up twice and does no harm,
# two spellings in one group cannot be lined up at all.
GROUPS = 96
SYMBOLS = 27  # 26 letters and "anything else" (space, digit, punctuation)
LOWER = string.ascii_lowercase


def read(name: str) -> list[str]:
    with open(f"data/{name}", encoding="utf-8") as fh:
        return fh.read().splitlines()


def pair_counts(text: str) -> np.ndarray:
    """Counts of consecutive symbol pairs, flattened (27 * 27); runs of non-letters count once."""
    c = np.frombuffer(text.lower().encode("ascii", "replace"), dtype=np.uint8).astype(np.int64) - 97
    c = np.concatenate([[26], np.where((c >= 0) & (c < 26), c, 26), [26]])
    counts = np.bincount(c[:-1] * SYMBOLS + c[1:], minlength=SYMBOLS * SYMBOLS)
    counts[-1] = 0
    return counts


def mapped(counts: np.ndarray, perm: np.ndarray) -> np.ndarray:
    """Pair counts (27, 27) with letter a read as perm[a]."""
    q = np.append(perm, 26)
    out = np.zeros((SYMBOLS, SYMBOLS))
    out[np.ix_(q, q)] = counts
    return out


def log_model(counts: np.ndarray) -> np.ndarray:
    counts = counts + 0.5
    return np.log(counts / counts.sum(axis=1, keepdims=True))


def climb(counts: np.ndarray, model: np.ndarray, perm: np.ndarray) -> tuple[np.ndarray, float]:
    """Swap letter pairs while the log-likelihood of ``counts`` read through ``perm`` rises."""
    perm = perm.copy()

    def score() -> float:
        q = np.append(perm, 26)
        return float((counts * model[np.ix_(q, q)]).sum())

    best, improved = score(), True
    while improved:
        improved = False
        for i in range(26):
            for j in range(i + 1, 26):
                perm[[i, j]] = perm[[j, i]]
                s = score()
                if s > best + 1e-9:
                    best, improved = s, True
                else:
                    perm[[i, j]] = perm[[j, i]]
    return perm, best


def rank_start(counts: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """The permutation that matches letters by frequency rank."""
    perm = np.empty(26, dtype=np.int64)
    perm[np.argsort(-counts[:26].sum(axis=1))] = np.argsort(-reference[:26].sum(axis=1))
    return perm


def align(groups: list[np.ndarray], perms: list[np.ndarray] | None, rng: np.random.Generator) -> list[np.ndarray]:
    """One pass over the groups: each one's permutation against the pooled pairs of the others."""
    if perms is None:  # first pass: line the groups up one by one, largest first
        order = sorted(range(len(groups)), key=lambda k: -groups[k].sum())
        perms = [np.arange(26)] * len(groups)
        pool = groups[order[0]].copy()
        for k in order[1:]:
            perms[k], _ = climb(groups[k], log_model(pool), rank_start(groups[k], pool))
            pool += mapped(groups[k], perms[k])
        return perms
    aligned = [mapped(g, p) for g, p in zip(groups, perms, strict=True)]
    pool = np.sum(aligned, axis=0)
    per_pair = np.zeros(len(groups))
    for k, g in enumerate(groups):
        if not g.any():  # a group every sentence has left
            per_pair[k] = np.nan
            continue
        others = pool - aligned[k]
        tries = [climb(g, log_model(others), start) for start in (perms[k], rank_start(g, others))]
        perms[k], best = max(tries, key=lambda t: t[1])
        per_pair[k] = best / g.sum()
        aligned[k] = mapped(g, perms[k])
        pool = others + aligned[k]
    median = np.nanmedian(per_pair)
    spread = np.nanmedian(np.abs(per_pair - median)) + 1e-9
    for k in np.flatnonzero(per_pair < median - 4 * spread):  # stuck: restart at random
        others = pool - aligned[k]
        tries = [climb(groups[k], log_model(others), rng.permutation(26)) for _ in range(4)]
        perm, best = max(tries, key=lambda t: t[1])
        if best / groups[k].sum() > per_pair[k]:
            perms[k] = perm
    return perms


def unify(texts: list[str]) -> list[str]:
    """Every text rewritten in one common spelling."""
    pairs = np.stack([pair_counts(t) for t in texts]).astype(np.float64)
    words = TfidfVectorizer(sublinear_tf=True, token_pattern=r"[A-Za-z]+", min_df=2).fit_transform(texts)
    affinity = (words @ words.T).toarray() + 1e-4
    assign = SpectralClustering(GROUPS, affinity="precomputed", random_state=0, assign_labels="cluster_qr").fit_predict(
        affinity
    )
    print(f"grouped {len(texts)} sentences into {GROUPS} ({time.time() - START:.1f}s)")
    perms, rng = None, np.random.default_rng(0)
    for rounds in range(6):
        groups = [pairs[assign == k].sum(axis=0).reshape(SYMBOLS, SYMBOLS) for k in range(GROUPS)]
        perms = align(groups, perms, rng)
        pool = np.sum([mapped(g, p) for g, p in zip(groups, perms, strict=True)], axis=0)
        model = log_model(pool).ravel()
        index = [np.append(p, 26) for p in perms]
        through = np.stack([model[(q[:, None] * SYMBOLS + q[None, :]).ravel()] for q in index])
        new = (pairs @ through.T).argmax(axis=1)
        moved = int((new != assign).sum())
        assign = new
        print(f"round {rounds}: {moved} sentences moved group ({time.time() - START:.1f}s)")
        if rounds > 0 and (moved <= len(texts) // 100 or time.time() - START > 60):
            break  # a few sentences between two groups of one spelling change nothing
    assert perms is not None
    spelt = ["".join(LOWER[i] for i in p) for p in perms]
    tables = [str.maketrans(LOWER + LOWER.upper(), a + a.upper()) for a in spelt]
    return [t.translate(tables[k]) for t, k in zip(texts, assign, strict=True)]


def classify(train: list[str], labels: np.ndarray, test: list[str]) -> np.ndarray:
    # Features fitted on all sentences (no labels used), so test words get their document frequency.
    word = TfidfVectorizer(sublinear_tf=True, ngram_range=(1, 2))
    char = TfidfVectorizer(sublinear_tf=True, analyzer="char_wb", ngram_range=(2, 5), min_df=2)
    features = hstack([word.fit_transform(train + test), char.fit_transform(train + test)]).tocsr()
    x_train, x_test = features[: len(train)], features[len(train) :]
    # A held-out fifth chooses the regularisation; the final model is refitted on every labelled sentence.
    perm = np.random.default_rng(0).permutation(len(train))
    val, fit = perm[: len(train) // 5], perm[len(train) // 5 :]
    scores = {}
    for c in (0.1, 0.3, 1.0, 3.0):
        scores[c] = float((LinearSVC(C=c).fit(x_train[fit], labels[fit]).predict(x_train[val]) == labels[val]).mean())
        print(f"C={c:g}: held-out accuracy {scores[c]:.3f} ({time.time() - START:.1f}s)")
    best = max(scores, key=lambda c: scores[c])
    return LinearSVC(C=best).fit(x_train, labels).predict(x_test).astype(np.int64)


def main() -> None:
    train, test = read("train_sentences.txt"), read("test_sentences.txt")
    labels = np.load("data/train_labels.npy").astype(np.int64)
    print(f"train {len(train)} sentences, test {len(test)}, classes {np.bincount(labels).tolist()}")
    unified = unify(train + test)
    print("in the common spelling:", unified[:2])
    preds = classify(unified[: len(train)], labels, unified[len(train) :])
    os.makedirs("results", exist_ok=True)
    np.savetxt("results/test_preds.txt", preds, fmt="%d")
    print(f"wrote {len(preds)} predictions {np.bincount(preds).tolist()} ({time.time() - START:.1f}s)")


if __name__ == "__main__":
    main()
