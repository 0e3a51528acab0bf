#!/usr/bin/env bash
# Prepares a fresh Debian machine for pytest-weirdml, and is safe to run again:
#   - system packages: bubblewrap (the local sandbox), Fashion-MNIST, stockfish and WordNet (task data),
#     chromium (the HTML report's browser test), docker.io and debootstrap (the Docker sandbox),
#     tmux (the live status line's and the human model's terminal tests) and vim-tiny (the latter's);
#   - the sandbox's pinned packages (pytest_weirdml/sandbox/recipe/requirements.txt) and the plugin with its extras;
#   - the local sandbox's own Python environment: exactly those packages, in a virtual environment
#     under ~/.cache/pytest-weirdml/sandbox-env (reused while the list is unchanged);
#   - the Docker daemon and the sandbox image, built offline when no registry is reachable.
# Set WEIRDML_SETUP_DOCKER=0 to skip the Docker part (the local sandbox needs none of it).
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo"
APT_PACKAGES=(bubblewrap dataset-fashion-mnist stockfish wordnet-base chromium docker.io debootstrap tmux vim-tiny)
if ! dpkg -s "${APT_PACKAGES[@]}" >/dev/null 2>&1; then
    $SUDO apt-get update -q
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${APT_PACKAGES[@]}"
fi

PYTHON="${PYTHON:-python3}"
"$PYTHON" -m pip install -q -r pytest_weirdml/sandbox/recipe/requirements.txt
"$PYTHON" -m pip install -q -e ".[dev,tasks,report,providers]"
"$PYTHON" -m pytest_weirdml.cli env build

if [ "${WEIRDML_SETUP_DOCKER:-1}" != "0" ] && [ -f sandbox_image/ci_setup.sh ]; then
    bash sandbox_image/ci_setup.sh
fi
