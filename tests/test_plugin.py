"""The plugin as users run it: collection, selection, options, fixtures, summary, xdist."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import GOOD_SCRIPT, SYSTEM_PROMPT_SPY, read_jsonl, session_dir, write_replay, write_tiny_task


def test_items_are_named_task_model_run(pytester: pytest.Pytester, tiny: Path, base_args: list[str]) -> None:
    result = pytester.runpytest(
        "--collect-only", "-q", "--weirdml-model=reference,baseline", "--weirdml-runs=2", *base_args
    )
    result.stdout.fnmatch_lines(
        [
            "tasks/tiny/task.toml::tiny[[]reference-0]",
            "tasks/tiny/task.toml::tiny[[]reference-1]",
            "tasks/tiny/task.toml::tiny[[]baseline-0]",
            "tasks/tiny/task.toml::tiny[[]baseline-1]",
            "4 tests collected*",
        ]
    )


def test_repeated_model_option_and_k_m_selection(pytester: pytest.Pytester, tiny: Path, base_args: list[str]) -> None:
    write_tiny_task(pytester.path, "other")
    args = ["--collect-only", "-q", "--weirdml-model=reference", "--weirdml-model", "baseline", "--weirdml-runs=1"]
    result = pytester.runpytest(*args, "-k", "tiny and baseline", *base_args)
    result.stdout.fnmatch_lines(["tasks/tiny/task.toml::tiny[[]baseline-0]", "1/4 tests collected (3 deselected)*"])
    result = pytester.runpytest(*args, "-m", "toy and weirdml", *base_args)
    result.stdout.fnmatch_lines(["4 tests collected*"])
    result = pytester.runpytest(*args, "-m", "not tabular", *base_args)
    result.stdout.fnmatch_lines(["no tests collected (4 deselected)*"])


def test_without_a_model_items_skip_naming_the_option(
    pytester: pytest.Pytester, tiny: Path, base_args: list[str]
) -> None:
    result = pytester.runpytest("-rs", *base_args)
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*no model chosen: pass --weirdml-model=NAME*"])


@pytest.mark.parametrize(
    ("option", "message"),
    [
        ("--weirdml-runs=0", "*--weirdml-runs must be at least 1, got 0*"),
        ("--weirdml-runs=two", "*--weirdml-runs must be a whole number*"),
        ("--weirdml-model=nope", "*--weirdml-model: unknown model 'nope'; known models: reference, baseline*"),
        ("--weirdml-model=replay:/no/such/file.json", "*replay file not found: /no/such/file.json*"),
        ("--weirdml-fail-under=1.5", "*--weirdml-fail-under must be an accuracy in [[]0, 1]*"),
        ("--weirdml-memory=lots", "*--weirdml-memory must be a size such as 8G*"),
        ("--weirdml-memory=0", "*--weirdml-memory must be between 64 MiB and 64 TiB, got '0'*"),
        ("--weirdml-time-limit=nan", "*--weirdml-time-limit must be seconds between 1 and 86400, got 'nan'*"),
        ("--weirdml-time-limit=inf", "*--weirdml-time-limit must be seconds between 1 and 86400, got 'inf'*"),
        ("--weirdml-time-limit=1e999", "*--weirdml-time-limit must be seconds between 1 and 86400*"),
        ("--weirdml-time-limit=0", "*--weirdml-time-limit must be seconds between 1 and 86400, got '0'*"),
        ("--weirdml-time-limit=abc", "*--weirdml-time-limit must be seconds, got 'abc'*"),
        ("--weirdml-results-cap=lots", "*--weirdml-results-cap must be a size such as 8G*"),
        ("--weirdml-results-cap=64T", "*--weirdml-results-cap must be between 64 KiB and 16 GiB*"),
    ],
)
def test_bad_options_are_usage_errors_naming_the_flag(
    pytester: pytest.Pytester, tiny: Path, option: str, message: str
) -> None:
    result = pytester.runpytest(option)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


@pytest.mark.parametrize(
    ("breakage", "message"),
    [
        (lambda t: (t / "task.toml").write_text("name = [unclosed"), "*tiny/task.toml: invalid TOML*"),
        (lambda t: (t / "prompt.md").unlink(), "*tiny/prompt.md: not found*"),
        (lambda t: (t / "data.py").unlink(), "*tiny/data.py: data builder not found*"),
        (
            lambda t: (t / "task.toml").write_text((t / "task.toml").read_text() + "timelimit = 3\n"),
            "*task.toml: unknown keys [[]'timelimit']*",
        ),
    ],
)
def test_broken_task_is_a_collection_error_for_that_task_only(
    pytester: pytest.Pytester,
    tiny: Path,
    base_args: list[str],
    breakage,
    message: str,  # type: ignore[no-untyped-def]
) -> None:
    write_tiny_task(pytester.path, "healthy")
    breakage(tiny)
    result = pytester.runpytest("--weirdml-model=reference", "--weirdml-runs=1", *base_args)
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*ERROR collecting tasks/tiny/task.toml*", message])


def test_a_raising_data_builder_errors_its_items_naming_the_file(
    pytester: pytest.Pytester, tiny: Path, base_args: list[str]
) -> None:
    (tiny / "data.py").write_text("def build(out, seed):\n    raise RuntimeError('source missing')\n")
    result = pytester.runpytest("--weirdml-model=reference", "--weirdml-runs=1", *base_args)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*tiny/data.py: build() raised RuntimeError: source missing*"])


def test_reference_and_baseline_run_record_and_summarise(
    pytester: pytest.Pytester, tiny: Path, base_args: list[str]
) -> None:
    result = pytester.runpytest("--weirdml-model=reference,baseline", "--weirdml-runs=2", *base_args)
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(
        [
            "*weirdml summary*",
            "task*model*runs*mean*95% CI*",
            "tiny*baseline*2*0.450*",
            "tiny*reference*2*1.000*[[]1.000, 1.000]*",
        ]
    )
    where = session_dir(pytester)
    records = read_jsonl(where / "records.jsonl")
    # reference and baseline submit fixed scripts, so each run has exactly one iteration.
    assert sorted((r["model"], r["run"], r["iteration"]) for r in records) == [
        ("baseline", 0, 1),
        ("baseline", 1, 1),
        ("reference", 0, 1),
        ("reference", 1, 1),
    ]
    assert {r["score"] for r in records if r["model"] == "reference"} == {1.0}
    assert "You have 1 submission in total" in records[0]["prompt"] or records[0]["prompt"].startswith("Predict")
    summary = json.loads((where / "summary.json").read_text())
    assert summary["models"]["reference"]["overall"]["mean"] == 1.0
    assert (where / "transcripts" / "tiny" / "reference-0.md").read_text().startswith("# tiny · reference · run 0")


def test_fail_under_fails_runs_below_the_threshold(pytester: pytest.Pytester, tiny: Path, base_args: list[str]) -> None:
    result = pytester.runpytest(
        "--weirdml-model=reference,baseline", "--weirdml-runs=1", "--weirdml-fail-under=0.9", *base_args
    )
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*run score 0.4500 is under --weirdml-fail-under=0.9*"])


def test_model_and_sandbox_fixtures_can_be_overridden_from_conftest(
    pytester: pytest.Pytester, tiny: Path, base_args: list[str]
) -> None:
    pytester.makeconftest(
        f"""
        import pytest
        from pytest_weirdml.models import Model, Response
        from pytest_weirdml.sandbox.local import LocalSandbox

        class MyClient(Model):
            name = "mine"
            def generate(self, request):
                return Response(text="```python\\n" + {GOOD_SCRIPT!r} + "```", output_tokens=7)

        class CountingSandbox(LocalSandbox):
            calls = 0
            def run(self, *args, **kwargs):
                CountingSandbox.calls += 1
                return super().run(*args, **kwargs)

        @pytest.fixture
        def weirdml_model(weirdml_case):
            return MyClient()

        @pytest.fixture(scope="session")
        def weirdml_sandbox():
            sandbox = CountingSandbox()
            yield sandbox
            print("SANDBOX RUNS", CountingSandbox.calls)
        """
    )
    result = pytester.runpytest("--weirdml-model=baseline", "--weirdml-runs=1", "-s", *base_args)
    result.assert_outcomes(passed=1)
    # 2 iterations of the client's script plus the probe that reads the package versions.
    result.stdout.fnmatch_lines(["*SANDBOX RUNS 3*"])
    records = read_jsonl(session_dir(pytester) / "records.jsonl")
    assert [(r["model"], r["score"], r["output_tokens"]) for r in records] == [("mine", 1.0, 7), ("mine", 1.0, 7)]


def test_feedback_loop_gives_reasons_and_what_is_left(
    pytester: pytest.Pytester, tiny: Path, base_args: list[str]
) -> None:
    (tiny / "task.toml").write_text((tiny / "task.toml").read_text().replace("iterations = 2", "iterations = 4"))
    replay = write_replay(
        pytester.path / "answers.json",
        [
            "",  # no code block at all
            "raise SystemExit(3)",
            "import numpy as np\nnp.savetxt('results/test_preds.txt', np.zeros((7, 2)), fmt='%d')",
            GOOD_SCRIPT,
        ],
    )
    result = pytester.runpytest(f"--weirdml-model=replay:{replay}", "--weirdml-runs=1", *base_args)
    result.assert_outcomes(passed=1)
    records = read_jsonl(session_dir(pytester) / "records.jsonl")
    assert [r["score"] for r in records] == [0.0, 0.0, 0.0, 1.0]
    reasons = [r["zero_reason"] for r in records]
    assert reasons[0].startswith("no code block")
    assert reasons[1] == "the script crashed (exit code 3)"
    assert reasons[2] == "wrong shape: predictions (7, 2), expected (100,)"
    assert reasons[3] is None
    # Each prompt after the first is the feedback on the previous submission.
    assert "scored 0: no code block" in records[1]["prompt"] and "You have 3 submissions left" in records[1]["prompt"]
    assert "scored 0: the script crashed (exit code 3)" in records[2]["prompt"]
    assert "You have 1 submission left" in records[3]["prompt"]
    result.stdout.fnmatch_lines(["tiny*replay:answers.json*1*1.000*"])


def test_system_prompt_states_packages_read_from_the_sandbox(
    pytester: pytest.Pytester, tiny: Path, base_args: list[str]
) -> None:
    import numpy

    pytester.makeconftest(SYSTEM_PROMPT_SPY)
    result = pytester.runpytest("--weirdml-model=reference", "--weirdml-runs=1", "-s", *base_args)
    result.assert_outcomes(passed=1)
    text = result.stdout.str()
    assert f"numpy {numpy.__version__}" in text
    assert "Time limit: 20 seconds" in text
    assert "You have 1 submission in total" in text
    assert "results/test_preds.txt" in text


def test_summary_is_right_under_xdist(pytester: pytest.Pytester, tiny: Path, base_args: list[str]) -> None:
    write_tiny_task(pytester.path, "second")
    result = pytester.runpytest_subprocess(
        "-n", "2", "--weirdml-model=reference,baseline", "--weirdml-runs=2", *base_args, timeout=300
    )
    result.assert_outcomes(passed=8)
    result.stdout.fnmatch_lines(["second*baseline*2*", "second*reference*2*1.000*", "reference*2*4*1.000*"])
    where = session_dir(pytester)
    summary = json.loads((where / "summary.json").read_text())
    assert len(summary["runs"]) == 8
    assert summary["models"]["reference"]["runs"] == 4
    assert len(read_jsonl(where / "records.jsonl")) == 8
