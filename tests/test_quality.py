"""The project's own code stays lint-clean (ruff), type-clean (mypy) and layered: no import
circles, and report/ free of pytest."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    "command",
    [
        ["ruff", "check", "pytest_weirdml", "tests", "tools", "benchmarks", "tasks"],
        ["ruff", "format", "--check", "pytest_weirdml"],
        [sys.executable, "-m", "mypy"],
    ],
    ids=["ruff-check", "ruff-format", "mypy"],
)
def test_code_quality(command: list[str]) -> None:
    if command[0] == "ruff" and shutil.which("ruff") is None:
        pytest.fail("ruff is not installed: pip install -e '.[dev]'")
    proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _imports(path: Path, modules: set[str]) -> set[str]:
    """The package modules a module imports, at any depth of its code, except for type checking
    and its ``if __name__ == "__main__":`` block (a script's entry, not a dependency)."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and (
                "TYPE_CHECKING" in ast.unparse(child.test) or "__name__" in ast.unparse(child.test)
            ):
                for other in child.orelse:
                    visit(other)
                continue
            if isinstance(child, ast.Import):
                found.update(alias.name for alias in child.names)
            elif isinstance(child, ast.ImportFrom) and child.module and child.level == 0:
                for alias in child.names:
                    full = f"{child.module}.{alias.name}"
                    found.add(full if full in modules else child.module)
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    return found


def _package_modules() -> dict[str, Path]:
    modules = {}
    for path in (ROOT / "pytest_weirdml").rglob("*.py"):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def test_no_import_circles_and_report_is_free_of_pytest() -> None:
    modules = _package_modules()
    names = set(modules)
    raw = {name: _imports(path, names) for name, path in modules.items()}
    graph = {name: {m for m in found if m in names and m != name} for name, found in raw.items()}
    cycles: list[list[str]] = []
    state: dict[str, int] = {}
    stack: list[str] = []

    def walk(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append([*stack[stack.index(nxt) :], nxt])
            elif nxt not in state:
                walk(nxt)
        stack.pop()
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            walk(name)
    assert cycles == [], "import circles: " + "; ".join(" -> ".join(c) for c in cycles)
    # report/ is pure: nothing it imports, directly or through the package, imports pytest.
    for name in (n for n in names if n.startswith("pytest_weirdml.report")):
        seen, todo = set(), [name]
        while todo:
            current = todo.pop()
            if current in seen:
                continue
            seen.add(current)
            assert not any(m == "pytest" or m.startswith(("pytest.", "_pytest")) for m in raw[current]), (
                f"{name} reaches pytest through {current}"
            )
            todo.extend(graph[current])
