"""Calibration of sentence_topics (and, with --bag, sentence_topics_bag) on one data seed.

    python tasks/sentence_topics/calibrate.py [--seed N] [--bag] [--reference] [--plain]

Builds the data for the seed into a temporary directory and prints the accuracy of:
- chance: the majority class share of the test answers;
- first try, char CNN: a convolutional network over the raw characters of each sentence, trained
  for a fixed number of epochs (what a generalist writes for text without a pretrained model);
- first try, TF-IDF: word and character n-grams of the coded text with a linear SVM (the usual
  first pipeline for small text data);
- with --reference, the task's reference.py run on the data as the sandbox runs it;
- with --plain, all of these on the same sentences without the letter code (what the code costs).
A fixed amount of work (epochs), not a time budget, so the figures do not depend on the load.
``GENERIC_LEARNERS`` gives both first tries to ``weirdml check-task`` as functions of the built
public files and a work factor that scales the CNN's epochs and the SVM's solver iterations.
"""

from __future__ import annotations

import argparse
import importlib.util
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from scipy.sparse import hstack
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.svm import LinearSVC

HERE = Path(__file__).resolve().parent
MAX_LEN = 200  # characters kept per sentence (nearly all are shorter)
Texts = tuple[list[str], np.ndarray, list[str]]


def scaled(amount: int, work: float) -> int:
    """A learner's fixed amount of work (epochs, solver iterations) times ``work``, at least 1."""
    return max(1, round(amount * work))


def load_builder():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("sentence_topics_data", HERE / "data.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.build


def read_public(public: Path) -> Texts:
    """The training sentences, their labels and the test sentences of a directory of public files."""
    train = (public / "train_sentences.txt").read_text(encoding="utf-8").splitlines()
    test = (public / "test_sentences.txt").read_text(encoding="utf-8").splitlines()
    return train, np.load(public / "train_labels.npy"), test


def char_cnn(train: list[str], labels: np.ndarray, test: list[str], work: float = 1.0) -> np.ndarray:
    def encode(texts: list[str]) -> torch.Tensor:
        out = np.zeros((len(texts), MAX_LEN), dtype=np.int64)
        for i, t in enumerate(texts):
            raw = np.frombuffer(t.encode("utf-8")[:MAX_LEN], dtype=np.uint8)
            out[i, : len(raw)] = raw.astype(np.int64) + 1  # 0 is padding
        return torch.from_numpy(out)

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(257, 32, padding_idx=0)
            self.conv1 = nn.Conv1d(32, 64, 5, padding=2)
            self.conv2 = nn.Conv1d(64, 64, 5, padding=2)
            self.head = nn.Sequential(nn.Dropout(0.5), nn.Linear(64, int(labels.max()) + 1))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            h = self.embed(x).transpose(1, 2)
            h = F.max_pool1d(F.relu(self.conv1(h)), 2)
            h = F.relu(self.conv2(h))
            return self.head(h.amax(dim=2))

    torch.manual_seed(0)
    x, y, xt = encode(train), torch.from_numpy(labels), encode(test)
    net = Net()
    opt = torch.optim.AdamW(net.parameters(), lr=2e-3, weight_decay=1e-2)
    for _ in range(scaled(15, work)):
        net.train()
        for idx in torch.randperm(len(x)).split(64):
            loss = F.cross_entropy(net(x[idx]), y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
    net.eval()
    with torch.no_grad():
        return net(xt).argmax(dim=1).numpy()


def tfidf_svm(train: list[str], labels: np.ndarray, test: list[str], work: float = 1.0) -> np.ndarray:
    """Word and character n-grams, a linear SVM; ``work`` scales the solver's iteration cap (1000 at
    1.0, scikit-learn's default), so once the solver converges more work changes nothing."""
    word = TfidfVectorizer(sublinear_tf=True, ngram_range=(1, 2))
    char = TfidfVectorizer(sublinear_tf=True, analyzer="char_wb", ngram_range=(2, 5), min_df=2)
    x = hstack([word.fit_transform(train), char.fit_transform(train)]).tocsr()
    xt = hstack([word.transform(test), char.transform(test)]).tocsr()
    return LinearSVC(C=1.0, max_iter=scaled(1000, work)).fit(x, labels).predict(xt)


def _generic(
    learner: Callable[[list[str], np.ndarray, list[str], float], np.ndarray],
) -> Callable[[Path, float], np.ndarray]:
    def run(public: Path, work: float) -> np.ndarray:
        with warnings.catch_warnings():
            # Work is capped on purpose (the checker turns it): not converging is expected.
            warnings.filterwarnings("ignore", message=".*(converge|iterations).*")
            return learner(*read_public(public), work)

    return run


# For ``weirdml check-task``: name -> (public directory, work factor) -> test predictions.
GENERIC_LEARNERS: dict[str, Callable[[Path, float], np.ndarray]] = {
    "char_cnn": _generic(char_cnn),
    "tfidf_svm": _generic(tfidf_svm),
}


def run_reference(public: Path, answers: np.ndarray, script: Path) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        shutil.copytree(public, work / "data")
        (work / "results").mkdir()
        shutil.copy(script, work / "solution.py")
        subprocess.run([sys.executable, "solution.py"], cwd=work, timeout=120, check=True, capture_output=True)
        preds = np.loadtxt(work / "results" / "test_preds.txt", dtype=np.int64)
    return float(np.mean(preds == answers))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--bag", action="store_true", help="sentence_topics_bag (words shuffled)")
    parser.add_argument("--reference", action="store_true", help="also run the task's reference.py")
    parser.add_argument("--quick", action="store_true", help="skip the char CNN (minutes on a loaded CPU)")
    parser.add_argument("--plain", action="store_true", help="build the sentences without the letter code")
    args = parser.parse_args()
    torch.set_num_threads(2)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        start = time.perf_counter()
        answers = load_builder()(out, args.seed, shuffle_words=args.bag, letter_code=not args.plain)
        label = f"seed {args.seed}{' bag' if args.bag else ''}{' plain' if args.plain else ''}"
        print(f"{label}: built in {time.perf_counter() - start:.2f} s")
        train, labels, test = read_public(out)
        print(f"chance (majority share): {np.bincount(answers).max() / len(answers):.3f}")
        learners = [("first try, TF-IDF + linear SVM", tfidf_svm), ("first try, char CNN", char_cnn)]
        for name, learner in learners[:1] if args.quick else learners:
            start = time.perf_counter()
            acc = float(np.mean(learner(train, labels, test) == answers))
            print(f"{name}: {acc:.3f} ({time.perf_counter() - start:.0f} s)")
        if args.reference:
            task = "sentence_topics_bag" if args.bag else "sentence_topics"
            acc = run_reference(out, answers, HERE.parent / task / "reference.py")
            print(f"reference: {acc:.3f}")


if __name__ == "__main__":
    main()
