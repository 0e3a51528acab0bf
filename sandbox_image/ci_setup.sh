#!/bin/sh
# Make a CI host ready for the docker sandbox: Docker installed, a daemon answering, the
# sandbox image built (offline; reused when its tag is present already). Idempotent.
#
#   sh sandbox_image/ci_setup.sh
#
# Needs root. Output of the daemon: /tmp/dockerd.log. WEIRDML_SKIP_IMAGE=1 stops after the daemon.
set -eu

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(dirname "$HERE")
PYTHON=${WEIRDML_HOST_PYTHON:-python3}

missing=""
command -v dockerd >/dev/null || missing="$missing docker.io"
command -v debootstrap >/dev/null || missing="$missing debootstrap"
if [ -n "$missing" ]; then
    echo "== apt-get install$missing"
    apt-get update -qq
    # shellcheck disable=SC2086
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing
fi
"$PYTHON" -c "import docker" 2>/dev/null || "$PYTHON" -m pip install --quiet "docker>=7.1"

if ! docker info >/dev/null 2>&1; then
    echo "== starting dockerd (log: /tmp/dockerd.log)"
    nohup dockerd >/tmp/dockerd.log 2>&1 &
    tries=0
    until docker info >/dev/null 2>&1; do
        tries=$((tries + 1))
        if [ "$tries" -gt 60 ]; then
            echo "ci_setup.sh: dockerd did not come up in 60 s; its log:" >&2
            tail -n 30 /tmp/dockerd.log >&2
            exit 1
        fi
        sleep 1
    done
fi
echo "== docker daemon: $(docker info --format '{{.ServerVersion}}')"

[ "${WEIRDML_SKIP_IMAGE:-0}" = 1 ] && exit 0
cd "$REPO"
echo "== sandbox image (reused when present)"
"$PYTHON" -m pytest_weirdml.cli image build
