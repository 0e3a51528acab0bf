"""The local sandbox's own interpreter environment: built once, reused, rebuilt when stale, and
named with the command that builds it when it cannot be built."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_weirdml.errors import SandboxError
from pytest_weirdml.protocol import system_prompt
from pytest_weirdml.sandbox import venv

# Nothing to install: the environment itself, its marker and its reuse are what is tested here.
EMPTY = "# no packages\n"


def test_an_environment_is_built_once_and_reused(tmp_path: Path) -> None:
    said: list[str] = []
    python = venv.ensure(tmp_path, requirements=EMPTY, progress=said.append)
    assert python == venv.interpreter(venv.env_dir(tmp_path, EMPTY))
    assert "is not built; building it now" in said[0] and venv.BUILD_COMMAND in said[0]
    probe = "import sys; print(sys.prefix != sys.base_prefix, any('site-packages' in p for p in sys.path))"
    out = subprocess.run([python, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["True", "True"]
    # pip is not part of it: a script can import nothing but the listed packages.
    assert subprocess.run([python, "-c", "import pip"], capture_output=True).returncode != 0
    again: list[str] = []
    assert venv.ensure(tmp_path, requirements=EMPTY, progress=again.append) == python
    assert again == []


def test_another_list_is_another_environment(tmp_path: Path) -> None:
    first = venv.ensure(tmp_path, requirements=EMPTY, progress=lambda _: None)
    second = venv.ensure(tmp_path, requirements=EMPTY + "# another\n", progress=lambda _: None)
    assert first != second and first.exists() and second.exists()


@pytest.mark.parametrize(
    ("damage", "said"),
    [
        (lambda env: (env / venv.MARKER).unlink(), "is not built"),
        (lambda env: (env / venv.MARKER).write_text("{"), "is damaged"),
        (
            lambda env: (env / venv.MARKER).write_text(json.dumps({"key": env.name, "requirements_sha256": "x"})),
            "is stale (built from another requirements list)",
        ),
    ],
)
def test_a_half_built_or_stale_environment_is_rebuilt(tmp_path: Path, damage, said: str) -> None:  # type: ignore[no-untyped-def]
    python = venv.ensure(tmp_path, requirements=EMPTY, progress=lambda _: None)
    env = python.parent.parent
    damage(env)
    assert said in (venv.problem(env, EMPTY) or "")
    lines: list[str] = []
    assert venv.ensure(tmp_path, requirements=EMPTY, progress=lines.append) == python
    assert said in lines[0] and venv.problem(env, EMPTY) is None


def test_a_failed_build_names_the_command_and_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # pip may use neither an index nor local wheels: the package cannot be found.
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path))
    monkeypatch.setenv("PIP_CONSTRAINT", "")
    wanted = "weirdml-no-such-package==1.0\n"
    with pytest.raises(SandboxError, match=r"(?s)building the local sandbox's environment failed.*weirdml env build"):
        venv.ensure(tmp_path, requirements=wanted, progress=lambda _: None)
    assert not venv.env_dir(tmp_path, wanted).exists()


def test_the_local_sandbox_runs_on_its_own_environment() -> None:
    import warnings

    from pytest_weirdml.sandbox.local import LocalSandbox

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        box = LocalSandbox()
    assert box.dedicated and box.python == str(venv.interpreter(venv.env_dir()))
    printed = subprocess.run(
        [sys.executable, "-m", "pytest_weirdml.cli", "env", "path"], capture_output=True, text=True, check=True
    )
    assert printed.stdout.strip() == box.python
    # --weirdml-python still overrides it.
    assert not LocalSandbox(sys.executable).dedicated


def test_the_chess_data_builds_on_the_host_while_scripts_cannot_import_chess() -> None:
    """python-chess is the data builder's, on the session's interpreter; never the scripts'."""
    pytest.importorskip("chess")
    python = venv.interpreter(venv.env_dir())
    if not python.exists():
        pytest.skip(f"the sandbox environment is not built; {venv.BUILD_COMMAND}")
    assert subprocess.run([python, "-c", "import chess"], capture_output=True).returncode != 0


@pytest.mark.parametrize("fake", ["importable", "broken", "absent"])
def test_an_optional_package_is_announced_only_where_it_imports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake: str
) -> None:
    """torchaudio and torchvision are offered where a matching build imports; the system prompt
    names them only then. A tiny stand-in torchaudio, really installed into a bare environment."""
    import warnings

    from pytest_weirdml.sandbox.local import LocalSandbox
    from pytest_weirdml.sandbox.probe import MissingPackagesWarning

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # no import verdict from another test
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "env")], check=True)
    python = venv.interpreter(tmp_path / "env")
    site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], capture_output=True, text=True
    ).stdout.strip()
    if fake != "absent":
        package = Path(site) / "torchaudio"
        package.mkdir()
        # Like torchvision beside a torch it was not built for: installed, but its import fails.
        body = "raise ImportError('operator torchaudio::stft does not exist')\n" if fake == "broken" else ""
        (package / "__init__.py").write_text(body + "__version__ = '2.13.0'\n")
        info = Path(site) / "torchaudio-2.13.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text("Metadata-Version: 2.1\nName: torchaudio\nVersion: 2.13.0\n")
        (info / "top_level.txt").write_text("torchaudio\n")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        environment = LocalSandbox(str(python)).environment()
    assert ("torchaudio" in environment.packages) == (fake == "importable")
    if fake == "importable":
        assert environment.packages["torchaudio"] == "2.13.0"
    assert "torchvision" not in environment.packages
    told = system_prompt(
        "published",
        device="CPU",
        python=environment.python,
        packages=environment.packages,
        iterations=5,
        time_limit_s=120,
    )
    assert ("torchaudio 2.13.0" in told) == (fake == "importable")
    # The bare environment lacks the required packages, and says so; never the optional ones.
    lacking = [str(w.message) for w in caught if issubclass(w.category, MissingPackagesWarning)]
    assert len(lacking) == 1 and "numpy" in lacking[0]
    assert "torchaudio" not in lacking[0] and "torchvision" not in lacking[0]


HOLDER = """
import sys, time
from pathlib import Path
from pytest_weirdml.sandbox import venv
venv.ensure(Path(sys.argv[1]), requirements=sys.argv[2], hold=True, progress=lambda _: None)
print("holding", flush=True)
time.sleep(600)
"""


def test_a_rebuild_is_refused_while_a_process_holds_the_environment(tmp_path: Path) -> None:
    python = venv.ensure(tmp_path, requirements=EMPTY, progress=lambda _: None)
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path), EMPTY], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "holding\n"
        built: list[str] = []
        with pytest.raises(SandboxError, match=rf"is in use by a running session \(pid {holder.pid}\)"):
            venv.ensure(tmp_path, requirements=EMPTY, force=True, progress=built.append)
        assert built == [] and venv.problem(python.parent.parent, EMPTY) is None
    finally:
        holder.kill()
        holder.wait()
    # Its holder gone, the lock goes with it: the rebuild goes ahead.
    rebuilt: list[str] = []
    assert venv.ensure(tmp_path, requirements=EMPTY, force=True, progress=rebuilt.append) == python
    assert "rebuilding" in rebuilt[0]


def _stand_in_environment(cache: Path) -> Path:
    """A ready environment where a session with XDG_CACHE_HOME=cache looks for the sandbox's own:
    a bare virtual environment marked as built from the real requirements list (nothing installed)."""
    from pytest_weirdml.sandbox import requirements_hash

    env = venv.env_dir(cache / "pytest-weirdml" / "sandbox-env")
    subprocess.run([venv._base_interpreter(), "-m", "venv", "--without-pip", str(env)], check=True)
    marker = {"key": env.name, "requirements_sha256": requirements_hash(), "base": venv._base_interpreter()}
    (env / venv.MARKER).write_text(json.dumps(marker))
    return env


def test_env_build_force_is_refused_while_a_session_runs_on_the_environment(
    pytester: pytest.Pytester, tiny: Path, base_args: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import os
    import time

    from helpers import write_replay

    cache = pytester.path / "xdg-cache"
    env = _stand_in_environment(cache)
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    # A rebuild that is not refused fails at once (no index), instead of fetching the real list.
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(pytester.path))
    replay = write_replay(pytester.path / "slow.json", ["import time\ntime.sleep(60)\n"])
    session = subprocess.Popen(
        [sys.executable, "-m", "pytest", f"--weirdml-model=replay:{replay}", "--weirdml-runs=1", *base_args],
        cwd=pytester.path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )
    try:
        deadline = time.monotonic() + 120
        while not list((pytester.path / "reports").glob("*/records.jsonl")) and time.monotonic() < deadline:
            assert session.poll() is None, "the session ended before its run started"
            time.sleep(0.2)
        cmd = [sys.executable, "-m", "pytest_weirdml.cli", "env", "build", "--force"]
        refused = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        assert refused.returncode == 1, refused.stderr
        assert f"{env} is in use by a running session (pid {session.pid})" in refused.stderr
        assert venv.problem(env) is None, "the environment the session runs on was touched"
    finally:
        session.kill()
        session.wait()
    # The session gone, the rebuild is no longer refused (it starts, and fails here for want of an index).
    rebuilt = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert "building the local sandbox's environment failed" in rebuilt.stderr, rebuilt.stderr
