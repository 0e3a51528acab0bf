#!/bin/sh
# Build the sandbox image without a registry: a Debian bookworm rootfs from debootstrap, the
# pinned packages installed into it by this host's pip, imported with `docker import`.
#
#   sandbox_image/build_offline.sh TAG [REQUIREMENTS]
#
# Usually called through `python -m pytest_weirdml.sandbox.image build`, which picks TAG.
# Environment:
#   WEIRDML_DEBIAN_MIRROR  Debian mirror for debootstrap (default http://deb.debian.org/debian)
#   WEIRDML_ROOTFS_CACHE   where the bare rootfs tarball is kept between builds (default
#                          /var/cache/weirdml); debootstrap runs only when it is missing
#   WEIRDML_HOST_PYTHON    the interpreter whose pip installs the packages (default python3); it
#                          must be CPython 3.11 like the rootfs, so its wheels fit
set -eu

TAG=${1:?usage: build_offline.sh TAG [REQUIREMENTS]}
HERE=$(cd "$(dirname "$0")" && pwd)
REQUIREMENTS=${2:-$HERE/requirements.txt}
MIRROR=${WEIRDML_DEBIAN_MIRROR:-http://deb.debian.org/debian}
CACHE=${WEIRDML_ROOTFS_CACHE:-/var/cache/weirdml}
PYTHON=${WEIRDML_HOST_PYTHON:-python3}
SUITE=bookworm
INCLUDE=python3
SANDBOX_UID=1000

[ "$(id -u)" -eq 0 ] || { echo "build_offline.sh: debootstrap needs root" >&2; exit 2; }
command -v debootstrap >/dev/null || { echo "build_offline.sh: apt-get install debootstrap" >&2; exit 2; }
"$PYTHON" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' || {
    echo "build_offline.sh: $PYTHON is not Python 3.11 (the rootfs's); set WEIRDML_HOST_PYTHON" >&2; exit 2; }

WORK=$(mktemp -d /var/tmp/weirdml-image.XXXXXX)
trap 'rm -rf "$WORK"' EXIT INT TERM
ROOT=$WORK/rootfs
mkdir "$ROOT"

BASE_TAR=$CACHE/$SUITE-minbase-$INCLUDE.tar
if [ -s "$BASE_TAR" ]; then
    echo "== rootfs: reusing $BASE_TAR"
    tar -C "$ROOT" -xf "$BASE_TAR"
else
    echo "== rootfs: debootstrap $SUITE from $MIRROR"
    debootstrap --variant=minbase --include="$INCLUDE" "$SUITE" "$ROOT" "$MIRROR"
    rm -rf "$ROOT"/var/cache/apt/archives/*.deb "$ROOT"/var/lib/apt/lists/*
    if mkdir -p "$CACHE" 2>/dev/null; then
        tar -C "$ROOT" -cf "$BASE_TAR.partial" . && mv "$BASE_TAR.partial" "$BASE_TAR"
    fi
fi

echo "== packages: $REQUIREMENTS"
# The rootfs's python3 reads /usr/local/lib/python3.11/dist-packages; the host's pip (and its
# config: local wheels, constraints) fills it, so nothing is fetched that is already here.
SITE=$ROOT/usr/local/lib/python3.11/dist-packages
"$PYTHON" -m pip install --quiet --no-warn-conflicts --disable-pip-version-check \
    --root-user-action=ignore --target "$SITE" -r "$REQUIREMENTS"
rm -rf "$SITE/bin"
chroot "$ROOT" python3 -c "import numpy, scipy, pandas, sklearn, torch, PIL"

# Scripts run as an unprivileged user with nothing to write but /tmp and results/.
echo "sandbox:x:$SANDBOX_UID:$SANDBOX_UID:WeirdML sandbox:/tmp:/usr/sbin/nologin" >>"$ROOT/etc/passwd"
echo "sandbox:x:$SANDBOX_UID:" >>"$ROOT/etc/group"
mkdir -p "$ROOT/sandbox"
rm -rf "$ROOT"/usr/share/doc/* "$ROOT"/usr/share/man/* "$ROOT"/usr/share/locale/*

echo "== import: $TAG"
tar -C "$ROOT" -c . | docker import \
    --change "USER $SANDBOX_UID:$SANDBOX_UID" \
    --change "WORKDIR /sandbox" \
    --change "ENV LANG=C.UTF-8 HOME=/tmp PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 MPLBACKEND=Agg" \
    --change "LABEL weirdml.sandbox.recipe=offline" \
    --change 'CMD ["python3"]' \
    - "$TAG"
echo "== built $TAG"
