"""The local sandbox's own Python: a virtual environment with exactly the sandbox's packages.

    weirdml env build     # build it unless it is ready (--force rebuilds)
    weirdml env path      # print its interpreter

Scripts must see what the system prompt announces and nothing else, on every backend: the
session's own interpreter holds python-chess, pytest, the provider SDKs and whatever else the
user installed, so a script run on it could import them. The environment is built from the same
requirements list as the Docker image, without pip, under
``$XDG_CACHE_HOME/pytest-weirdml/sandbox-env/<key>``; the key is a hash of that list and of the
base interpreter, so a changed pin builds a new environment and an unchanged one is reused. It
is built once (under a file lock, so xdist workers wait for one build) by ``scripts/setup.sh``,
this command, or the first local sandbox that needs it.

A session's scripts run on the environment for as long as the session lasts, so a rebuild must
not pull it from under them (a script that crashes on a half-built environment would be scored
as the model's 0): every process whose local sandbox uses it holds a shared ``flock`` on
``<env>.use`` until it exits, and a build needs that lock exclusively, so ``--force`` refuses,
naming the holders, while a session runs. (Building a new environment beside the old one and
switching would still need to know when the last session on the old one ended, to delete it, and
would change a session's packages halfway; refusing keeps one environment per session.)

The packages come from the package index pip is configured with (local wheels included): no
other network is needed.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import venv
from collections.abc import Callable
from pathlib import Path

from filelock import FileLock

from pytest_weirdml.errors import SandboxError
from pytest_weirdml.sandbox import cache_home, requirements_hash, requirements_text

BUILD_COMMAND = "weirdml env build"
MARKER = "weirdml-env.json"
REQUIREMENTS_COPY = "weirdml-requirements.txt"


def _base_interpreter() -> str:
    """The real interpreter below any virtual environment the session itself runs in."""
    return os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def env_key(requirements: str | None = None) -> str:
    digest = hashlib.sha256()
    wanted = requirements_hash() if requirements is None else _digest(requirements)
    for part in (wanted, _base_interpreter(), sys.version):
        digest.update(part.encode() + b"\0")
    return digest.hexdigest()[:16]


def env_dir(root: Path | None = None, requirements: str | None = None) -> Path:
    return (root or cache_home() / "sandbox-env") / env_key(requirements)


def interpreter(env: Path) -> Path:
    return env / "bin" / "python"


def problem(env: Path, requirements: str | None = None) -> str | None:
    """Why ``env`` cannot be used as it is (missing, half-built, stale), or None when it is ready."""
    wanted = requirements_hash() if requirements is None else _digest(requirements)
    try:
        marker = json.loads((env / MARKER).read_text())
    except FileNotFoundError:
        return f"the local sandbox's environment {env} is not built"
    except (OSError, ValueError):
        return f"the local sandbox's environment {env} is damaged (unreadable {MARKER})"
    if marker.get("key") != env.name or marker.get("requirements_sha256") != wanted:
        return f"the local sandbox's environment {env} is stale (built from another requirements list)"
    python = interpreter(env)
    if not os.path.exists(os.path.realpath(python)):
        return f"the local sandbox's environment {env} is stale (its base interpreter is gone)"
    return None


def _say(line: str) -> None:
    sys.stderr.write(f"weirdml: {line}\n")
    sys.stderr.flush()


def ensure(
    root: Path | None = None,
    *,
    force: bool = False,
    requirements: str | None = None,
    progress: Callable[[str], None] = _say,
    hold: bool = False,
) -> Path:
    """The environment's interpreter, building the environment first when it is not ready.

    ``requirements`` replaces the sandbox's list (tests build small environments). ``hold``: this
    process runs scripts on it, and holds it until it exits (no build may replace it meanwhile).
    Raises ``SandboxError`` naming the build command when it cannot be built, and when a build
    is needed while a session uses the environment.
    """
    env = env_dir(root, requirements)
    if force or problem(env, requirements) is not None:
        env.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(str(env) + ".lock"):
            why = problem(env, requirements)
            if force or why is not None:
                _build_unused(env, requirements, why, progress)
    if hold:
        # Shared: every session may hold it; waits while a build (exclusive) is under way.
        fcntl.flock(_use_fd(env), fcntl.LOCK_SH)
        why = problem(env, requirements)
        if why is not None:  # the build it waited for failed
            raise SandboxError(f"{why}; build it with `{BUILD_COMMAND}`")
    return interpreter(env)


# The environments this process holds (a descriptor each, open until the process exits).
_HELD: dict[Path, int] = {}


def _use_fd(env: Path) -> int:
    if env not in _HELD:
        path = env.with_name(env.name + ".use")
        _HELD[env] = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    return _HELD[env]


def _build_unused(env: Path, requirements: str | None, why: str | None, progress: Callable[[str], None]) -> None:
    """Build ``env`` holding its use lock exclusively; refuse while a session holds it."""
    path = env.with_name(env.name + ".use")
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise SandboxError(
                f"the local sandbox's environment {env} is in use by a running session ({_holders(fd)}), "
                "whose scripts run on it: it is not rebuilt under them; run "
                f"`{BUILD_COMMAND}{' --force' if why is None else ''}` once no session uses it"
            ) from None
        progress(
            f"{why or 'rebuilding ' + str(env)}; building it now (once, a few minutes; `{BUILD_COMMAND}` does the same)"
        )
        _build(env, requirements_text() if requirements is None else requirements)
        progress(f"the local sandbox's environment is ready: {interpreter(env)}")
    finally:
        os.close(fd)


def _holders(fd: int) -> str:
    """The processes holding a lock on the file open as ``fd`` (from /proc/locks), as words."""
    info = os.fstat(fd)
    wanted = f"{os.major(info.st_dev):02x}:{os.minor(info.st_dev):02x}:{info.st_ino}"
    try:
        lines = Path("/proc/locks").read_text().splitlines()
    except OSError:
        lines = []
    pids = sorted({int(f[4]) for f in (line.split() for line in lines) if len(f) > 5 and f[5] == wanted})
    return f"pid {', '.join(map(str, pids))}" if pids else "another process"


def _build(env: Path, requirements: str) -> None:
    shutil.rmtree(env, ignore_errors=True)
    # No pip, no setuptools of its own: a script sees the announced packages and their dependencies.
    venv.EnvBuilder(with_pip=False, symlinks=True, clear=True).create(env)
    (env / REQUIREMENTS_COPY).write_text(requirements, encoding="utf-8")
    if any(line.split("#", 1)[0].strip() for line in requirements.splitlines()):
        _pip_install(env)
    marker = {"key": env.name, "requirements_sha256": _digest(requirements), "base": _base_interpreter()}
    # Written last: an environment without it is half-built and is built again.
    (env / MARKER).write_text(json.dumps(marker), encoding="utf-8")


def _pip_install(env: Path) -> None:
    # The session's pip installs into it (pip's configuration applies: local wheels, an index).
    cmd = [
        sys.executable, "-m", "pip", "--python", str(interpreter(env)), "install",
        "--quiet", "--disable-pip-version-check", "--no-input", "--no-warn-script-location",
        "-r", str(env / REQUIREMENTS_COPY),
    ]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        shutil.rmtree(env, ignore_errors=True)
        raise SandboxError(
            f"building the local sandbox's environment failed (pip exit {proc.returncode}): "
            f"{(proc.stderr or proc.stdout).strip()[-1500:]}\nRetry with `{BUILD_COMMAND}` once pip can "
            "reach its package index, or pass --weirdml-python=PATH (an interpreter with the packages)"
        )
