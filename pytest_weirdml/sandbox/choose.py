"""``--weirdml-sandbox`` NAME -> a ready backend: a name of ``BACKENDS``, or ``auto``."""

from __future__ import annotations

import warnings

from pytest_weirdml.errors import SandboxError
from pytest_weirdml.sandbox import BACKENDS, Sandbox

AUTO = "auto"


class SandboxFallbackWarning(UserWarning):
    """``--weirdml-sandbox=auto`` found no usable Docker sandbox and runs scripts locally."""


def sandbox_names() -> list[str]:
    return [AUTO, *sorted(BACKENDS.names())]


def open_sandbox(name: str, *, python: str | None = None) -> Sandbox:
    """Open the backend called ``name``; raises ``SandboxError`` when it cannot work here.

    ``auto`` is the Docker sandbox when a daemon answers and the image is built, else the local
    one, with a ``SandboxFallbackWarning`` saying why.
    """
    if name == AUTO:
        try:
            return open_sandbox("docker")
        except SandboxError as exc:
            warnings.warn(
                f"--weirdml-sandbox=auto: running scripts in the local sandbox, because {exc}",
                SandboxFallbackWarning,
                stacklevel=2,
            )
            return open_sandbox("local", python=python)
    factory = BACKENDS.get(name)
    if factory is None:
        raise SandboxError(f"unknown sandbox {name!r}; choose one of {', '.join(sandbox_names())}")
    return factory(python=python)
