"""The plugin as users run it: collection, selection, options, fixtures, summary, xdist."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import (
    GOOD_SCRIPT,
    SYSTEM_PROMPT_SPY,
    read_iterations,
    read_jsonl,
    read_plans,
    session_dir,
    write_replay,
    write_tiny_task,
)


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
        ("--weirdml-data-seed=often", "*--weirdml-data-seed must be a whole number or 'random', got 'often'*"),
        ("--weirdml-data-seed=-1", "*--weirdml-data-seed must be between 0 and 4294967295, got -1*"),
        ("--weirdml-protocol=secret", "*--weirdml-protocol: invalid choice: 'secret'*"),
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
    records = read_iterations(where / "records.jsonl")
    # reference and baseline submit fixed scripts, so each run has exactly one iteration.
    assert sorted((r["model"], r["run"], r["iteration"]) for r in records) == [
        ("baseline", 0, 1),
        ("baseline", 1, 1),
        ("reference", 0, 1),
        ("reference", 1, 1),
    ]
    assert {r["score"] for r in records if r["model"] == "reference"} == {1.0}
    assert records[0]["prompt"].startswith("Predict")
    plans = read_plans(where / "records.jsonl")
    assert len(plans) == 4
    assert plans[0]["protocol"] == "published" and "several iterations" in plans[0]["system_prompt"]
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
        from pytest_weirdml.models import Model, Response, Usage
        from pytest_weirdml.sandbox.local import LocalSandbox

        class MyClient(Model):
            name = "mine"
            def generate(self, request):
                return Response("```python\\n" + {GOOD_SCRIPT!r} + "```", Usage(output_tokens=7))

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
    iterations = [r for r in records if r["kind"] == "iteration"]
    assert [(r["model"], r["score"], r["usage"]["output_tokens"]) for r in iterations] == [("mine", 1.0, 7)] * 2
    assert records[-1]["kind"] == "run_end" and records[-1]["status"] == "finished" and records[-1]["model"] == "mine"


@pytest.mark.parametrize("protocol", ["published", "informed"])
def test_feedback_loop_gives_reasons_and_discloses_only_what_the_protocol_allows(
    pytester: pytest.Pytester, tiny: Path, base_args: list[str], protocol: str
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
    extra = [] if protocol == "published" else [f"--weirdml-protocol={protocol}"]
    result = pytester.runpytest(f"--weirdml-model=replay:{replay}", "--weirdml-runs=1", *extra, *base_args)
    result.assert_outcomes(passed=1)
    records = read_iterations(session_dir(pytester) / "records.jsonl")
    assert [r["score"] for r in records] == [0.0, 0.0, 0.0, 1.0]
    reasons = [r["zero_reason"] for r in records]
    assert reasons[0].startswith("no code block")
    assert reasons[1] == "the script crashed (exit code 3)"
    assert reasons[2] == "wrong shape: predictions (7, 2), expected (100,)"
    assert reasons[3] is None
    (plan,) = read_plans(session_dir(pytester) / "records.jsonl")
    assert plan["protocol"] == protocol
    # The system prompt is recorded once per run, in its start.
    system = plan["system_prompt"]
    assert system and all("system_prompt" not in r for r in records)
    # Each prompt after the first is the feedback on the previous submission.
    feedback = [r["prompt"] for r in records[1:]]
    assert "Test accuracy: 0.0 (no code block" in feedback[0]
    assert "Test accuracy: 0.0 (the script crashed (exit code 3))" in feedback[1]
    disclosures = ("4 submissions", "submissions left", "submission left", "so far", "ran for", "scores 0")
    told = [phrase for phrase in disclosures for text in [system, *feedback] if phrase in text]
    if protocol == "published":
        assert told == []
        assert feedback[1].startswith("Terminal output of your script:")
    else:
        assert "You have 3 submissions left" in feedback[0] and "You have 1 submission left" in feedback[2]
        assert "Best test accuracy so far" in feedback[1] and "The script ran for" in feedback[1]
        assert "You have 4 submissions in total" in system
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
    assert "a limit of 20 seconds of wall-clock time" in text
    assert "several iterations" in text and "in total" not in text


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
    records = read_jsonl(where / "records.jsonl")
    assert [r["kind"] for r in records].count("iteration") == 8
    assert {(r["task"], r["model"], r["run"]) for r in records if r["kind"] == "run_end"} == {
        (task, model, run) for task in ("tiny", "second") for model in ("reference", "baseline") for run in (0, 1)
    }


def test_data_seed_builds_fresh_data_and_is_recorded(
    pytester: pytest.Pytester, tiny: Path, base_args: list[str]
) -> None:
    pytester.runpytest("--weirdml-model=reference", "--weirdml-runs=1", *base_args).assert_outcomes(passed=1)
    own = read_plans(session_dir(pytester) / "records.jsonl")[0]
    assert own["data_seed"] == 0 and "-seed0-" in own["data_key"]
    seeded = pytester.runpytest(
        "--weirdml-model=reference", "--weirdml-runs=1", "--weirdml-data-seed=7", *base_args, "--weirdml-reports=r7"
    )
    seeded.assert_outcomes(passed=1)
    (record,) = read_plans(next((pytester.path / "r7").iterdir()) / "records.jsonl")
    assert record["data_seed"] == 7 and record["data_key"] == own["data_key"].replace("-seed0-", "-seed7-")
    built = sorted(p.name for p in (pytester.path / "cache" / "tiny").iterdir() if p.is_dir())
    assert built == sorted([own["data_key"], record["data_key"]])
    first, other = (pytester.path / "cache" / "tiny" / key / "public" / "test_x.npy" for key in built)
    assert first.read_bytes() != other.read_bytes()


def test_a_random_data_seed_is_drawn_once_for_every_xdist_worker(
    pytester: pytest.Pytester, tiny: Path, base_args: list[str]
) -> None:
    result = pytester.runpytest_subprocess(
        "-n",
        "2",
        "--weirdml-model=reference",
        "--weirdml-runs=4",
        "--weirdml-data-seed=random",
        *base_args,
        timeout=300,
    )
    result.assert_outcomes(passed=4)
    assert len(read_iterations(session_dir(pytester) / "records.jsonl")) == 4
    records = read_plans(session_dir(pytester) / "records.jsonl")
    seeds = {r["data_seed"] for r in records}
    assert len(records) == 4 and len(seeds) == 1 and seeds != {0}
    assert {r["data_key"] for r in records} == {
        f"{records[0]['data_key'].split('-seed')[0]}-seed{seeds.pop()}-{records[0]['data_key'].rsplit('-', 1)[1]}"
    }


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            "--weirdml-protocol=informed",
            "*started under the published protocol; resume it with --weirdml-protocol=published*",
        ),
        ("--weirdml-data-seed=3", "*started on data v1-seed0-*, not v1-seed3-*; resume it with --weirdml-data-seed=0*"),
    ],
)
def test_resume_keeps_the_protocol_and_the_data_of_the_session(
    pytester: pytest.Pytester, tiny: Path, base_args: list[str], change: str, message: str
) -> None:
    pytester.runpytest("--weirdml-model=reference", "--weirdml-runs=1", *base_args).assert_outcomes(passed=1)
    where = session_dir(pytester)
    result = pytester.runpytest(
        "--weirdml-model=reference", "--weirdml-runs=1", f"--weirdml-resume={where}", change, *base_args
    )
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([message])
    assert len(read_iterations(where / "records.jsonl")) == 1


def test_the_header_shows_a_server_without_its_credentials() -> None:
    from pytest_weirdml.terminal import _shown_url

    assert _shown_url("https://alice:s3cret@llm.example:8443/v1") == "https://llm.example:8443/v1"
    assert _shown_url("http://127.0.0.1:8000/v1\x1b[2J") == "http://127.0.0.1:8000/v1"
