"""The sandbox registry: a name from ``--weirdml-sandbox`` -> a ready backend."""

from __future__ import annotations

import warnings

from pytest_weirdml.errors import SandboxError
from pytest_weirdml.sandbox import Sandbox

SANDBOX_NAMES = ("auto", "docker", "local")


class SandboxFallbackWarning(UserWarning):
    """``--weirdml-sandbox=auto`` found no usable Docker sandbox and runs scripts locally."""


def open_sandbox(name: str, *, python: str | None = None) -> Sandbox:
    """Open the backend called ``name``; raises ``SandboxError`` when it cannot work here.

    ``auto`` is the Docker sandbox when a daemon answers and the image is built, else the local
    one, with a ``SandboxFallbackWarning`` saying why.
    """
    if name == "local":
        from pytest_weirdml.sandbox.local import LocalSandbox

        return LocalSandbox(python)
    if name == "docker":
        from pytest_weirdml.sandbox.docker import DockerSandbox

        return DockerSandbox()
    if name == "auto":
        try:
            return open_sandbox("docker")
        except SandboxError as exc:
            warnings.warn(
                f"--weirdml-sandbox=auto: running scripts in the local sandbox, because {exc}",
                SandboxFallbackWarning,
                stacklevel=2,
            )
            return open_sandbox("local", python=python)
    raise SandboxError(f"unknown sandbox {name!r}; choose one of {', '.join(SANDBOX_NAMES)}")
