"""The Docker sandbox's image: its tag, whether it is present, and how to build it.

    weirdml image build               # offline: debootstrap + the host's pip
    weirdml image build --dockerfile  # from a registry (GPU hosts)
    weirdml image tag                 # print the tag the plugin uses
    weirdml image check               # is it built?

The tag is a hash of the recipe
(the pinned requirements and the files that build them, package data in ``recipe/``), so a
changed pin means a new image and an unchanged one is reused, whichever way it was built.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
from importlib import resources
from typing import Any

from pytest_weirdml.errors import SandboxError
from pytest_weirdml.sandbox import recipe

IMAGE_REPOSITORY = "weirdml-sandbox"
RECIPE_FILES = ("requirements.txt", "Dockerfile", "build_offline.sh")
BUILD_COMMAND = "weirdml image build"


def image_tag() -> str:
    digest = hashlib.sha256()
    files = recipe()
    for name in RECIPE_FILES:
        path = files.joinpath(name)
        digest.update(name.encode() + b"\0")
        if path.is_file():
            digest.update(path.read_bytes())
    return f"{IMAGE_REPOSITORY}:{digest.hexdigest()[:12]}"


def image_present(client: Any, tag: str) -> bool:
    import docker.errors

    try:
        client.api.inspect_image(tag)
    except docker.errors.ImageNotFound:
        return False
    except docker.errors.DockerException as exc:
        raise SandboxError(f"the Docker daemon did not answer about image {tag}: {exc}") from exc
    return True


def missing_image_message(tag: str) -> str:
    return (
        f"the sandbox image {tag} is not built; build it with `{BUILD_COMMAND}` "
        "(or pass --weirdml-build-image), or use --weirdml-sandbox=local"
    )


def build(client: Any, *, tag: str | None = None, dockerfile: bool = False, force: bool = False) -> str:
    """Build the image unless it is there already (or ``force``); returns its tag.

    ``client`` is a connected Docker client (``sandbox.docker.connect()``). The build's own
    output goes to this process's stderr. Raises ``SandboxError`` on failure.
    """
    tag = tag or image_tag()
    if not force and image_present(client, tag):
        return tag
    # The recipe as real files: docker build needs a context directory, sh a script path.
    with resources.as_file(recipe()) as recipe_dir:
        if dockerfile:
            cmd = ["docker", "build", "--tag", tag, str(recipe_dir)]
        else:
            cmd = ["sh", str(recipe_dir / "build_offline.sh"), tag, str(recipe_dir / "requirements.txt")]
        try:
            proc = subprocess.run(cmd, stdout=sys.stderr, stderr=sys.stderr, check=False)
        except OSError as exc:
            raise SandboxError(f"could not run {cmd[0]}: {exc}") from exc
    if proc.returncode != 0 or not image_present(client, tag):
        raise SandboxError(f"building the sandbox image {tag} failed (exit {proc.returncode}): {' '.join(cmd)}")
    return tag
