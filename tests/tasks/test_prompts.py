"""The six published tasks' prompts: the facts the published prompts give, and no hint beyond them.

Each published task prompt gives the files, their shapes and dtypes, what a sample is, what to
predict, the label encoding, the output path and an example script; it gives no chance level,
no class shares, no key insight and no hint on how to solve the task (docs/protocol.md). Each
task below lists the facts its prompt must state and the hints that were removed from it, so a
hint creeping back fails here. The stated shapes and dtypes are checked against the built data.

The project's own tasks (OWN_FACTS, at the end) follow the same rule: each lists what its prompt
must state and the phrases that would give its hidden structure away.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pytest

from pytest_weirdml.extract import code_blocks
from pytest_weirdml.tasks import TaskData, load_task

TASKS_DIR = Path(__file__).resolve().parents[2] / "tasks"
SAVETXT = re.compile(r"np\.savetxt\((['\"])results/test_preds\.txt\1, preds, fmt=\1%d\1\)")
# "`train_data.npy`: float32 array of shape (1000, 512, 2)"
FILE_FACT = re.compile(r"`(\w+\.npy)`: (\w+) array of shape \(([\d, ]+)\)")


class Facts(NamedTuple):
    required: tuple[str, ...]  # phrases the prompt states (case-insensitive, whitespace-normalised)
    forbidden: tuple[str, ...]  # regexes of removed hints (case-insensitive)
    dummy: str  # how the example script draws its dummy predictions


# Hints no published task prompt gives: chance levels, class balance or shares, solution hints.
COMMON_FORBIDDEN = (
    r"\bchance\b",
    r"\bguess",
    r"balanced",
    r"\bshares?\b",
    r"\d+\s*% of (the )?(samples|games|images|test)",
    r"carries no information",
    r"usually helps",
    r"\bhint",
    r"key (idea|insight)",
    r"make use of",
)
SHAPES_FORBIDDEN = (
    r"order of the points",
    r"\bblobs?\b",
    r"\bclumps?\b",
    r"\bbands?\b",
    r"uniform background",
    r"jitter",
    r"scatter",
    r"\bdense\b",
    r"\bsparse\b",
    r"\bgaps?\b",
    r"200 of each",
    r"20\s*%",
    r"label\s*\|\s*shape",  # the old class-to-shape table
)
SHUFFLE_FORBIDDEN = (
    r"valid permutation",
    r"rebuilt",
    r"\bplacing\b",
    r"fashion",
    r"clothing",
    r"11\s*%",
    r"each position holds exactly one",
)
SHAPES_REQUIRED = (
    "512 points",
    "x and y coordinates",
    "outline of a shape",
    "the other points are noise",
    "exactly one shape",
    "circle, square, triangle, pentagon and star",
    "`train_data.npy`",
    "`train_flags.npy`",
    "`test_data.npy`",
    "0 circle, 1 square, 2 triangle, 3 pentagon, 4 star",
    "as large as the training set and drawn from the same distribution",
    "in the order of `test_data.npy`",
)
SHUFFLE_REQUIRED = (
    "3x3 grid of 9x9-pixel patches",
    "random order",
    "between 0 and 1",
    "permutation of the numbers 0 to 8",
    "i-th entry is the position where the i-th patch of the sample belongs",
    "left to right, then top to bottom",
    "[3, 1, 4, 2, 0, 5, 7, 6, 8]",
    "`train_data.npy`",
    "`train_labels.npy`",
    "`test_data.npy`",
    "shape (1000, 9)",
    "accuracy over the flattened predictions and labels",
)

FACTS = {
    "shapes_easy": Facts(
        (
            *SHAPES_REQUIRED,
            "all between 0 and 1",
            "centred at (0.5, 0.5)",
            "the same size and the same orientation",
            "where the points lie along the outline changes",
        ),
        SHAPES_FORBIDDEN,
        "np.random.randint(0, 5, size=len(test_data))",
    ),
    "shapes_hard": Facts(
        (
            *SHAPES_REQUIRED,
            "most coordinates lie between 0 and 1",
            "up to about 0.3 beyond it",
            "the size, the position and the orientation of the shape are random in every sample",
        ),
        (*SHAPES_FORBIDDEN, r"cut (off|away)", r"stick out", r"part inside", r"centred"),
        "np.random.randint(0, 5, size=len(test_data))",
    ),
    "digits_unsup": Facts(
        (
            "colour image of one digit",
            "background that changes",
            "15 pixels high and 7 pixels wide, with 3 colour channels",
            "integers from 0 to 255",
            "from 1 to 6",
            "15962 unlabelled images",
            "very unevenly spread",
            "only 26 training images carry a label",
            "500 images drawn from the same distribution as the unlabelled images",
            "relatively more of the rare digits",
            "`train_data_unlabeled.npy`",
            "`train_data_labeled.npy`",
            "`train_labels.npy`",
            "`test_data.npy`",
            "in the order of `test_data.npy`",
        ),
        (
            r"\bfonts?\b",
            r"typeface",
            r"hand",
            r"segment",
            r"bitmap",
            r"blocky",
            r"slant",
            r"stripes",
            r"gradients?",
            r"blotch",
            r"noise",
            r"\d+\s*%",
            r"few percent",
            r"evenly over",
        ),
        "np.random.randint(1, 7, size=len(test_data))",
    ),
    "shuffle_easy": Facts(
        (*SHUFFLE_REQUIRED, "grayscale image of 27x27 pixels", "same distribution"),
        SHUFFLE_FORBIDDEN,
        "np.array([np.random.permutation(9) for _ in range(len(test_data))])",
    ),
    "shuffle_hard": Facts(
        (
            *SHUFFLE_REQUIRED,
            "27x27-pixel square cut out of a 64x64 colour (RGB) image at a random position",
            # Our data differs from the published: a few photographs, some flipped, test from others.
            "views of a few colour photographs",
            "mirrored or turned",
            "test samples come from other photographs than the training samples",
        ),
        (*SHUFFLE_FORBIDDEN, r"same distribution", r"no border", r"no centred object"),
        "np.array([np.random.permutation(9) for _ in range(len(test_data))])",
    ),
    "chess_winners": Facts(
        (
            "simulated weak players",
            "not games of real people",
            "standard algebraic notation (san)",
            "a draw, a win for white or a win for black",
            "one line of text",
            "`1.e4 e5 3.Nf3 Nc6 5.Bb5 a6 ...`",
            "counts half-moves",
            "with probability 50%, the final single move (white's or black's) has been removed",
            "may appear as `1.e4 e5 3.Nf3 Nc6 5.Bb5`",
            "`train_games.txt`: 1000 training games, one per line",
            "`train_labels.npy`",
            "0 draw, 1 white wins, 2 black wins",
            "`test_games.txt`: 1000 test games in the same format and from the same distribution",
            "in the order of the lines of `test_games.txt`",
        ),
        (
            r"\brated\b",
            r"1300",
            r"\belo\b",
            r"amateur",
            r"checkmate",
            r"resign",
            r"clock",
            r"stalemate",
            r"repetition",
            r"fifty",
            r"agreement",
            r"decisive",
            r"draws are rare",
            r"more often",
            r"always answering",
            r"about 50%",
            r"2\.Nf3",  # full-move numbers: our data counts plies
        ),
        "np.random.randint(0, 3, size=len(test_games))",
    ),
}


def normalised(text: str) -> str:
    return " ".join(text.split()).lower()


def prose(prompt: str) -> str:
    """The prompt without its example script."""
    return re.sub(r"```python\n.*?```", "", prompt, flags=re.S)


@pytest.fixture(params=sorted(FACTS))
def task(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def test_the_six_published_tasks_are_covered() -> None:
    published = {"shapes_easy", "shapes_hard", "digits_unsup", "shuffle_easy", "shuffle_hard", "chess_winners"}
    assert set(FACTS) == published
    assert all((TASKS_DIR / name / "prompt.md").is_file() for name in published)


def test_prompt_states_the_published_facts(task: str) -> None:
    spec = load_task(TASKS_DIR / task)
    text = normalised(spec.prompt)
    missing = [fact for fact in FACTS[task].required if normalised(fact) not in text]
    assert not missing, f"{task}/prompt.md no longer states: {missing}"
    for name in spec.public_files:
        assert f"`{name}`" in spec.prompt, name
    # The output path and format, in the prose and in the script.
    assert "results/test_preds.txt" in prose(spec.prompt) and "fmt='%d'" in prose(spec.prompt)


def test_prompt_gives_no_hint_beyond_the_published_prompt(task: str) -> None:
    text = normalised(load_task(TASKS_DIR / task).prompt)
    found = [p for p in COMMON_FORBIDDEN + FACTS[task].forbidden if re.search(p, text, flags=re.I)]
    assert not found, f"{task}/prompt.md carries hints the published prompt does not give: {found}"


def test_example_script_has_the_published_structure(task: str) -> None:
    spec = load_task(TASKS_DIR / task)
    # One fenced block: the baseline model submits it, and no other block competes with it.
    assert spec.prompt.count("```") == 2 and spec.prompt.count("```python\n") == 1
    (script,) = code_blocks(spec.prompt)
    lines = script.splitlines()
    assert lines[:2] == ["import numpy as np", "import torch"]
    assert 'device = torch.device("cuda" if torch.cuda.is_available() else "cpu")' in lines
    for name in spec.public_files:
        assert f'"data/{name}"' in script, f"the example does not load {name}"
    assert FACTS[task].dummy in script
    # The int64 cast, then the save, as the last two lines.
    assert lines[-2] == "preds = preds.astype(np.int64)"
    assert SAVETXT.fullmatch(lines[-1])
    compile(script, f"{task}/prompt.md", "exec")


def test_stated_shapes_and_dtypes_are_those_of_the_data(task: str, built: Callable[[str], TaskData]) -> None:
    spec = load_task(TASKS_DIR / task)
    stated = FILE_FACT.findall(spec.prompt)
    npy = [name for name in spec.public_files if name.endswith(".npy")]
    assert sorted(name for name, _, _ in stated) == sorted(npy)
    data = built(task)
    for name, dtype, shape in stated:
        array = np.load(data.public_dir / name, mmap_mode="r")
        assert array.dtype == np.dtype(dtype), name
        assert array.shape == tuple(int(n) for n in shape.split(",") if n.strip()), name
    answers = data.answers()
    # The hidden test answers have the shape the prompt asks for.
    if task.startswith("shuffle"):
        assert answers.shape == (1000, 9)
    else:
        assert answers.ndim == 1 and f"{len(answers)}" in spec.prompt


# The project's own tasks: each prompt says what the data is and what to predict, and never the
# structure the task hides (what makes the label, how the data was disguised, how the test data
# differs, what tells the candidates apart). Each task lists phrases its prompt must state and
# patterns it must not contain; the titles are part of the prompt.
class OwnFacts(NamedTuple):
    required: tuple[str, ...]
    forbidden: tuple[str, ...]


SENTENCES_REQUIRED = (
    "an english sentence that defines a noun",
    "wordnet",
    "0 | animal",
    "7 | time",
    "has been encoded",
    "`data/train_sentences.txt`: 2000 lines of utf-8 text",
    "int64 array of shape (2000,)",
    "`data/test_sentences.txt`: 1000 lines",
    "in the order of the lines of `test_sentences.txt`",
)
SENTENCES_FORBIDDEN = (
    r"shift",
    r"caesar",
    r"rot-?13",
    r"rotat",
    r"alphabet",
    r"\bletters?\b",
    r"cipher",
    r"substitut",
    r"replaced",
    r"frequenc",
    r"\bcode\b",
    r"0 (to|\.\.) 25",
    r"\b26\b",
    r"wrap",
    r"(each|every|per) sentence (separately|of its own)",
    r"a (number|key) of its own",
    r"places (further|along)",
    r"capital",
)
OWN_FACTS = {
    "hidden_parity": OwnFacts(
        (
            "colour picture of 32 x 32 pixels",
            "one outlined shape, one short bar and a few small dots",
            "one of two classes, 0 and 1",
            "(2000, 32, 32, 3) | uint8",
            "(1000, 32, 32, 3) | uint8",
            "(2000,) | int64",
            "in the order of `data/test_data.npy`",
        ),
        (
            r"parit",
            r"\bxor\b",
            r"exclusive",
            r"\bodd\b",
            r"\beven\b",
            r"yes/no",
            r"propert",
            r"how many",
            r"number of (the )?dots",
            r"\bcount",
            r"\bwarm",
            r"\bcool",
            r"\brings?\b",
            r"\bcircles?\b",
            r"\bsquares?\b",
            r"\bhue",
            r"combination",
            r"hidden (bit|rule|parity|propert)",
            r"distractor",
            r"nothing to do with",
        ),
    ),
    "sentence_topics": OwnFacts(SENTENCES_REQUIRED, SENTENCES_FORBIDDEN),
    "sentence_topics_bag": OwnFacts(
        (*SENTENCES_REQUIRED, "put in a random order"),
        SENTENCES_FORBIDDEN,
    ),
    "digits_shift": OwnFacts(
        (
            "15 pixels high and 7 pixels wide",
            "one digit from 1 to 6",
            # Which of digit and background is lighter is a fair coin per picture in both sets.
            "and so does which of the two is lighter",
            "printed in a typeface, traced with pen-like strokes along a digit's path, or as blocky pixel characters",
            "0 typeface, 1 pen strokes, 2 pixel characters",
            "the test pictures differ in style from the training pictures",
            "(6000, 15, 7, 3) | uint8",
            "(1000, 15, 7, 3) | uint8",
            "in the order of `test_data.npy`",
        ),
        (
            r"segment",
            r"display",
            r"\blit\b",
            r"\bled\b",
            r"calculator",
            r"digital clock",
            r"\bhand",  # the pen-stroke digits are templates with jitter, not handwriting
            r"written",
            r"invert",
            r"\bnegative",
            r"dark ink",
            r"darker than its background",  # untrue of our data: the order is a coin in both sets
            r"scratch",
            r"\blines?\b",
            r"clutter",
            r"occlu",
            r"rotat",
            r"bolder|thinner|hairline",
            r"unequal|imbalanc|uneven|frequen",
            r"7 ?x ?3|\bsevens?\b",
        ),
    ),
    "patch_match": OwnFacts(
        (
            "28x28 pixels",
            "an 8x8 square has been cut out and set to 0",
            "5 candidate 8x8 patches",
            "exactly one candidate is the square that was cut out of this picture",
            "float32 array of shape (2000, 28, 28)",
            "int64 array of shape (2000, 2)",
            "float32 array of shape (2000, 5, 8, 8)",
            "the index (0 to 4) of the candidate",
        ),
        (
            r"same place",
            r"same (position|spot|location)",
            r"same (kind|class|category|type)",
            r"similar",
            r"nearest",
            r"neighbou?r",
            r"look(s)? alike",
            r"\bseams?\b",
            r"\bedges?\b",
            r"continu",
            r"surround",
            r"brightness",
            r"texture",
            r"\bgain\b",
            r"scaled",
            r"noise",
            r"\bpool\b",
            r"lightly",
            r"rotat",
            r"\bturn",
            r"(pixel|hidden) order",
            r"order of (the|its) pixels",
            r"permut",
            r"scrambl",
            r"shuffl",
            r"rearrang",
            r"\bmoved\b",
            r"flip",
            r"mirror",
            r"orient",
            r"symmetr",
            r"transpos",
            r"reflect",
        ),
    ),
    "sequence_rules": OwnFacts(
        (
            "a sequence of 12 distinct positive integers, in increasing order",
            "one of 8 rules",
            "Not every term of a sequence comes from the rule of its label",
            "(1600, 12) | int64",
            "(1000, 12) | int64",
            "in the order of `data/test_data.npy`",
        ),
        (
            r"random walk",
            r"periodic",
            r"repeat",
            r"quadratic",
            r"geometric",
            r"residue",
            r"remainder",
            r"modul",
            r"\bprimes?\b",
            r"digit ?sum",
            r"sum of (the|its) digits",
            r"differences?",
            r"\bratios?\b",
            r"arithmetic",
            r"carries no meaning",
            r"interleav",
            r"merg",
            r"union",
            r"\bruns?\b",
            r"subsets?",
            r"subsequences?",
            r"distract",
            r"smallest",
            r"first term",
            r"sorted",
            r"last digit",
            r"\bsteps?\b",
            r"cycl",
        ),
    ),
    "shapes_crowd": OwnFacts(
        (
            "cloud of points in the plane",
            "one, two or three shapes",
            "circle, square, triangle, pentagon and star",
            "float32 array of shape (p, 2)",
            "int64 array of shape (2000, 5)",
            "the accuracy over all 5000 entries",
        ),
        (
            *SHAPES_FORBIDDEN[:1],
            r"\bclumps?\b",
            r"\bdense\b",
            r"\bsparse\b",
            r"\bgaps?\b",
            r"jitter",
            r"30\s*%",
            # Data version 2 hides which points are the outlines' in the order they are written.
            r"order of (the |its )?points",
            r"(random|any|no particular|arbitrary) order",
            r"points? (are|is) (stored |written |listed )?in (an? )?order",
            r"\bshuffl",
            r"sequen",
            r"consecutive",
            r"\btraced?\b",
            r"along the outline in",
            r"\bruns?\b",
            r"\bchain",
            r"neighbou?r",
            r"\bwritten\b",
            r"next point",
            r"\bin turn\b",
            r"\bpath",
            r"\bstrokes?\b",
        ),
    ),
    "splash_rules": OwnFacts(
        (
            "64 by 64 pixels",
            "one splash of paint on paper",
            "one of four rules, numbered 0 to 3",
            "uint8 array of shape (2000, 64, 64, 3)",
            "int64 array of shape (2000,)",
        ),
        (
            r"symmetr",
            r"mirror",
            r"fold",
            r"flick",
            r"spinner",
            r"half a turn",
            r"third of a turn",
            r"rotation",
            r"opposite",
            r"copies",
            r"\bpairs?\b",
            r"\bangles?\b",
            r"direction",
        ),
    ),
    "chess_blunders": OwnFacts(
        (
            "a position from a chess game between simulated weak players",
            "stockfish 15.1 searching to depth 8",
            "at least 200 centipawns",
            "`train_positions.csv`: 1000 rows",
            "int64 array, shape `(1000,)`",
            "`test_positions.csv`: 1000 more rows",
            "the squares are not listed in any standard order",
            "castling rights, the en-passant square and the move counters are not in the files",
        ),
        (
            r"half the time",
            r"random legal move",
            r"uniformly",
            r"depth 4",
            r"hang",
            r"\bcaptur",
            r"material",
            r"\b0\.65\b",
            r"recover",
            r"permut",
            r"shuffl",
            r"scrambl",
            r"mirror",
            r"geometr",
            r"\bfen\b",
        ),
    ),
}
# The easy twins: earlier data versions, played blind with these very prompts.
OWN_FACTS["patch_match_easy"] = OWN_FACTS["patch_match"]
OWN_FACTS["sequence_rules_easy"] = OwnFacts(
    (
        "a sequence of 12 integers",
        "one of 8 rules",
        "some sequences carry a little noise",
        "(1600, 12) | int64",
        "(1000, 12) | int64",
        "in the order of `data/test_data.npy`",
    ),
    (
        r"random walk",
        r"periodic",
        r"repeat",
        r"quadratic",
        r"geometric",
        r"residue",
        r"remainder",
        r"modul",
        r"\bprimes?\b",
        r"digit ?sum",
        r"sum of (the|its) digits",
        r"differences?",
        r"\bratios?\b",
        r"arithmetic",
        r"carries no meaning",
        r"\bsteps?\b",
        r"(up|down)wards",
        r"direction",
    ),
)


@pytest.fixture(params=sorted(OWN_FACTS))
def own_task(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def test_every_own_task_is_covered() -> None:
    all_tasks = {p.parent.name for p in TASKS_DIR.glob("*/task.toml")}
    assert set(OWN_FACTS) == all_tasks - set(FACTS)


def test_own_prompt_says_what_the_data_is(own_task: str) -> None:
    spec = load_task(TASKS_DIR / own_task)
    text = normalised(spec.prompt)
    missing = [fact for fact in OWN_FACTS[own_task].required if normalised(fact) not in text]
    assert not missing, f"{own_task}/prompt.md no longer states: {missing}"
    for name in spec.public_files:
        assert f"`{name}`" in spec.prompt or f"`data/{name}`" in spec.prompt, name
    assert "np.savetxt('results/test_preds.txt', preds, fmt='%d')" in prose(spec.prompt)


def test_own_prompt_hides_the_structure(own_task: str) -> None:
    text = normalised(load_task(TASKS_DIR / own_task).prompt)
    patterns = COMMON_FORBIDDEN + OWN_FACTS[own_task].forbidden
    found = [p for p in patterns if re.search(p, text, flags=re.I)]
    assert not found, f"{own_task}/prompt.md gives away what the task hides: {found}"


def test_own_example_script_loads_every_file_and_saves_int_predictions(own_task: str) -> None:
    spec = load_task(TASKS_DIR / own_task)
    assert spec.prompt.count("```") == 2 and spec.prompt.count("```python\n") == 1
    (script,) = code_blocks(spec.prompt)
    for name in spec.public_files:
        assert f"data/{name}" in script, f"the example does not load {name}"
    lines = script.strip().splitlines()
    assert "preds = preds.astype(np.int64)" in lines
    assert SAVETXT.fullmatch(lines[-1])
    compile(script, f"{own_task}/prompt.md", "exec")
