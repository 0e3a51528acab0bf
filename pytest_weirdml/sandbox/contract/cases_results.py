"""What a script leaves in results/ (never followed, never read past its cap), a key in its
output (redacted whole, even across the capture's cut), and the packages on offer (exactly the
announced ones)."""

from __future__ import annotations

import dataclasses
import json
import time
import uuid
from pathlib import Path

import pytest

from pytest_weirdml.sandbox import Sandbox, requirement_pins
from pytest_weirdml.sandbox.contract._fixtures import QUICK, SECRET_ANSWERS, assert_usable, run, verdict

__all__ = [
    "test_a_key_across_the_capture_cut_is_redacted_whole",
    "test_only_the_announced_packages_import",
    "test_predictions_that_are_not_a_regular_file_are_never_read",
    "test_results_replaced_by_a_link_is_never_followed",
    "test_the_system_prompt_lists_what_imports",
    "test_writes_to_results_stop_at_the_cap",
]


PLANTED_KEY = f"sk-planted-{uuid.uuid4().hex}"
NOT_REGULAR = "results/test_preds.txt is {}, not a regular file; write the predictions into a regular file"


LEFTOVERS = {
    "link to a host file": ("import os\nos.symlink('/etc/passwd', 'results/test_preds.txt')", "a symlink"),
    "link to the hidden answers": ("import os\nos.symlink({hidden!r}, 'results/test_preds.txt')", "a symlink"),
    "link to the harness's environment": (
        "import os\nos.symlink('/proc/self/environ', 'results/test_preds.txt')",
        "a symlink",
    ),
    "link to stdin": ("import os\nos.symlink('/dev/stdin', 'results/test_preds.txt')", "a symlink"),
    "FIFO": ("import os\nos.mkfifo('results/test_preds.txt')", "a FIFO (named pipe)"),
    "directory": ("import os\nos.makedirs('results/test_preds.txt/x')", "a directory"),
}


@pytest.mark.parametrize("case", list(LEFTOVERS))
def test_predictions_that_are_not_a_regular_file_are_never_read(
    sandbox: Sandbox, task_dir: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", PLANTED_KEY)
    code, kind = LEFTOVERS[case]
    start = time.monotonic()
    result = run(sandbox, data_dir, code.format(hidden=str(task_dir / "hidden" / "answers.txt")))
    # A FIFO would block a reader for ever; a link to stdin would read the terminal.
    assert time.monotonic() - start < QUICK.time_s + 5
    assert (result.exit_code, result.predictions) == (0, None), result
    assert verdict(result) == NOT_REGULAR.format(kind)
    text = repr(result)
    assert PLANTED_KEY not in text and "root:x:0:0" not in text and SECRET_ANSWERS not in text
    assert_usable(sandbox, data_dir)


def test_results_replaced_by_a_link_is_never_followed(sandbox: Sandbox, data_dir: Path) -> None:
    code = """\
    import os
    for attempt in (lambda: os.rename("results", "elsewhere"), lambda: os.rmdir("results")):
        try:
            attempt()
        except OSError as exc:
            print("refused:", exc.strerror)
    try:
        os.symlink("/etc", "results")
        os.symlink("/etc/passwd", "/etc/test_preds.txt")
    except OSError as exc:
        print("no link:", exc.strerror)
    """
    result = run(sandbox, data_dir, code)
    assert result.predictions is None, result
    # Where results/ is a mount point (tmpfs, bind) it cannot be moved; else the reader refuses the link.
    assert verdict(result) in (
        "no predictions: results/test_preds.txt was not written",
        "results/ is a symlink, not the directory the harness made; nothing in it was read",
        "results/ was removed; write the predictions into the results/ the harness made",
    ), result
    assert "root:x:0:0" not in repr(result)
    assert_usable(sandbox, data_dir)


def test_writes_to_results_stop_at_the_cap(sandbox: Sandbox, data_dir: Path) -> None:
    code = """\
    written = 0
    try:
        for i in range(3):
            with open(f"results/big-{i}.bin", "wb") as fh:
                for _ in range(64):
                    fh.write(b"\\0" * (1 << 20))
                    fh.flush()
                    written += 1 << 20
    except OSError as exc:
        print("stopped after", written >> 20, "MiB:", exc.strerror, flush=True)
        raise
    """
    result = run(sandbox, data_dir, code)
    assert result.results_full, result
    stopped = int(result.output.split("stopped after")[1].split()[0])
    assert stopped <= QUICK.results_bytes >> 20
    assert "No space left on device" in result.output
    assert verdict(result) == (
        f"results/ is full: a script may write at most 4 MiB there (the script ended with exit code {result.exit_code})"
    )
    assert "harness: results/ is full: a script may write at most 4 MiB there" in result.notes
    assert_usable(sandbox, data_dir)


def test_a_key_across_the_capture_cut_is_redacted_whole(
    sandbox: Sandbox, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = "sk-planted-" + uuid.uuid4().hex
    monkeypatch.setenv("PLANTED_API_KEY", key)
    half = QUICK.output_bytes // 2
    code = f"""\
    import sys
    key = {key!r}
    sys.stdout.write("a" * {half - 10} + key + "b" * 100000 + key + "c" * {half - 10})
    """
    result = run(sandbox, data_dir, code)
    assert result.output_bytes == 2 * (half - 10) + 100000 + 2 * len(key)
    pieces = [key[i : i + 8] for i in range(len(key) - 7)]
    assert not [p for p in pieces if p in result.output + "".join(result.notes)]
    assert result.output.startswith("a" * (half - 10) + "[redacted]")
    assert result.output.endswith("[redacted]" + "c" * (half - 10))


IMPORTS = """\
import importlib, importlib.metadata as md, json, sys
for extra in {hidden!r}:
    sys.path.append(extra)
report = {{}}
for name in ["chess", "pytest", "anthropic", "openai"]:
    try:
        importlib.import_module(name)
        report[name] = "IMPORTED"
    except ImportError:
        report[name] = None
for name, module in {announced!r}.items():
    importlib.import_module(module)
    report[name] = md.version(name)
print("REPORT " + json.dumps(report))
"""
ANNOUNCED = {"numpy": "numpy", "scipy": "scipy", "pandas": "pandas", "scikit-learn": "sklearn",
             "torch": "torch", "pillow": "PIL"}  # fmt: skip


def _host_site_packages() -> list[str]:
    """Where the session's own interpreter keeps what it has beyond the announced set."""
    import site

    return [*site.getsitepackages(), "/usr/lib/python3/dist-packages"]


def test_only_the_announced_packages_import(sandbox: Sandbox, data_dir: Path) -> None:
    # A script that adds the host's package directories to sys.path finds nothing more there
    # (the plain fallback is not isolated: it is tested without that trick).
    hidden = _host_site_packages() if sandbox.isolated else []
    assert set(ANNOUNCED) == set(requirement_pins()), "the list changed: update ANNOUNCED"
    code = IMPORTS.format(hidden=hidden, announced=ANNOUNCED)
    result = run(sandbox, data_dir, code, dataclasses.replace(QUICK, time_s=120, memory_bytes=4 << 30))
    assert result.exit_code == 0, result.output
    report = json.loads(result.output.split("REPORT ", 1)[1])
    assert {name: report[name] for name in ("chess", "pytest", "anthropic", "openai")} == dict.fromkeys(
        ("chess", "pytest", "anthropic", "openai")
    )
    for name, pin in requirement_pins().items():
        assert report[name].split("+")[0] == pin, (name, report[name])


def test_the_system_prompt_lists_what_imports(sandbox: Sandbox) -> None:
    env = sandbox.environment()
    assert set(env.packages) == set(requirement_pins())
    assert {name: version.split("+")[0] for name, version in env.packages.items()} == requirement_pins()
