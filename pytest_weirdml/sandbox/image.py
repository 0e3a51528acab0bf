"""The Docker sandbox's image: its tag, whether it is present, and how to build it.

    python -m pytest_weirdml.sandbox.image build               # offline: debootstrap + host pip
    python -m pytest_weirdml.sandbox.image build --dockerfile  # from a registry (GPU hosts)
    python -m pytest_weirdml.sandbox.image tag                 # print the tag the plugin uses

The tag is a hash of the recipe (the pinned requirements and the files that build them), so a
changed pin means a new image and an unchanged one is reused, whichever way it was built.
"""

from __future__ import annotations

import argparse
import hashlib
import subprocess
import sys
from pathlib import Path
from typing import Any

from pytest_weirdml.errors import SandboxError
from pytest_weirdml.sandbox import REQUIREMENTS_FILE

IMAGE_DIR = REQUIREMENTS_FILE.parent
IMAGE_REPOSITORY = "weirdml-sandbox"
RECIPE_FILES = ("requirements.txt", "Dockerfile", "build_offline.sh")
BUILD_COMMAND = "python -m pytest_weirdml.sandbox.image build"


def image_tag(image_dir: Path = IMAGE_DIR) -> str:
    digest = hashlib.sha256()
    for name in RECIPE_FILES:
        path = image_dir / name
        digest.update(name.encode() + b"\0")
        if path.exists():
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


def build(*, tag: str | None = None, dockerfile: bool = False, force: bool = False, client: Any = None) -> str:
    """Build the image unless it is there already (or ``force``); returns its tag.

    The build's own output goes to this process's stderr. Raises ``SandboxError`` on failure.
    """
    tag = tag or image_tag()
    if client is None:
        from pytest_weirdml.sandbox.docker import connect

        client = connect()
    if not force and image_present(client, tag):
        return tag
    if dockerfile:
        cmd = ["docker", "build", "--tag", tag, str(IMAGE_DIR)]
    else:
        cmd = ["sh", str(IMAGE_DIR / "build_offline.sh"), tag, str(IMAGE_DIR / "requirements.txt")]
    try:
        proc = subprocess.run(cmd, stdout=sys.stderr, stderr=sys.stderr, check=False)
    except OSError as exc:
        raise SandboxError(f"could not run {cmd[0]}: {exc}") from exc
    if proc.returncode != 0 or not image_present(client, tag):
        raise SandboxError(f"building the sandbox image {tag} failed (exit {proc.returncode}): {' '.join(cmd)}")
    return tag


def build_before_session() -> None:
    """``--weirdml-build-image``: build (or find) the image; a failure stops the session."""
    import pytest

    try:
        tag = build()
    except SandboxError as exc:
        raise pytest.UsageError(f"--weirdml-build-image: {exc}") from None
    sys.stderr.write(f"weirdml: sandbox image {tag} is ready\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pytest_weirdml.sandbox.image", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    build_cmd = sub.add_parser("build", help="build the image unless it is present (offline by default)")
    build_cmd.add_argument("--dockerfile", action="store_true", help="docker build from sandbox_image/Dockerfile")
    build_cmd.add_argument("--force", action="store_true", help="rebuild even when the tag is present")
    sub.add_parser("tag", help="print the tag the docker sandbox uses")
    args = parser.parse_args(argv)
    if args.command == "tag":
        print(image_tag())
        return 0
    try:
        print(build(dockerfile=args.dockerfile, force=args.force))
    except SandboxError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
