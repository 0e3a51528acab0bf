"""The project's own code stays lint-clean (ruff), type-clean (mypy), layered and small: no
import circles; report/, sandbox/, models/ and loop.py free of pytest; no module over 400 lines,
no function over 80."""

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


# What must never reach pytest, directly or through the package: the pure core.
PYTEST_FREE = ("pytest_weirdml.report", "pytest_weirdml.sandbox", "pytest_weirdml.models", "pytest_weirdml.loop")
# The shipped contract suite is a test suite (pytest is its point); nothing in the harness imports it.
PYTEST_ALLOWED = ("pytest_weirdml.sandbox.contract",)
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 80


def _imports(path: Path, modules: set[str]) -> set[str]:
    """The package modules a module imports, at any depth of its code (``__main__`` blocks
    included: a script's entry is a dependency too), except for type checking."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
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


def _package_modules(root: Path) -> dict[str, Path]:
    modules = {}
    for path in (root / "pytest_weirdml").rglob("*.py"):
        parts = list(path.relative_to(root).with_suffix("").parts)
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def _within(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def layering_problems(root: Path) -> list[str]:
    """Import circles, pytest reached from the pure core, and modules or functions over the limits."""
    modules = _package_modules(root)
    names = set(modules)
    raw = {name: _imports(path, names) for name, path in modules.items()}
    graph = {name: {m for m in found if m in names and m != name} for name, found in raw.items()}
    problems = [f"import circle: {' -> '.join(cycle)}" for cycle in _cycles(graph)]
    for name in sorted(n for n in names if _within(n, PYTEST_FREE) and not _within(n, PYTEST_ALLOWED)):
        seen, todo = set(), [name]
        while todo:
            current = todo.pop()
            if current in seen:
                continue
            seen.add(current)
            if any(m == "pytest" or m.startswith(("pytest.", "_pytest")) for m in raw[current]):
                problems.append(f"{name} reaches pytest through {current}")
                break
            todo.extend(graph[current])
    for name, path in sorted(modules.items()):
        text = path.read_text(encoding="utf-8")
        if text.count("\n") > MAX_MODULE_LINES:
            problems.append(f"{name} has {text.count(chr(10))} lines (at most {MAX_MODULE_LINES})")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    problems.append(f"{name}.{node.name} has {length} lines (at most {MAX_FUNCTION_LINES})")
    return problems


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
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
    return cycles


def test_the_package_is_layered_and_small() -> None:
    assert layering_problems(ROOT) == []


def test_the_layering_check_catches_pytest_in_the_core_a_circle_and_a_long_function(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "pytest_weirdml", tmp_path / "pytest_weirdml", ignore=shutil.ignore_patterns("__pycache__"))
    package = tmp_path / "pytest_weirdml"
    (package / "sandbox" / "extra.py").write_text("import pytest\n")
    (package / "models" / "extra.py").write_text("from _pytest import fixtures\n")
    (package / "loop.py").write_text((package / "loop.py").read_text() + "\nimport pytest_weirdml.sandbox.extra\n")
    # A circle made in a __main__ block counts too.
    (package / "stats.py").write_text(
        (package / "stats.py").read_text() + '\nif __name__ == "__main__":\n    from pytest_weirdml import cli\n'
    )
    (package / "cli.py").write_text((package / "cli.py").read_text() + "\nimport pytest_weirdml.stats\n")
    body = "".join(f"    x{i} = {i}\n" for i in range(85))
    (package / "long.py").write_text(f"def long() -> None:\n{body}")
    problems = layering_problems(tmp_path)
    assert "pytest_weirdml.sandbox.extra reaches pytest through pytest_weirdml.sandbox.extra" in problems
    assert "pytest_weirdml.models.extra reaches pytest through pytest_weirdml.models.extra" in problems
    assert "pytest_weirdml.loop reaches pytest through pytest_weirdml.sandbox.extra" in problems
    assert any(p.startswith("import circle:") and "pytest_weirdml.stats" in p for p in problems), problems
    assert "pytest_weirdml.long.long has 86 lines (at most 80)" in problems
