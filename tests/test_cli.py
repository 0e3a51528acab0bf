"""The ``weirdml`` command, the session header, and plug-ins registered from a conftest.py."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_weirdml.cli import main as weirdml
from pytest_weirdml.sandbox import BACKENDS, requirement_names, requirements_text
from pytest_weirdml.sandbox.image import image_tag

ROOT = Path(__file__).resolve().parents[1]


def test_tasks_path_names_the_bundled_tasks(capsys: pytest.CaptureFixture[str]) -> None:
    assert weirdml(["tasks-path"]) == 0
    path = Path(capsys.readouterr().out.strip())
    assert sorted(p.parent.name for p in path.glob("*/task.toml")) == sorted(
        p.parent.name for p in (ROOT / "tasks").glob("*/task.toml")
    )


def test_models_lists_aliases_prices_and_keys_without_values(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-never-printed-123456")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert weirdml(["models", "--rootdir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    lines = [line.split() for line in out.splitlines()]
    assert ["claude", "anthropic:claude-sonnet-5-5", "cost", "unknown"] in lines
    assert any(line[:2] == ["gpt", "openai:gpt-6.2-astra"] for line in lines)
    assert any(line[:2] == ["gemini", "google:gemini-4-argon"] for line in lines)
    retiring = next(line for line in out.splitlines() if "anthropic:claude-sonnet-4-5" in line)
    assert "(checked 2025-11)" in retiring and "retires 2026-11-30, use anthropic:claude-sonnet-5-5" in retiring
    assert "anthropic: ANTHROPIC_API_KEY is set" in out and "openai: not set (OPENAI_API_KEY)" in out
    assert "openai-compatible: needs none" in out
    assert "sk-never-printed" not in out


def test_image_tag_hashes_the_packaged_recipe(capsys: pytest.CaptureFixture[str]) -> None:
    assert weirdml(["image", "tag"]) == 0
    assert capsys.readouterr().out.strip() == image_tag()
    # The pointer left in sandbox_image/ leads pip to the same list.
    assert (
        "-r ../pytest_weirdml/sandbox/recipe/requirements.txt" in (ROOT / "sandbox_image/requirements.txt").read_text()
    )
    assert requirement_names() == ["numpy", "scipy", "pandas", "scikit-learn", "torch", "pillow"]
    assert "torch==" in requirements_text()


def test_report_command_names_a_directory_without_records(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pytest_weirdml.cli", "report", str(tmp_path / "nope"), "-o", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 2 and "nope/records.jsonl: no records; pass a session directory" in done.stderr


def test_session_header_says_what_runs_where(pytester: pytest.Pytester, tiny: Path, base_args: list[str]) -> None:
    result = pytester.runpytest("--weirdml-model=reference", "--weirdml-runs=1", "--collect-only", *base_args)
    result.stdout.fnmatch_lines(
        [
            "weirdml: pytest-weirdml *, protocol *",
            "weirdml models: reference",
            "weirdml sandbox: local, scripts run by the sandbox's own environment (*/sandbox-env/*)",
            "weirdml hardware: no GPU; * CPU cores, 1 script(s) at once with * core(s) each (1 worker(s))",
            f"weirdml session: {pytester.path / 'reports'}/*",
        ]
    )


@pytest.fixture
def forget_loud() -> Iterator[None]:
    """The registry outlives an in-process session: take the test's backend out again."""
    yield
    BACKENDS.discard("loud")


@pytest.mark.usefixtures("forget_loud")
def test_a_conftest_registers_its_own_sandbox_backend(
    pytester: pytest.Pytester, tiny: Path, base_args: list[str]
) -> None:
    pytester.makeconftest(
        """
        from pytest_weirdml.sandbox import BACKENDS
        from pytest_weirdml.sandbox.local import LocalSandbox

        class Loud(LocalSandbox):
            name = "loud"

        BACKENDS.add("loud", lambda *, python=None: Loud(python))
        """
    )
    result = pytester.runpytest("--weirdml-model=reference", "--weirdml-runs=1", "--weirdml-sandbox=loud", *base_args)
    result.assert_outcomes(passed=1)
    assert '"sandbox": "loud"' in next((pytester.path / "reports").iterdir()).joinpath("records.jsonl").read_text()
    bad = pytester.runpytest("--weirdml-model=reference", "--weirdml-sandbox=nowhere", *base_args)
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(
        ["*--weirdml-sandbox: unknown sandbox 'nowhere'; choose one of auto, docker, local, loud*"]
    )
