#!/usr/bin/env bash
# The GPU machine's check (see benchmarks/gpu_check.py): the Docker sandbox's contract with a GPU
# lease, every reference and every shipped blind run's best script on the GPU, one table.
#   bash benchmarks/gpu_check.sh            # on the GPU machine, after bash scripts/setup.sh
#   bash benchmarks/gpu_check.sh --tiny     # anywhere: local sandbox, no GPU, seconds
set -euo pipefail
cd "$(dirname "$0")/.."
exec python benchmarks/gpu_check.py "$@"
