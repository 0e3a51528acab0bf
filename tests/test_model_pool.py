"""Model clients are built once per model and process, however many items a session has."""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

import pytest
from helpers import GOOD_SCRIPT, read_iterations, session_dir, write_replay, write_tiny_task

sys.path.insert(0, str(Path(__file__).parent))
from providers_server import FakeProvider

# Counts every client built, by model class and process, whoever builds it (the plugin's pool,
# the gate, a fixture), by wrapping the classes' own constructors.
COUNTING = """
import json, os
from pathlib import Path
from pytest_weirdml.models.offline import ReplayModel
from pytest_weirdml.models.openai import OpenAICompatibleModel

BUILT = Path(__file__).parent / "built.jsonl"

def counted(cls):
    real = cls.__init__
    def init(self, *args, **kwargs):
        real(self, *args, **kwargs)
        with open(BUILT, "a") as fh:
            fh.write(json.dumps({"class": cls.__name__, "pid": os.getpid()}) + "\\n")
    cls.__init__ = init

counted(ReplayModel)
counted(OpenAICompatibleModel)
"""

TASKS = 15
RUNS = 5


def test_a_session_of_15_tasks_by_5_runs_builds_one_client_per_model_and_process(
    pytester: pytest.Pytester, base_args: list[str]
) -> None:
    pytest.importorskip("openai", reason="the openai SDK is not installed: pip install 'pytest-weirdml[openai]'")
    for i in range(TASKS):
        write_tiny_task(pytester.path, f"task{i:02d}", iterations=1)
    pytester.makeconftest(COUNTING)
    # Answers without a script: the items cost a model call each and no sandbox run.
    replay = write_replay(pytester.path / "answers.json", [""])
    with FakeProvider("openai", lambda conversation: "no script this time") as server:
        server.models = [{"id": "tiny-llm", "max_model_len": 40960}]
        result = pytester.runpytest_subprocess(
            "-n",
            "2",
            "--weirdml-model=openai-compatible:tiny-llm,replay:answers.json",
            f"--weirdml-base-url={server.base_url}",
            f"--weirdml-runs={RUNS}",
            *base_args,
            timeout=600,
        )
    result.assert_outcomes(passed=2 * TASKS * RUNS)
    assert replay.is_file()
    iterations = read_iterations(session_dir(pytester) / "records.jsonl")
    assert len(iterations) == 2 * TASKS * RUNS
    assert len([s for s in server.requests if s.path.endswith("/chat/completions")]) == TASKS * RUNS
    built = [json.loads(line) for line in (pytester.path / "built.jsonl").read_text().splitlines()]
    per_process = Counter((b["pid"], b["class"]) for b in built)
    # The controller (which checks the keys before any work) and the two workers.
    assert len({b["pid"] for b in built}) == 3
    assert set(per_process.values()) == {1}, per_process
    assert Counter(b["class"] for b in built) == {"OpenAICompatibleModel": 3, "ReplayModel": 3}


def test_two_models_that_would_record_under_one_name_are_a_usage_error(
    pytester: pytest.Pytester, tiny: Path, base_args: list[str]
) -> None:
    """Issue 36: replay:/a/ans.json and replay:/b/ans.json were both recorded as replay:ans.json,
    and one model's runs were lost in the other's."""
    first, second = pytester.mkdir("a") / "ans.json", pytester.mkdir("b") / "ans.json"
    write_replay(first, [GOOD_SCRIPT])
    write_replay(second, [""])
    result = pytester.runpytest(f"--weirdml-model=replay:{first},replay:{second}", "--weirdml-runs=1", *base_args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            f"*--weirdml-model: models 'replay:{first}' and 'replay:{second}' would both be recorded as "
            "'replay:ans.json'*give them names of their own*"
        ]
    )
    assert not list((pytester.path / "reports").rglob("records.jsonl"))
    # Each alone is fine, and one spec named twice is one model.
    alone = pytester.runpytest(f"--weirdml-model=replay:{first},replay:{first}", "--weirdml-runs=1", *base_args)
    alone.assert_outcomes(passed=1)
