#!/usr/bin/env bash
# CI: the plugin as a user installs it. Build the wheel from this checkout's files, install it
# (not editable) into a fresh virtual environment, and from an empty directory run the bundled
# shapes_easy task with the baseline model, the way the README says:
#     pytest "$(weirdml tasks-path)" --weirdml-model=baseline
# The reports must land in that directory, and the sandbox recipe must come from the wheel.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
PYTHON="${PYTHON:-python3}"
# The real interpreter, not a version manager's shim: the sandbox runs it under bubblewrap.
HOST_PYTHON=$("$PYTHON" -c 'import sys; print(sys.executable)')
WORK=$(mktemp -d /tmp/weirdml-wheel.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

echo "== wheel"
# Only the files git knows (tracked or new, not ignored): no build/, caches or reports.
mkdir "$WORK/src"
git ls-files -z --cached --others --exclude-standard | while IFS= read -r -d '' f; do
    [ -e "$f" ] && printf '%s\0' "$f"
done | xargs -0 cp --parents -t "$WORK/src"
"$PYTHON" -m pip wheel --no-deps --no-build-isolation --quiet --wheel-dir "$WORK/dist" "$WORK/src"
WHEEL=$(ls "$WORK"/dist/pytest_weirdml-*.whl)
if "$PYTHON" -m zipfile -l "$WHEEL" | grep -q -e __pycache__ -e '\.pyc '; then
    echo "check_wheel: the wheel holds caches" >&2; exit 1
fi
# Every module of the package and every bundled task is in it (packages are found, not listed).
"$PYTHON" - "$WHEEL" "$WORK/src" <<'PY'
import sys, zipfile
from pathlib import Path
names = set(zipfile.ZipFile(sys.argv[1]).namelist())
src = Path(sys.argv[2])
modules = {p.relative_to(src).as_posix() for p in (src / "pytest_weirdml").rglob("*.py")}
tasks = {f"pytest_weirdml/bundled_tasks/{p.relative_to(src / 'tasks').as_posix()}" for p in src.glob("tasks/*/task.toml")}
missing = sorted((modules | tasks) - names)
assert not missing, f"check_wheel: the wheel lacks {missing}"
assert "pytest_weirdml/sandbox/contract/__init__.py" in names and tasks, (len(modules), len(tasks))
print(f"the wheel holds all {len(modules)} modules and {len(tasks)} bundled tasks")
PY

echo "== fresh virtual environment: $(basename "$WHEEL")"
"$PYTHON" -m venv "$WORK/venv"
"$WORK/venv/bin/python" -m pip install --quiet --disable-pip-version-check "$WHEEL"
BIN=$WORK/venv/bin

mkdir "$WORK/empty"
cd "$WORK/empty"
TASKS=$("$BIN/weirdml" tasks-path)
case "$TASKS" in
    "$WORK/venv/"*) echo "bundled tasks: $TASKS" ;;
    *) echo "check_wheel: weirdml tasks-path is not inside the environment: $TASKS" >&2; exit 1 ;;
esac
TAG=$("$BIN/weirdml" image tag)
EXPECTED=$(cd "$REPO" && PYTHONPATH="$REPO" "$PYTHON" -m pytest_weirdml.cli image tag)
[ "$TAG" = "$EXPECTED" ] || { echo "check_wheel: image tag $TAG, the checkout's is $EXPECTED" >&2; exit 1; }
echo "sandbox image tag from the wheel's recipe: $TAG"

echo "== weirdml check-task (the build checks of a bundled task, from the wheel)"
"$BIN/weirdml" check-task "$TASKS/shapes_easy" --only build --cache "$WORK/cache"
# Without the check extra, the leak checks say what to install instead of failing obscurely.
if "$BIN/weirdml" check-task "$TASKS/shapes_easy" --only leaks --cache "$WORK/cache" >"$WORK/leaks.txt"; then
    echo "check_wheel: the leak checks passed without scikit-learn" >&2; exit 1
fi
grep -q "pytest-weirdml\[check\]" "$WORK/leaks.txt" || { cat "$WORK/leaks.txt" >&2; exit 1; }

echo "== the sandbox contract suite, imported from the wheel, against the local backend"
# What the README tells a plugin author to write: one import in a test module.
"$BIN/python" -c "import pytest_weirdml.sandbox.contract as c; assert c.__file__.startswith('$WORK/venv/'), c.__file__"
mkdir "$WORK/contract"
cat >"$WORK/contract/test_contract_local.py" <<'PY'
from pytest_weirdml.sandbox.contract import *  # noqa: F403

WEIRDML_CONTRACT_BACKENDS = ["local"]
PY
(cd "$WORK/contract" && "$BIN/pytest" -q -rs -p no:cacheprovider test_contract_local.py)

echo "== pytest \"\$(weirdml tasks-path)\" -k shapes_easy --weirdml-model=baseline"
# The prompts' example scripts import torch, which the fresh environment lacks (nothing but the
# plugin is installed there): the local sandbox runs them with the host interpreter, which
# scripts/setup.sh gave the sandbox's packages.
"$BIN/pytest" "$TASKS" -k shapes_easy --weirdml-model=baseline --weirdml-runs=1 \
    --weirdml-python="$HOST_PYTHON" --weirdml-data-cache="$WORK/cache"
SUMMARY=$(ls reports/*/summary.json)
"$BIN/python" - "$SUMMARY" <<'PY'
import json, sys
summary = json.load(open(sys.argv[1]))
runs = summary["runs"]
assert [(r["task"], r["model"], r["status"]) for r in runs] == [("shapes_easy", "baseline", "finished")], runs
assert summary["errors"] == [] and summary["published_tasks"] == ["shapes_easy"], summary
print(f"{sys.argv[1]}: shapes_easy baseline scored {runs[0]['score']:.3f}")
PY
echo "== the wheel works"
