"""The API providers, each through its real SDK over real HTTP to a scripted server on 127.0.0.1."""

from __future__ import annotations

import json
import re
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from pytest_weirdml import models
from pytest_weirdml.errors import ModelError
from pytest_weirdml.models import Catalog, Message, ModelConfig, Request
from pytest_weirdml.models.provider import ProviderModel

sys.path.insert(0, str(Path(__file__).parent))
from providers_server import WIRES, FakeProvider, Planned, Usage

SDKS = {"anthropic": "anthropic", "openai": "openai", "google": "google.genai"}
KEY_ENV = {"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY", "google": "GEMINI_API_KEY"}
PLANTED = "sk-planted-7f3a9c1e5b2d8f4a6c0e"


def _need_sdk(wire: str) -> None:
    pytest.importorskip(SDKS[wire], reason=f"the {wire} SDK is not installed: pip install 'pytest-weirdml[{wire}]'")


@pytest.fixture(params=WIRES)
def wire(request: pytest.FixtureRequest) -> str:
    _need_sdk(request.param)
    return str(request.param)


# A tiny task: the parity of 40 integers, scored by the real loop and the real sandbox.
TASK_TOML = """\
name = "tiny"
description = "the parity of small integers"
public_files = ["x.npy"]
time_limit_s = 60
iterations = 3
"""
DATA_PY = """\
import numpy as np

def build(out, seed):
    x = np.random.default_rng(seed).integers(0, 100, size=40)
    np.save(out / "x.npy", x, allow_pickle=False)
    return x % 2
"""
PROMPT = "Predict x % 2 for every integer in data/x.npy.\n\n```python\nimport numpy as np\n```\n"
ALL_ZERO = "import numpy as np\nnp.savetxt('results/test_preds.txt', np.zeros(40, dtype=int), fmt='%d')\n"
# Prints its whole environment, so a key that leaked into the sandbox would land in the records.
CORRECT = (
    "import os\nimport numpy as np\nprint(dict(os.environ))\n"
    "x = np.load('data/x.npy')\nnp.savetxt('results/test_preds.txt', x % 2, fmt='%d')\n"
)


def solver(conversation: list[tuple[str, str]]) -> str:
    """No code first (scored 0), then all zeros (about half right), then the answer."""
    answered = sum(role == "assistant" for role, _ in conversation)
    if answered == 0:
        return "Let me think about the data first; I will write the script next time."
    script = ALL_ZERO if answered == 1 else CORRECT
    return f"Here is my script.\n\n```python\n{script}```\n"


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.mkdir("tiny")
    (pytester.path / "tiny" / "task.toml").write_text(TASK_TOML)
    (pytester.path / "tiny" / "data.py").write_text(DATA_PY)
    (pytester.path / "tiny" / "prompt.md").write_text(PROMPT)
    return pytester


def _config(wire: str, server: FakeProvider, name: str = "fake") -> str:
    """A models config naming one alias for the server, and the key it takes, as a user would
    write it."""
    return f"""
[tool.weirdml.models."{wire}:fake-model-1"]
price_input = 3.0
price_output = 15.0
price_cached_input = 0.3

[tool.weirdml.models.{name}]
model = "{wire}:fake-model-1"
base_url = "{server.base_url}"
api_key_env = "{KEY_ENV[wire]}"
timeout_s = 5
retry_initial_s = 0.01
max_output_tokens = 1000
"""


def _run(project: pytest.Pytester, *args: str) -> pytest.RunResult:
    return project.runpytest(
        "tiny",
        "--weirdml-runs=1",
        f"--weirdml-data-cache={project.path / 'data-cache'}",
        f"--weirdml-reports={project.path / 'reports'}",
        "-p",
        "no:cacheprovider",
        *args,
    )


def _records(project: pytest.Pytester) -> list[dict[str, object]]:
    files = sorted((project.path / "reports").glob("*/records.jsonl"))
    assert files, "no records.jsonl written"
    lines = [json.loads(line) for line in files[-1].read_text().splitlines()]
    return [line for line in lines if line["kind"] == "iteration"]


def _model(wire: str, server: FakeProvider, sleeps: list[float] | None = None, **settings: object) -> ProviderModel:
    config = ModelConfig(
        name=f"{wire}:fake-model-1",
        provider=wire,
        model="fake-model-1",
        base_url=server.base_url,
        api_key_env=(KEY_ENV[wire],),
        **{"timeout_s": 5.0, "retry_initial_s": 0.01, "max_output_tokens": 1000, **settings},  # type: ignore[arg-type]
    )
    model = models.build_provider(config)
    assert isinstance(model, ProviderModel)
    if sleeps is not None:
        model._sleep = sleeps.append  # record the waits instead of sleeping through them
    return model


def _ask(model: ProviderModel, text: str = "hello") -> models.Response:
    messages = (Message("system", "be brief"), Message("user", text))
    return model.generate(Request(messages=messages, task=None, run=0, iteration=1))  # type: ignore[arg-type]


@pytest.fixture(autouse=True)
def _keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (*KEY_ENV.values(), "GOOGLE_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    for name in KEY_ENV.values():
        monkeypatch.setenv(name, PLANTED)


# Whole runs from the command line ---------------------------------------------------------------


def test_full_run_is_scored_and_no_key_is_written(project: pytest.Pytester, wire: str) -> None:
    with FakeProvider(wire, solver) as server:
        project.makepyprojecttoml(_config(wire, server))
        result = _run(project, "--weirdml-model=fake", "-v")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*tiny?fake-0? PASSED*"])
    records = _records(project)
    assert [r["iteration"] for r in records] == [1, 2, 3]
    assert records[0]["score"] == 0.0 and "no code block" in str(records[0]["zero_reason"])
    assert 0.0 < float(records[1]["score"]) < 1.0  # type: ignore[arg-type]
    assert records[2]["score"] == 1.0
    for record in records:
        usage = record["usage"]
        assert isinstance(usage, dict)
        assert (usage["input_tokens"], usage["output_tokens"], usage["cached_tokens"]) == (100, 50, 20)
        assert usage["reasoning_tokens"] == 10 and usage["retries"] == [] and usage["latency_s"] > 0
        assert usage["cost_usd"] == pytest.approx((80 * 3.0 + 20 * 0.3 + 50 * 15.0) / 1e6)
    # The model saw the feedback of each submission.
    third = server.requests[2].conversation
    assert [role for role, _ in third] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert "Test accuracy: 0.0 (no code block" in third[3][1]
    assert all(PLANTED not in str(r) for r in records)
    _assert_no_key(project.path, result)


def _assert_no_key(root: Path, result: pytest.RunResult) -> None:
    written = [p for p in root.rglob("*") if p.is_file()]
    assert any(p.name == "records.jsonl" for p in written)
    leaked = [p for p in written if PLANTED.encode() in p.read_bytes()]
    assert not leaked, f"the API key was written to {leaked}"
    assert PLANTED not in result.stdout.str() + result.stderr.str()


def test_the_claude_alias_is_current_and_runs_with_deprecations_as_errors(project: pytest.Pytester) -> None:
    _need_sdk("anthropic")
    with FakeProvider("anthropic", solver) as server:
        project.makepyprojecttoml(
            f'[tool.weirdml.models.claude]\nbase_url = "{server.base_url}"\ntimeout_s = 5\nretry_initial_s = 0.01\n'
            'api_key_env = "ANTHROPIC_API_KEY"\n'
        )
        result = _run(project, "--weirdml-model=claude", "-W", "error::DeprecationWarning")
    result.assert_outcomes(passed=1)
    assert {s.body["model"] for s in server.requests} == {"claude-sonnet-5-5"} and len(server.requests) == 3
    # Its price could not be checked: the session says so rather than guess.
    result.stdout.fnmatch_lines(["weirdml models: claude = anthropic:claude-sonnet-5-5 (cost unknown)", "*unknown*"])
    assert all(r["usage"]["cost_usd"] is None for r in _records(project))  # type: ignore[index]
    assert "deprecated" not in result.stdout.str().lower()


def test_a_retiring_model_is_named_once_with_its_replacement(project: pytest.Pytester) -> None:
    _need_sdk("anthropic")
    project.makepyprojecttoml('[tool.weirdml.providers.anthropic]\napi_key_env = "ANTHROPIC_API_KEY"\n')
    with FakeProvider("anthropic", solver) as server:
        result = _run(
            project,
            "--weirdml-model=anthropic:claude-sonnet-4-5",
            f"--weirdml-base-url={server.base_url}",
            "-W",
            "error::DeprecationWarning",
        )
    # Three calls to a model in the SDK's deprecation table, not one Python warning per call.
    result.assert_outcomes(passed=1)
    assert len(server.requests) == 3
    out = result.stdout.str()
    assert out.count("retires it on") == 1
    assert out.count("ModelDeprecatedWarning: model") == 1
    result.stdout.fnmatch_lines(
        [
            "*ModelDeprecatedWarning: model anthropic:claude-sonnet-4-5 (anthropic:claude-sonnet-4-5) is deprecated: "
            "anthropic retires it on 2026-11-30; use anthropic:claude-sonnet-5-5 instead*"
        ]
    )
    cost = pytest.approx((80 * 3.0 + 20 * 0.3 + 50 * 15.0) / 1e6)
    assert [r["usage"]["cost_usd"] for r in _records(project)] == [cost] * 3  # type: ignore[index]


def test_openai_compatible_from_the_command_line(project: pytest.Pytester) -> None:
    _need_sdk("openai")
    with FakeProvider("openai", solver) as server:
        result = _run(project, "--weirdml-model=openai-compatible:tiny-llm", f"--weirdml-base-url={server.base_url}")
    result.assert_outcomes(passed=1)
    assert [r["score"] for r in _records(project)][-1] == 1.0
    assert {s.body["model"] for s in server.requests} == {"tiny-llm"}
    # A local server gets no key, not even the OPENAI_API_KEY of the environment.
    assert all(PLANTED not in json.dumps(s.headers) for s in server.requests)
    assert all("max_tokens" in s.body for s in server.requests)


def test_openai_compatible_without_base_url_is_a_usage_error(project: pytest.Pytester) -> None:
    _need_sdk("openai")
    result = _run(project, "--weirdml-model=openai-compatible:tiny-llm")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*needs the server's base URL*--weirdml-base-url=*"])


def test_bad_key_errors_the_item_with_the_providers_message(project: pytest.Pytester, wire: str) -> None:
    with FakeProvider(wire, solver) as server:
        project.makepyprojecttoml(_config(wire, server))
        server.plan.append(Planned(status=401, error=f"invalid x-api-key {PLANTED}"))
        result = _run(project, "--weirdml-model=fake")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*ModelError*HTTP 401*invalid x-api-key*not the model's fault*"])
    assert len(server.requests) == 1  # not retried
    # The server echoed the key in its message; the harness redacted it everywhere.
    result.stdout.fnmatch_lines(["*invalid x-api-key ?redacted?*"])
    leaked = [p for p in project.path.rglob("*") if p.is_file() and PLANTED.encode() in p.read_bytes()]
    assert not leaked and PLANTED not in result.stdout.str() + result.stderr.str()


def test_missing_key_stops_the_session_before_any_work(project: pytest.Pytester, wire: str) -> None:
    with FakeProvider(wire, solver) as server:
        project.makepyprojecttoml(_config(wire, server))
        for name in (*KEY_ENV.values(), "GOOGLE_API_KEY"):
            project._monkeypatch.delenv(name, raising=False)
        result = _run(project, "--weirdml-model=fake")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*needs an API key: set {KEY_ENV[wire]}*"])
    assert server.requests == []


def test_unknown_model_lists_the_known_ones(project: pytest.Pytester) -> None:
    result = _run(project, "--weirdml-model=no-such-model")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*unknown model 'no-such-model'*claude*gemini*gpt*anthropic:MODEL*"])


@pytest.mark.parametrize("wire", ["anthropic"])  # the cache sits above the providers: one is enough
def test_cache_replays_a_run_without_requests(project: pytest.Pytester, wire: str) -> None:
    _need_sdk(wire)
    cache = f"--weirdml-cache-dir={project.path / 'answers'}"
    with FakeProvider(wire, solver) as server:
        project.makepyprojecttoml(_config(wire, server))
        _run(project, "--weirdml-model=fake", "--weirdml-cache", cache).assert_outcomes(passed=1)
        first = _records(project)
        assert len(server.requests) == 3
        second_run = _run(project, "--weirdml-model=fake", "--weirdml-cache", cache)
        second_run.assert_outcomes(passed=1)
        assert len(server.requests) == 3, "the replay reached the server"
    second = _records(project)
    assert [r["response"] for r in second] == [r["response"] for r in first]
    assert [r["score"] for r in second] == [r["score"] for r in first]
    assert second[0]["session"] != first[0]["session"]
    _assert_no_key(project.path, second_run)


def test_the_cache_keys_answers_by_their_server_and_marks_a_replay(project: pytest.Pytester) -> None:
    """Issue 36: an answer of a local server was replayed as openai:gpt-5's, cost and all, and
    unmarked. The key holds the server; a replay says it is one, and the summary counts them."""
    _need_sdk("openai")
    project.makepyprojecttoml('[tool.weirdml.providers.openai]\napi_key_env = "OPENAI_API_KEY"\n')
    cache = ("--weirdml-model=openai:gpt-5", "--weirdml-cache", f"--weirdml-cache-dir={project.path / 'answers'}")

    def replayed() -> list[object]:
        return [r["usage"]["cached_response"] for r in _records(project)]  # type: ignore[index]

    def counted() -> tuple[object, object]:
        """The latest summary's count of replayed answers: the model's row's and its run's."""
        (where,) = sorted((project.path / "reports").glob("*/summary.json"))[-1:]
        summary = json.loads(where.read_text())
        (run,) = summary["runs"]
        return summary["models"]["openai:gpt-5"]["cached_responses"], run["cached_responses"]

    with FakeProvider("openai", solver) as local, FakeProvider("openai", solver) as other:
        _run(project, *cache, f"--weirdml-base-url={local.base_url}").assert_outcomes(passed=1)
        assert len(local.requests) == 3 and replayed() == [False] * 3
        assert counted() == (0, 0)
        _run(project, *cache, f"--weirdml-base-url={local.base_url}").assert_outcomes(passed=1)
        assert len(local.requests) == 3 and replayed() == [True] * 3
        assert counted() == (3, 3)
        _run(project, *cache, f"--weirdml-base-url={other.base_url}").assert_outcomes(passed=1)
        assert len(other.requests) == 3, "another server's answers were replayed"
        assert replayed() == [False] * 3 and counted() == (0, 0)
        # No base URL (or the provider's own) is the provider's server: a key of its own.
        config = ModelConfig(name="openai:gpt-5", provider="openai", model="gpt-5", api_key_env=("OPENAI_API_KEY",))
        own = models.build_provider(config).identity()
        assert own["base_url"] is None
        assert models.build_provider(replace(config, base_url="https://api.openai.com/v1/")).identity() == own
        assert models.build_provider(replace(config, base_url=local.base_url)).identity()["base_url"] == local.base_url


def test_a_provider_key_goes_to_another_server_only_when_the_config_names_it(
    project: pytest.Pytester, wire: str
) -> None:
    """Issue 36: --weirdml-base-url sent the provider's own key (OPENAI_API_KEY) to the server it named."""
    spec = f"--weirdml-model={wire}:fake-model-1"
    with FakeProvider(wire, solver) as server:
        refused = _run(project, spec, f"--weirdml-base-url={server.base_url}")
        assert refused.ret == pytest.ExitCode.USAGE_ERROR
        refused.stderr.fnmatch_lines(
            [
                f"*{wire}:fake-model-1 ({wire}:fake-model-1) would send {KEY_ENV[wire]}* to {server.base_url}, "
                f"which is not {wire}'s own server; a key goes to another server only when the models config names "
                f'it for that model: set api_key_env = "{KEY_ENV[wire]}"*or api_key_env = ?? to send none*'
            ]
        )
        assert server.requests == []
        # Named as none, no key goes, not even one the SDK would read from the environment itself.
        project.makepyprojecttoml(f"[tool.weirdml.providers.{wire}]\napi_key_env = []\n")
        _run(project, spec, f"--weirdml-base-url={server.base_url}").assert_outcomes(passed=1)
    assert len(server.requests) == 3
    assert all(PLANTED not in json.dumps(s.headers) for s in server.requests)


# Retries, failures and accounting, one call at a time -------------------------------------------


def test_rate_limit_honours_retry_after(wire: str) -> None:
    sleeps: list[float] = []
    with FakeProvider(wire, lambda c: "fine") as server:
        server.plan.append(Planned(status=429, headers={"retry-after": "7"}, error="slow down"))
        response = _ask(_model(wire, server, sleeps))
    assert response.text == "fine"
    assert sleeps == [7.0]
    assert len(response.usage.retries) == 1
    retry = response.usage.retries[0]
    assert (retry["attempt"], retry["wait_s"]) == (1, 7.0)
    assert "429" in retry["error"] and "slow down" in retry["error"]


@pytest.mark.parametrize("failure", ["overload", "unavailable", "dropped"])
def test_transient_failures_back_off_and_succeed(wire: str, failure: str) -> None:
    planned = {
        "overload": Planned(status=529, error="Overloaded"),
        "unavailable": Planned(status=503, error="try later"),
        "dropped": Planned(drop=True),
    }[failure]
    sleeps: list[float] = []
    with FakeProvider(wire, lambda c: "fine") as server:
        server.plan.extend([planned, planned])
        response = _ask(_model(wire, server, sleeps))
    assert response.text == "fine" and len(server.requests) == 3
    assert [r["attempt"] for r in response.usage.retries] == [1, 2]
    assert all(0 < s <= 0.1 for s in sleeps) and len(sleeps) == 2
    if failure == "dropped":
        assert "connection error" in response.usage.retries[0]["error"]
    else:
        assert str(planned.status) in response.usage.retries[0]["error"]


def test_timeout_is_retried(wire: str) -> None:
    sleeps: list[float] = []
    with FakeProvider(wire, lambda c: "fine") as server:
        server.plan.append(Planned(delay_s=2.0))
        response = _ask(_model(wire, server, sleeps, timeout_s=0.5))
    assert response.text == "fine"
    assert len(response.usage.retries) == 1 and "timeout" in response.usage.retries[0]["error"]


def test_retries_are_bounded_by_count_and_total_wait(wire: str) -> None:
    with FakeProvider(wire, lambda c: "fine") as server:
        server.plan.extend(Planned(status=503, error="down") for _ in range(10))
        with pytest.raises(ModelError, match=r"HTTP 503.*down.*gave up after 2 retries"):
            _ask(_model(wire, server, [], max_retries=2))
        assert len(server.requests) == 3
        server.plan.clear()
        server.plan.extend(Planned(status=429, headers={"retry-after": "30"}) for _ in range(3))
        with pytest.raises(ModelError, match=r"HTTP 429.*gave up after 1 retries"):
            _ask(_model(wire, server, [], max_retry_wait_s=45))


@pytest.mark.parametrize("status", [400, 404])
def test_client_errors_are_not_retried(wire: str, status: int) -> None:
    with FakeProvider(wire) as server:
        server.plan.append(Planned(status=status, error="model fake-model-1 not found"))
        with pytest.raises(ModelError, match=rf"HTTP {status}.*model fake-model-1 not found") as info:
            _ask(_model(wire, server, []))
    assert len(server.requests) == 1 and "gave up" not in str(info.value)


def test_usage_and_cost(wire: str) -> None:
    usage = Usage(input=12_000, output=3_000, reasoning=1_000, cached=2_000)
    with FakeProvider(wire, lambda c: "fine", usage=usage) as server:
        response = _ask(_model(wire, server, price_input=2.0, price_output=8.0, price_cached_input=0.5))
        unpriced = _ask(_model(wire, server))
    assert (response.usage.input_tokens, response.usage.cached_tokens) == (12_000, 2_000)
    assert (response.usage.output_tokens, response.usage.reasoning_tokens) == (3_000, 1_000)
    assert response.usage.cost_usd == pytest.approx((10_000 * 2.0 + 2_000 * 0.5 + 3_000 * 8.0) / 1e6)
    assert response.usage.latency_s > 0
    assert unpriced.usage.cost_usd is None


def test_settings_reach_the_wire(wire: str) -> None:
    knob = {
        "anthropic": {"thinking_budget": 2048},
        "openai": {"reasoning_effort": "high"},
        "google": {"thinking_budget": 512},
    }[wire]
    with FakeProvider(wire, lambda c: "fine") as server:
        _ask(_model(wire, server, temperature=0.5, **knob))
    body = server.requests[0].body
    if wire == "anthropic":
        assert body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
        assert body["max_tokens"] == 1000 and body["system"] == "be brief" and body["temperature"] == 0.5
    elif wire == "openai":
        assert body["reasoning_effort"] == "high" and body["max_completion_tokens"] == 1000
    else:
        generation = body["generationConfig"]
        thinking = generation["thinkingConfig"]  # the SDK's own spelling, camel or snake case
        assert 512 in (thinking.get("thinkingBudget"), thinking.get("thinking_budget"))
        assert generation["maxOutputTokens"] == 1000 and generation["temperature"] == 0.5
    assert PLANTED in json.dumps(server.requests[0].headers)  # the key did go where it belongs


def test_missing_sdk_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "anthropic", None)
    with pytest.raises(ValueError, match=r"pip install 'pytest-weirdml\[anthropic\]'"):
        models.resolve("anthropic:claude-sonnet-4-5")


# The models config -----------------------------------------------------------------------------


def test_aliases_merge_shipped_and_user_settings(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[tool.weirdml.models."anthropic:claude-sonnet-5-5"]\nprice_input = 3.0\nprice_output = 16.0\n'
        'price_checked = "2026-11-30"\n'
        "[tool.weirdml.models.claude]\ntemperature = 0.2\n"
        '[tool.weirdml.models.mine]\nmodel = "claude"\niterations = 2\n'
    )
    (tmp_path / "weirdml.toml").write_text("[providers.anthropic]\nmax_output_tokens = 2000\n")
    catalog = Catalog.load(tmp_path)
    mine = catalog.lookup("mine")
    assert (mine.provider, mine.model) == ("anthropic", "claude-sonnet-5-5")
    assert (mine.price_input, mine.price_output, mine.price_checked) == (3.0, 16.0, "2026-11-30")
    assert mine.price_text() == "$3.00 / $16.00 per M tokens in / out (checked 2026-11-30)"
    # The shipped alias's model has no verified price: unknown, not a guess.
    assert Catalog.load().lookup("claude").price_text() == "cost unknown"
    assert (mine.temperature, mine.iterations, mine.max_output_tokens) == (0.2, 2, 2000)
    assert mine.api_key_env == ("ANTHROPIC_API_KEY",)
    assert catalog.lookup("openai:some-new-model").price_input is None
    assert catalog.with_base_url("http://127.0.0.1:9/v1").lookup("gpt").base_url == "http://127.0.0.1:9/v1"
    (tmp_path / "weirdml.toml").write_text('[models.bad]\nmodel = "anthropic:x"\nreasoning_effort = "high"\n')
    with pytest.raises(ValueError, match=r"settings \['reasoning_effort'\] that anthropic does not use"):
        Catalog.load(tmp_path).lookup("bad")
    (tmp_path / "weirdml.toml").write_text("[models.bad]\nprice = 1\n")
    with pytest.raises(ValueError, match=r"unknown settings \['price'\]"):
        Catalog.load(tmp_path)
    assert not Catalog.load().knows("nope") and Catalog.load().knows("gemini")


# Output caps --------------------------------------------------------------------------------------

# The published top models spend up to ~72k output tokens per call; the shipped caps are the
# providers' own maxima, and a cut answer is told apart from an answer without code.
SHIPPED_CAPS = {
    "anthropic": [("claude", 64000), ("claude-opus", 64000), ("claude-haiku", 64000)],
    "openai": [("gpt", 128000), ("gpt-mini", 128000), ("openai:gpt-4.1", 32768)],
    "google": [("gemini", 65536), ("gemini-flash", 65536)],
}
STOP_REASONS = {"anthropic": "max_tokens", "openai": "length", "google": "MAX_TOKENS"}
CUT_MID_FENCE = "I will train a small network.\n\n```python\nimport numpy as np\nx = np.load('data/x.npy')\nfor"
CUT_AFTER_BLOCK = f"First the whole script.\n\n```python\n{CORRECT}```\n\nThen a variant:\n\n```python\nimport nu"


def test_shipped_caps_reach_the_wire(wire: str, tmp_path: Path) -> None:
    field = {"anthropic": "max_tokens", "openai": "max_completion_tokens", "google": "maxOutputTokens"}[wire]
    # The shipped keys are for the providers' own servers: this one is named for the local one.
    (tmp_path / "weirdml.toml").write_text(f'[providers.{wire}]\napi_key_env = "{KEY_ENV[wire]}"\n')
    with FakeProvider(wire, lambda c: "fine") as server:
        catalog = Catalog.load(tmp_path).with_base_url(server.base_url)
        for alias, cap in SHIPPED_CAPS[wire]:
            config = catalog.lookup(alias)
            assert config.max_output_tokens == cap
            # Long enough to wait for a whole answer of that size (an hour per 128k tokens).
            assert config.request_timeout_s == max(600.0, 3600.0 * cap / 128_000)
            # Streamed (the default), a call waits that long only without streaming; a stream
            # waits at most the SDKs' own 10 minutes for its next chunk.
            assert config.stream and config.read_timeout_s == 600.0
            assert replace(config, stream=False).read_timeout_s == config.request_timeout_s
            _ask(models.build_provider(config))  # type: ignore[arg-type]
    bodies = [s.body.get("generationConfig", s.body) for s in server.requests]
    assert [body[field] for body in bodies] == [cap for _, cap in SHIPPED_CAPS[wire]]


@pytest.mark.parametrize("kind", [*WIRES, "openai-compatible"])
def test_an_answer_cut_at_the_cap_gets_its_own_zero_reason(project: pytest.Pytester, kind: str) -> None:
    wire = "openai" if kind == "openai-compatible" else kind
    _need_sdk(wire)
    with FakeProvider(wire, solver) as server:
        server.plan.extend([Planned(text=CUT_MID_FENCE, cut=True), Planned(text=CUT_AFTER_BLOCK, cut=True)])
        if kind == "openai-compatible":
            # vLLM's listing: the context length caps prompt and answer together.
            server.models = [{"id": "tiny-llm", "max_model_len": 40960}]
            result = _run(
                project, "--weirdml-model=openai-compatible:tiny-llm", f"--weirdml-base-url={server.base_url}"
            )
            cap = 40960 - 100  # what the 100-token prompt left
        else:
            project.makepyprojecttoml(_config(wire, server))
            result = _run(project, "--weirdml-model=fake")
            cap = 1000
    result.assert_outcomes(passed=1)
    first, second, third = _records(project)
    assert first["score"] == 0.0 and first["zero_reason"] == f"the answer hit the output-token cap ({cap} tokens)"
    for record in (first, second):
        usage = record["usage"]
        assert isinstance(usage, dict)
        assert (usage["stop_reason"], usage["truncated"], usage["max_output_tokens"]) == (STOP_REASONS[wire], True, cap)
    # Cut after a complete block: that block is the script, and it runs.
    assert second["score"] == 1.0 and second["code"] == CORRECT
    assert third["usage"]["truncated"] is False  # type: ignore[index]
    # The model reads the reason as its feedback.
    assert (
        f"Test accuracy: 0.0 (the answer hit the output-token cap ({cap} tokens))"
        in server.requests[1].conversation[-1][1]
    )
    if kind == "openai-compatible":
        assert server.listings == ["/v1/models"] * len(server.listings) and 1 <= len(server.listings) <= 2
        assert all("max_tokens" not in s.body for s in server.requests)


def _compatible(server: FakeProvider, **settings: object) -> ProviderModel:
    config = ModelConfig(
        name="openai-compatible:tiny-llm",
        provider="openai-compatible",
        model="tiny-llm",
        base_url=server.base_url,
        **{"timeout_s": 5.0, "retry_initial_s": 0.01, **settings},  # type: ignore[arg-type]
    )
    model = models.build_provider(config)
    assert isinstance(model, ProviderModel)
    return model


def test_openai_compatible_cap_follows_the_server() -> None:
    _need_sdk("openai")
    with FakeProvider("openai", lambda c: "fine") as server:
        server.models = [{"id": "other", "max_model_len": 8}, {"id": "tiny-llm", "max_model_len": 40960}]
        first, second = _compatible(server), _compatible(server)
        response = _ask(first)
        _ask(second)
        # Asked once for both clients; the answer may fill what the prompt leaves of the context.
        assert server.listings == ["/v1/models"]
        assert first.config.max_output_tokens == 40960 and first.cap_note is None
        assert "max_tokens" not in server.requests[0].body
        assert response.usage.max_output_tokens == 40960 - 100
    with FakeProvider("openai", lambda c: "fine") as server:
        # OpenRouter's listing: an output limit of its own is sent as the cap.
        server.models = [{"id": "tiny-llm", "context_length": 200000, "top_provider": {"max_completion_tokens": 50000}}]
        _ask(_compatible(server))
        # An explicit setting wins, and the server is not asked.
        with FakeProvider("openai", lambda c: "fine") as other:
            other.models = server.models
            _ask(_compatible(other, max_output_tokens=1234))
            assert other.listings == [] and other.requests[0].body["max_tokens"] == 1234
    assert server.requests[0].body["max_tokens"] == 50000


def test_openai_compatible_cap_falls_back_with_a_note(project: pytest.Pytester) -> None:
    _need_sdk("openai")
    with FakeProvider("openai", solver) as server:  # lists no models (404)
        result = _run(project, "--weirdml-model=openai-compatible:tiny-llm", f"--weirdml-base-url={server.base_url}")
        assert {s.body["max_tokens"] for s in server.requests} == {8192}
        note = _compatible(server).cap_note
        assert note is not None and "8192" in note and "--weirdml-max-output-tokens" in note
        result.assert_outcomes(passed=1)
        result.stdout.fnmatch_lines(["*OutputCapWarning*states no output or context limit for tiny-llm*8192*"])
        server.requests.clear()
        # The command line wins over the server and over the models config.
        project.makepyprojecttoml(_config("anthropic", server))
        _run(
            project,
            "--weirdml-model=openai-compatible:tiny-llm",
            f"--weirdml-base-url={server.base_url}",
            "--weirdml-max-output-tokens=777",
        ).assert_outcomes(passed=1)
    assert {s.body["max_tokens"] for s in server.requests} == {777}
    assert Catalog.load(project.path, max_output_tokens=777).lookup("fake").max_output_tokens == 777


# Streaming ------------------------------------------------------------------------------------------


def test_answers_stream_by_default_with_the_usage_of_the_final_chunk(wire: str) -> None:
    usage = Usage(input=12_000, output=3_000, reasoning=1_000, cached=2_000)
    text = "A long answer, streamed in pieces. " * 20
    with FakeProvider(wire, lambda c: text, usage=usage) as server:
        response = _ask(_model(wire, server, price_input=2.0, price_output=8.0, price_cached_input=0.5))
        whole = _ask(_model(wire, server, stream=False))
    assert [s.stream for s in server.requests] == [True, False]
    assert response.text == whole.text == text
    # The same record fields as from a whole answer.
    for got in (response.usage, whole.usage):
        assert (got.input_tokens, got.cached_tokens, got.output_tokens, got.reasoning_tokens) == (
            12_000,
            2_000,
            3_000,
            1_000,
        )
        assert (got.stop_reason, got.truncated, got.retries) == (
            {"anthropic": "end_turn", "openai": "stop", "google": "STOP"}[wire],
            False,
            (),
        )
    assert response.usage.cost_usd == pytest.approx((10_000 * 2.0 + 2_000 * 0.5 + 3_000 * 8.0) / 1e6)
    if wire == "openai":
        assert server.requests[0].body["stream_options"] == {"include_usage": True}


def test_a_stream_cut_at_the_cap_is_truncated_as_a_whole_answer_is(wire: str) -> None:
    with FakeProvider(wire) as server:
        server.plan.append(Planned(text=CUT_MID_FENCE, cut=True))
        response = _ask(_model(wire, server))
    assert server.requests[0].stream and response.text == CUT_MID_FENCE
    assert (response.usage.stop_reason, response.usage.truncated) == (STOP_REASONS[wire], True)


def test_a_stream_cut_halfway_is_retried_and_recorded(wire: str) -> None:
    text = "Here is the whole answer, and it is long enough to be cut in the middle. " * 4
    with FakeProvider(wire, lambda c: text) as server:
        server.plan.append(Planned(cut_stream=True))
        response = _ask(_model(wire, server, []))
    assert response.text == text and len(server.requests) == 2 and all(s.stream for s in server.requests)
    (retry,) = response.usage.retries
    assert retry["attempt"] == 1
    assert re.fullmatch(r"stream cut mid-answer after \d+ characters: connection error: .+", retry["error"]), retry
    received = int(retry["error"].split(" after ")[1].split()[0])
    assert 0 < received < len(text)


def test_the_read_timeout_is_between_chunks_not_for_the_whole_answer(wire: str) -> None:
    with FakeProvider(wire, lambda c: "fine, after a while") as server:
        # About ten pauses of 0.3 s: the whole answer takes longer than the timeout, no gap does.
        server.plan.append(Planned(chunk_delay_s=0.3))
        clock = time.monotonic()
        slow = _ask(_model(wire, server, [], timeout_s=0.8))
        assert time.monotonic() - clock > 1.2 and slow.usage.retries == ()
        # A gap longer than the timeout is a timeout, retried.
        server.plan.append(Planned(chunk_delay_s=2.0))
        stalled = _ask(_model(wire, server, [], timeout_s=0.8))
    assert stalled.text == "fine, after a while"
    (retry,) = stalled.usage.retries
    assert "timeout: nothing from the server for 0.8 s" in retry["error"], retry


@pytest.mark.parametrize("kind", [*WIRES, "openai-compatible"])
def test_a_session_streams_and_records_a_cut_stream_as_a_retry(project: pytest.Pytester, kind: str) -> None:
    wire = "openai" if kind == "openai-compatible" else kind
    _need_sdk(wire)
    with FakeProvider(wire, solver) as server:
        server.plan.append(Planned(cut_stream=True))
        if kind == "openai-compatible":
            result = _run(
                project,
                "--weirdml-model=openai-compatible:tiny-llm",
                f"--weirdml-base-url={server.base_url}",
                "--weirdml-max-output-tokens=1000",
            )
        else:
            project.makepyprojecttoml(_config(wire, server))
            result = _run(project, "--weirdml-model=fake")
    result.assert_outcomes(passed=1)
    assert len(server.requests) == 4 and all(s.stream for s in server.requests)
    records = _records(project)
    assert [r["score"] for r in records] == [0.0, records[1]["score"], 1.0]
    (retry,) = records[0]["usage"]["retries"]  # type: ignore[index]
    assert "stream cut mid-answer" in retry["error"] and retry["attempt"] == 1
    assert [r["usage"]["retries"] for r in records[1:]] == [[], []]  # type: ignore[index]
    assert records[0]["usage"]["output_tokens"] == 50  # type: ignore[index]


def test_stream_false_in_the_models_config_turns_streaming_off(project: pytest.Pytester) -> None:
    _need_sdk("openai")
    with FakeProvider("openai", solver) as server:
        project.makepyprojecttoml(_config("openai", server) + "stream = false\n")
        _run(project, "--weirdml-model=fake").assert_outcomes(passed=1)
    assert [s.stream for s in server.requests] == [False] * 3
    assert Catalog.load(project.path).lookup("fake").stream is False
    (project.path / "weirdml.toml").write_text('[models.fake]\nstream = "no"\n')
    with pytest.raises(ValueError, match=r"stream must be bool, got 'no'"):
        Catalog.load(project.path)


# The budget guard ----------------------------------------------------------------------------------


def test_a_session_stops_starting_runs_at_the_cost_cap(project: pytest.Pytester) -> None:
    _need_sdk("anthropic")
    # $0.25 a call (50 output tokens at $5000 per million): a run of 3 calls costs $0.75.
    priced = "price_input = 0.0\nprice_output = 5000.0\n"
    with FakeProvider("anthropic", solver, usage=Usage(input=100, output=50, reasoning=0, cached=0)) as server:
        project.makepyprojecttoml(
            _config("anthropic", server).replace("price_input = 3.0\nprice_output = 15.0\n", priced)
        )
        result = _run(project, "--weirdml-model=fake", "--weirdml-runs=4", "--weirdml-max-cost=1.2", "-rs")
    # Run 0 spent $0.75, under the cap: run 1 started, and brought the spending to $1.50.
    result.assert_outcomes(passed=2, skipped=2)
    assert len(server.requests) == 6
    assert sorted({(r["run"], r["usage"]["cost_usd"]) for r in _records(project)}) == [(0, 0.25), (1, 0.25)]  # type: ignore[index]
    result.stdout.fnmatch_lines(
        [
            "weirdml: the session's spending ($1.5000) reached --weirdml-max-cost=$1.2; 2 item(s) not run: "
            "tiny[[]fake-2], tiny[[]fake-3]",
            "SKIPPED [[]2[]] *not run: the session's spending reached --weirdml-max-cost=$1.2 ($1.5000 spent)",
        ]
    )
    result.stdout.fnmatch_lines(["weirdml status: 4/4 done · elapsed *$1.5000 spent of --weirdml-max-cost=$1.2"])


def test_a_cost_cap_with_unknown_prices_is_a_usage_error(project: pytest.Pytester) -> None:
    _need_sdk("anthropic")
    result = _run(project, "--weirdml-model=reference,claude", "--weirdml-max-cost=5")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "*--weirdml-max-cost=$5 needs every model's prices, and claude (anthropic:claude-sonnet-5-5) has none: "
            'set price_input and price_output (USD per million tokens) under [[]tool.weirdml.models."anthropic:'
            'claude-sonnet-5-5"] in pyproject.toml*'
        ]
    )
    bad = _run(project, "--weirdml-model=reference", "--weirdml-max-cost=nan")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(["*--weirdml-max-cost must be US dollars above 0*'nan'*"])
