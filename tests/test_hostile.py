"""Hostile scripts, submitted through the replay model: each is contained, scored 0 with its
reason, and the run goes on to the next iteration."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import GOOD_SCRIPT, fenced, needs_bwrap, read_iterations, session_dir, write_replay, write_tiny_task

from pytest_weirdml.sandbox.local import bwrap_works

SECRET = "sk-planted-0123456789abcdef"

ENDLESS = """
import subprocess, time
# A child that tries to outlive the script, then a loop that never ends.
subprocess.Popen(["sleep", "987"], start_new_session=True)
while True:
    time.sleep(0.1)
"""

FLOOD = """
import sys
chunk = "x" * 1023 + "\\n"
for _ in range(10 * 1024):
    sys.stdout.write(chunk)
"""

READ_KEY = """
import os, pathlib
print("KEY=" + os.environ.get("WEIRDML_TEST_API_KEY", "absent"))
found = [p for p in pathlib.Path("/proc").glob("*/environ") if b"sk-planted" in p.read_bytes()]
print("FOUND", found)
"""

READ_HIDDEN = """
import pathlib
target = pathlib.Path({hidden!r})
print("hidden visible:", target.exists())
print(target.read_bytes()[:20])
"""


def _hostile_session(pytester: pytest.Pytester, base_args: list[str], scripts: list[str]):  # type: ignore[no-untyped-def]
    if not (pytester.path / "tasks" / "tiny").exists():
        write_tiny_task(pytester.path, time_limit=3, iterations=len(scripts))
    replay = write_replay(pytester.path / "hostile.json", scripts)
    return pytester.runpytest(f"--weirdml-model=replay:{replay}", "--weirdml-runs=1", *base_args)


@needs_bwrap
def test_hostile_scripts_are_contained_and_scored_zero(
    pytester: pytest.Pytester, base_args: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WEIRDML_TEST_API_KEY", SECRET)
    cache = pytester.path / "cache"
    # Build the data first so the hostile script can name the exact path of the hidden answers.
    from pytest_weirdml.tasks import build_data, load_task

    task_dir = write_tiny_task(pytester.path, time_limit=3, iterations=5)
    hidden = build_data(load_task(task_dir), cache).answers_path
    assert hidden.is_file()
    scripts = [ENDLESS, FLOOD, READ_KEY, READ_HIDDEN.format(hidden=str(hidden)), GOOD_SCRIPT]
    start = time.monotonic()
    result = _hostile_session(pytester, base_args, scripts)
    result.assert_outcomes(passed=1)
    records = read_iterations(session_dir(pytester) / "records.jsonl")
    assert [r["iteration"] for r in records] == [1, 2, 3, 4, 5]
    endless, flood, key, peek, good = records

    assert endless["timed_out"] and endless["score"] == 0.0
    assert endless["zero_reason"].startswith("timed out")
    assert 3.0 <= endless["duration_s"] < 6.0
    assert subprocess.run(["pgrep", "-f", "sleep 987"], capture_output=True).returncode == 1, "a child outlived it"

    assert flood["output_bytes"] == 10 * 1024 * 1024
    assert len(flood["output"]) < 1_100_000 and "bytes of output not kept" in flood["output"]
    # The model reads, after the protocol's cut, that the capture itself was capped.
    note = "harness: the script printed 10485760 bytes of output; the harness keeps at most 1 MiB"
    assert note in key["prompt"]
    # The model is fed at most the protocol's head and tail.
    assert len(key["prompt"]) < 9_000 and "characters cut" in key["prompt"]

    assert "KEY=absent" in key["output"] and "FOUND []" in key["output"]
    assert SECRET not in (session_dir(pytester) / "records.jsonl").read_text()

    assert "hidden visible: False" in peek["output"] and peek["zero_reason"].startswith("the script crashed")
    assert good["score"] == 1.0
    assert time.monotonic() - start < 60


def test_wrong_shape_and_malformed_predictions_score_zero_with_reason(
    pytester: pytest.Pytester, base_args: list[str]
) -> None:
    scripts = [
        "import numpy as np\nnp.savetxt('results/test_preds.txt', np.zeros(99), fmt='%d')",
        "open('results/test_preds.txt', 'w').write('cat\\ndog\\n')",
        "open('results/test_preds.txt', 'w').write('\\n'.join(['0.5'] * 100))",
        "open('results/elsewhere.txt', 'w').write('1')",
        "import numpy as np\nx = np.load('data/test_x.npy')\n"
        "np.savetxt('results/test_preds.txt', (x[:, :1] % 2).T, fmt='%d')",
    ]
    result = _hostile_session(pytester, base_args, scripts)
    result.assert_outcomes(passed=1)
    reasons = [r["zero_reason"] for r in read_iterations(session_dir(pytester) / "records.jsonl")]
    assert reasons[0] == "wrong shape: predictions (99,), expected (100,)"
    assert reasons[1].startswith("malformed predictions in results/test_preds.txt")
    assert reasons[2] == "malformed predictions in results/test_preds.txt: values must be integers"
    assert reasons[3] == "no predictions: results/test_preds.txt was not written"
    # Scores are over flattened arrays: one row of 100 is as good as 100 rows of one.
    assert reasons[4] is None


@needs_bwrap
def test_writing_into_data_is_refused(pytester: pytest.Pytester, base_args: list[str]) -> None:
    scripts = ["open('data/train_y.npy', 'wb').write(b'gone')", GOOD_SCRIPT]
    result = _hostile_session(pytester, base_args, scripts)
    result.assert_outcomes(passed=1)
    first, second = read_iterations(session_dir(pytester) / "records.jsonl")
    assert "Read-only file system" in first["output"] and first["zero_reason"].startswith("the script crashed")
    assert second["score"] == 1.0


def test_sigkill_mid_run_keeps_every_finished_iteration(pytester: pytest.Pytester, base_args: list[str]) -> None:
    scripts = [GOOD_SCRIPT, GOOD_SCRIPT, "import time\nprint('working', flush=True)\ntime.sleep(600)"]
    write_tiny_task(pytester.path, time_limit=900, iterations=len(scripts))
    replay = write_replay(pytester.path / "slow.json", scripts)
    cmd = [sys.executable, "-m", "pytest", f"--weirdml-model=replay:{replay}", "--weirdml-runs=1", *base_args]
    proc = subprocess.Popen(cmd, cwd=pytester.path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    records_file = None
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        found = list((pytester.path / "reports").glob("*/records.jsonl"))
        # Two iterations recorded (the file also holds the run's start).
        if found and found[0].read_text().count('"kind": "iteration"') == 2:
            records_file = found[0]
            break
        time.sleep(0.2)
    assert records_file is not None, "the first two iterations never reached the records file"
    time.sleep(1.0)  # the third script is now sleeping inside the sandbox
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    records = read_iterations(records_file)
    assert [(r["iteration"], r["score"]) for r in records] == [(1, 1.0), (2, 1.0)]
    time.sleep(0.5)
    if bwrap_works()[0]:
        # bubblewrap's --die-with-parent takes the sandbox down with the killed session.
        leftover = subprocess.run(["pgrep", "-f", "time.sleep.600"], capture_output=True)
        assert leftover.returncode == 1, "the sandboxed script outlived the session"


def test_resume_continues_a_killed_session_where_it_stopped(pytester: pytest.Pytester, base_args: list[str]) -> None:
    write_tiny_task(pytester.path, time_limit=900, iterations=3)
    slow = write_replay(pytester.path / "slow.json", [GOOD_SCRIPT, GOOD_SCRIPT, "import time\ntime.sleep(600)"])
    cmd = [sys.executable, "-m", "pytest", f"--weirdml-model=replay:{slow}", "--weirdml-runs=1", *base_args]
    proc = subprocess.Popen(cmd, cwd=pytester.path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        found = list((pytester.path / "reports").glob("*/records.jsonl"))
        # Two iterations recorded (the file also holds the run's start).
        if found and found[0].read_text().count('"kind": "iteration"') == 2:
            break
        time.sleep(0.2)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    where = session_dir(pytester)
    # The same file name, now with answers that would score 0 if iterations 1 and 2 were asked again.
    write_replay(pytester.path / "slow.json", ["", "", GOOD_SCRIPT])
    result = pytester.runpytest(
        f"--weirdml-model=replay:{slow}", "--weirdml-runs=1", f"--weirdml-resume={where}", *base_args
    )
    result.assert_outcomes(passed=1)
    records = read_iterations(where / "records.jsonl")
    assert [(r["iteration"], r["score"]) for r in records] == [(1, 1.0), (2, 1.0), (3, 1.0)]
    # The model saw its earlier answers and their feedback before the third submission.
    assert records[2]["prompt"].endswith("Test accuracy: 1.0000.")
    result.stdout.fnmatch_lines(["tiny*replay:slow.json*1*1.000*"])
    # A finished run is not run again.
    again = pytester.runpytest(
        f"--weirdml-model=replay:{slow}", "--weirdml-runs=1", f"--weirdml-resume={where}", *base_args
    )
    again.assert_outcomes(passed=1)
    assert len(read_iterations(where / "records.jsonl")) == 3


def test_resume_needs_a_session_directory(pytester: pytest.Pytester, tiny: Path) -> None:
    result = pytester.runpytest("--weirdml-resume=nowhere")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--weirdml-resume: */nowhere holds no records.jsonl*"])


# What a script leaves in results/, end to end ---------------------------------------------------

LEFTOVERS = [
    ("import os\nos.symlink('/etc/passwd', 'results/test_preds.txt')", "results/test_preds.txt is a symlink"),
    ("import os\nos.symlink({hidden!r}, 'results/test_preds.txt')", "results/test_preds.txt is a symlink"),
    ("import os\nos.symlink('/proc/self/environ', 'results/test_preds.txt')", "results/test_preds.txt is a symlink"),
    ("import os\nos.mkfifo('results/test_preds.txt')", "results/test_preds.txt is a FIFO (named pipe)"),
    ("import os\nos.symlink('/dev/stdin', 'results/test_preds.txt')", "results/test_preds.txt is a symlink"),
    (
        "import os, shutil\ntry:\n    os.rename('results', 'moved')\nexcept OSError as exc:\n"
        "    print('refused:', exc.strerror)\nos.symlink('/etc', 'results')",
        "the script crashed (exit code 1)",
    ),
    ("import os\nos.mkdir('results/test_preds.txt')", "results/test_preds.txt is a directory"),
    (
        "for i in range(3):\n    open(f'results/big-{i}', 'wb').write(bytes(1 << 30))",
        "results/ is full: a script may write at most 1 MiB there",
    ),
    ("blocks = []\nwhile True:\n    blocks.append(bytearray(32 << 20))", "killed: out of memory (limit 256 MiB)"),
    (GOOD_SCRIPT, None),
]


@pytest.mark.parametrize("backend", ["local", "docker"])
def test_leftovers_in_results_are_refused_and_nothing_of_the_host_leaks(
    pytester: pytest.Pytester, base_args: list[str], monkeypatch: pytest.MonkeyPatch, backend: str
) -> None:
    if backend == "docker":
        from pytest_weirdml.errors import SandboxError
        from pytest_weirdml.sandbox.docker import DockerSandbox

        try:
            DockerSandbox().close()
        except SandboxError as exc:
            pytest.skip(f"docker sandbox unavailable: {exc}")
    elif not bwrap_works()[0]:
        pytest.skip(f"needs bubblewrap: {bwrap_works()[1]}")
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    from pytest_weirdml.tasks import build_data, load_task

    task_dir = write_tiny_task(pytester.path, time_limit=3, iterations=len(LEFTOVERS))
    hidden = build_data(load_task(task_dir), pytester.path / "cache").answers_path
    scripts = [code.format(hidden=str(hidden)) if "{hidden" in code else code for code, _ in LEFTOVERS]
    replay = write_replay(pytester.path / "leftovers.json", scripts)
    result = pytester.runpytest_subprocess(
        f"--weirdml-model=replay:{replay}",
        "--weirdml-runs=1",
        f"--weirdml-sandbox={backend}",
        "--weirdml-results-cap=1M",
        "--weirdml-memory=256M",
        "-s",  # a link to /dev/stdin must not read the terminal
        *base_args,
    )
    result.assert_outcomes(passed=1)
    records = read_iterations(session_dir(pytester) / "records.jsonl")
    assert len(records) == len(LEFTOVERS)
    for record, (_, reason) in zip(records, LEFTOVERS, strict=True):
        if reason is None:
            assert record["score"] == 1.0, record
        else:
            assert record["score"] == 0.0 and record["zero_reason"].startswith(reason), record
        # A FIFO or a link to stdin never blocks the harness.
        assert record["wall_s"] < 3 + 10, record
    leaked = [SECRET, "root:x:0:0", "OPENAI_API_KEY"]
    terminal = result.stdout.str() + result.stderr.str()
    assert not [text for text in leaked if text in terminal]
    for path in session_dir(pytester).rglob("*"):
        if path.is_file():
            content = path.read_text(errors="replace")
            assert not [text for text in leaked if text in content], path


def test_a_key_that_reaches_the_output_is_redacted_everywhere(tmp_path: Path) -> None:
    """Defence in depth: the plain sandbox is not isolated, so a script can read the harness's own
    environment; the key still never reaches a record, a transcript or the next prompt."""
    task = write_tiny_task(tmp_path, iterations=2)
    leak = "import os\nprint(open(f'/proc/{os.getppid()}/environ', 'rb').read().decode(errors='replace'))\n"
    replay = tmp_path / "leak.json"
    replay.write_text(json.dumps([f"```python\n{leak}```", f"```python\n{GOOD_SCRIPT}```"]))
    # The key must be in the harness's environment from its start: /proc/PID/environ shows that.
    driver = f"""
import warnings
from pathlib import Path
from pytest_weirdml.loop import LoopSettings, run_task
from pytest_weirdml.models.offline import ReplayModel
from pytest_weirdml.report.transcript import write_transcript
from pytest_weirdml.sandbox import Limits
from pytest_weirdml.sandbox.local import LocalSandbox
from pytest_weirdml.session import SessionDir
from pytest_weirdml.tasks import build_data, load_task

spec = load_task(Path({str(task)!r}))
data = build_data(spec, Path({str(tmp_path / "cache")!r}))
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    box = LocalSandbox(isolate=False)
store = SessionDir(Path({str(tmp_path / "session")!r}))
limits = Limits(time_s=20, memory_bytes=1 << 30)
run = run_task(spec, data, ReplayModel({str(replay)!r}), box, run=0, settings=LoopSettings(limits=limits),
               on_iteration=store.append)
write_transcript(store.path, run)
"""
    env = {**os.environ, "OPENAI_API_KEY": SECRET, "PYTHONPATH": os.getcwd()}
    proc = subprocess.run([sys.executable, "-c", driver], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert SECRET not in proc.stdout + proc.stderr
    first, second = read_iterations(tmp_path / "session" / "records.jsonl")
    assert "OPENAI_API_KEY=[redacted]" in first["output"]  # the script did read it...
    assert "OPENAI_API_KEY=[redacted]" in second["prompt"]  # ...and the model reads that, not the key
    assert second["score"] == 1.0
    for path in (tmp_path / "session").rglob("*"):
        if path.is_file():
            assert SECRET not in path.read_text(errors="replace"), path


# What the model sent breaks the harness: it scores 0 and the run goes on ---------------------

DEEP_TREE = """
import os
os.chdir("results")
for _ in range(2000):
    os.mkdir("d")
    os.chdir("d")
open("leaf.txt", "w").write("deep")
print("made a tree 2000 deep")
"""
FENCE_BOMB = "```x\n" * 200_000


@pytest.mark.parametrize("backend", ["local", "docker"])
def test_what_the_model_sent_scores_zero_and_the_run_goes_on(
    pytester: pytest.Pytester, base_args: list[str], backend: str
) -> None:
    if backend == "docker":
        from pytest_weirdml.errors import SandboxError
        from pytest_weirdml.sandbox.docker import DockerSandbox

        try:
            DockerSandbox().close()
        except SandboxError as exc:
            pytest.skip(f"docker sandbox unavailable: {exc}")
    elif not bwrap_works()[0]:
        pytest.skip(f"needs bubblewrap: {bwrap_works()[1]}")
    write_tiny_task(pytester.path, time_limit=10, iterations=4)
    answers = [
        "```python\nprint('caf\ud800')\n```",  # valid JSON from any provider; not valid UTF-8
        FENCE_BOMB,
        f"```python\n{DEEP_TREE}```",
        f"```python\n{GOOD_SCRIPT}```",
    ]
    replay = pytester.path / "bad.json"
    replay.write_text(json.dumps(answers))
    args = [f"--weirdml-model=replay:{replay}", "--weirdml-runs=1", f"--weirdml-sandbox={backend}", *base_args]
    start = time.monotonic()
    result = pytester.runpytest_subprocess(*args)
    result.assert_outcomes(passed=1)
    records = read_iterations(session_dir(pytester) / "records.jsonl")
    surrogate, bomb, deep, good = records
    assert surrogate["score"] == 0.0 and surrogate["zero_reason"] == (
        "the script was not run: it holds a lone surrogate U+D800 on line 1, which is not valid Unicode text; "
        "write it as plain UTF-8 text"
    )
    assert "caf\ufffd" in surrogate["code"] and "caf\ufffd" in surrogate["response"]
    assert bomb["score"] == 0.0 and bomb["zero_reason"].startswith("no code block in the response")
    assert bomb["wall_s"] < 5
    assert deep["score"] == 0.0 and "made a tree 2000 deep" in deep["output"]
    assert deep["zero_reason"] == "no predictions: results/test_preds.txt was not written"
    assert good["score"] == 1.0
    assert time.monotonic() - start < 120
    # The reason is what the model reads next.
    assert "lone surrogate U+D800" in bomb["prompt"]
    # The next session starts cleanly, with nothing left of the last one's run directories.
    again = pytester.runpytest_subprocess(*args)
    again.assert_outcomes(passed=1)
    assert "could not be removed" not in again.stdout.str() + again.stderr.str()


ACROSS_THE_CUT = f"""
import sys
key = "{SECRET}"
# The protocol keeps the first and the last 4000 characters: each key straddles one of the cuts.
sys.stdout.write("a" * 3990 + key + "b" * 20000 + key + "c" * 3990)
"""


def test_a_key_printed_across_the_cut_is_redacted_whole(
    pytester: pytest.Pytester, base_args: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    result = _hostile_session(pytester, base_args, [ACROSS_THE_CUT, GOOD_SCRIPT])
    result.assert_outcomes(passed=1)
    first, second = read_iterations(session_dir(pytester) / "records.jsonl")
    assert "characters cut" in second["prompt"] and "[redacted]" in second["prompt"]
    assert first["output"].count("[redacted]") == 2
    pieces = [SECRET[i : i + 8] for i in range(len(SECRET) - 7)]
    terminal = result.stdout.str() + result.stderr.str()
    assert not [p for p in pieces if p in terminal]
    for path in session_dir(pytester).rglob("*"):
        if path.is_file():
            text = path.read_text(errors="replace")
            assert not [p for p in pieces if p in text], path


# No quiet unisolated runs ------------------------------------------------------------------------

REFUSING_BWRAP = "#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n"


def test_a_provider_model_never_runs_unisolated_unless_allowed(
    pytester: pytest.Pytester, base_args: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from providers_server import FakeProvider

    pytest.importorskip("openai")
    fake_bin = pytester.path / "bin"
    fake_bin.mkdir()
    (fake_bin / "bwrap").write_text(REFUSING_BWRAP)
    (fake_bin / "bwrap").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake_bin}:{os.environ['PATH']}")
    write_tiny_task(pytester.path, time_limit=10, iterations=1)
    with FakeProvider("openai", lambda conversation: fenced(GOOD_SCRIPT)) as server:
        args = [
            "--weirdml-model=openai-compatible:tiny-llm",
            f"--weirdml-base-url={server.base_url}",
            "--weirdml-runs=1",
        ]
        args += base_args
        refused = pytester.runpytest_subprocess(*args)
        assert refused.ret == pytest.ExitCode.USAGE_ERROR
        refused.stderr.fnmatch_lines(
            [
                "*--weirdml-model=openai-compatible:tiny-llm calls a provider, but the local sandbox cannot isolate "
                "its scripts (bwrap cannot create namespaces here: bwrap: No permissions to create new namespace)*"
                "bubblewrap*--weirdml-sandbox=docker*--weirdml-allow-unisolated*"
            ]
        )
        assert not (pytester.path / "reports").exists() and not server.requests
        allowed = pytester.runpytest_subprocess(*args, "--weirdml-allow-unisolated")
    allowed.assert_outcomes(passed=1)
    allowed.stdout.fnmatch_lines(
        [
            "weirdml models: openai-compatible:tiny-llm (*)",
            f"weirdml servers: openai-compatible:tiny-llm at {server.base_url}",
            "weirdml sandbox: local, *",
            "weirdml isolation: none (bwrap cannot create namespaces here*",
            "isolation: none",
        ]
    )
    (record,) = read_iterations(session_dir(pytester) / "records.jsonl")
    assert record["isolation"] == "none" and record["score"] == 1.0
    summary = json.loads((session_dir(pytester) / "summary.json").read_text())
    assert summary["isolation"] == ["none"] and summary["runs"][0]["isolation"] == "none"


def test_an_offline_model_may_run_unisolated_with_the_warning(
    pytester: pytest.Pytester, base_args: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_bin = pytester.path / "bin"
    fake_bin.mkdir()
    (fake_bin / "bwrap").write_text(REFUSING_BWRAP)
    (fake_bin / "bwrap").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake_bin}:{os.environ['PATH']}")
    result = _hostile_session(pytester, base_args, [GOOD_SCRIPT])
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*NotIsolatedWarning: the local sandbox is NOT isolated*"])
    (record,) = read_iterations(session_dir(pytester) / "records.jsonl")
    assert record["isolation"] == "none"


# Records, replays and baselines someone sent you ------------------------------------------------


def _record(**fields: object) -> dict[str, object]:
    record: dict[str, object] = {
        "kind": "iteration", "task": "tiny", "model": "sent", "run": 0, "iteration": 1, "prompt": "p",
        "response": "r", "code": "print(1)", "output": "1", "output_bytes": 2, "exit_code": 0, "timed_out": False,
        "duration_s": 0.5, "score": 0.5, "zero_reason": None, "session": "theirs", "schema": 2,
        "data_key": "v1-seed0-abc", "protocol": "published",
    }  # fmt: skip
    record.update(fields)
    return record


CRAFTED = [
    ({"task": "../../../../escaped"}, "field 'task' is '../../../../escaped'"),
    ({"model": "../../escaped"}, "field 'model' is '../../escaped'"),
    ({"session": ".."}, "field 'session' is '..'"),
    ({"run": "<script>alert(1)</script>"}, "field 'run' is '<script>alert(1)</script>'; it must be int"),
    ({"iteration": "<b>1</b>"}, "field 'iteration' is '<b>1</b>'; it must be int"),
    ({"score": float("nan")}, "field 'score' is nan; it must be float"),
    ({"score": 1.5}, "field 'score' is 1.5; a score lies in [0, 1]"),
    ({"score": "1.0"}, "field 'score' is '1.0'; it must be float"),
    ({"usage": {"cost_usd": -5}}, "field 'usage.cost_usd' is -5; it cannot be negative"),
]


@pytest.mark.parametrize(("fields", "message"), CRAFTED, ids=[m.split(" is ")[0][7:-1] for _, m in CRAFTED])
def test_a_crafted_records_file_is_refused_naming_the_line_and_field(
    tmp_path: Path, fields: dict[str, object], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from pytest_weirdml.cli import main as weirdml

    theirs = tmp_path / "theirs"
    theirs.mkdir()
    lines = [json.dumps(_record()), json.dumps(_record(**{"iteration": 2, **fields}))]
    (theirs / "records.jsonl").write_text("\n".join(lines) + "\n")
    out = tmp_path / "out"
    assert weirdml(["report", str(theirs), "-o", str(out)]) == 2
    assert f"{theirs / 'records.jsonl'} line 2: {message}" in capsys.readouterr().err
    assert [p for p in tmp_path.rglob("*") if p.name not in ("theirs", "records.jsonl")] == []


def test_one_huge_line_is_never_read_whole(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from pytest_weirdml.cli import main as weirdml

    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "records.jsonl").write_text(json.dumps(_record(output="x" * (17 << 20))) + "\n")
    assert weirdml(["report", str(theirs), "-o", str(tmp_path / "out")]) == 2
    assert "line 1 is longer than 16 MiB characters" in capsys.readouterr().err


def test_every_text_of_a_records_file_is_escaped_in_html_and_stripped_in_transcripts(tmp_path: Path) -> None:
    from html.parser import HTMLParser

    from pytest_weirdml.cli import main as weirdml

    hostile = "<script>alert(1)</script><img src=x onerror=alert(2)>\x1b]0;owned\x07\x1b[2J"
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    records = [
        _record(prompt=hostile, response=hostile, code=hostile, output=hostile, zero_reason=hostile, score=0.0),
        {
            "kind": "run_end",
            "task": "tiny",
            "model": "sent",
            "run": 0,
            "status": "error",
            "error": hostile,
            "session": "theirs",
            "schema": 2,
        },
        _record(run=1),
        {"kind": "run_end", "task": "tiny", "model": "sent", "run": 1, "status": "finished", "session": "theirs"},
    ]
    (theirs / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    out = tmp_path / "out"
    assert weirdml(["report", str(theirs), "-o", str(out), "--bootstrap", "100"]) == 0
    page = (out / "report.html").read_text()

    class Tags(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.found: list[str] = []

        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            self.found.append(tag)
            assert not [name for name, _ in attrs if name.startswith("on")], (tag, attrs)

    parser = Tags()
    parser.feed(page)
    assert (
        "script" not in parser.found
        and "img" not in parser.found[: parser.found.index("body")] + [t for t in parser.found if t == "img"][:0]
    )
    assert page.count("&lt;script&gt;alert(1)&lt;/script&gt;") >= 5
    for transcript in (out / "transcripts").rglob("*.md"):
        text = transcript.read_text()
        assert "\x1b" not in text and "\x07" not in text
    # Only the files of the report, all inside the output directory.
    assert {p.relative_to(out).parts[0] for p in out.rglob("*")} <= {
        "summary.json", "results.csv", "results_own_tasks.csv", "report.html", "transcripts"
    }  # fmt: skip


def test_resume_refuses_a_crafted_records_file_and_a_score_its_record_contradicts(
    pytester: pytest.Pytester, base_args: list[str]
) -> None:
    from pytest_weirdml.tasks import build_data, load_task

    task_dir = write_tiny_task(pytester.path, time_limit=10, iterations=2)
    data = build_data(load_task(task_dir), pytester.path / "cache")
    replay = write_replay(pytester.path / "agent.json", ["", GOOD_SCRIPT])
    where = pytester.path / "reports" / "sent"
    where.mkdir(parents=True)
    records = where / "records.jsonl"
    args = [f"--weirdml-model=replay:{replay}", "--weirdml-runs=1", f"--weirdml-resume={where}", *base_args]
    records.write_text(json.dumps(_record(task="../../escaped", model="replay:agent.json")) + "\n")
    refused = pytester.runpytest(*args)
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    refused.stderr.fnmatch_lines([f"*--weirdml-resume: {records} line 1: field 'task' is '../../escaped'*"])
    # A first iteration that crashed yet claims a perfect score.
    claim = _record(
        model="replay:agent.json", session="sent", data_key=data.key, score=1.0, exit_code=1,
        zero_reason="the script crashed (exit code 1)", iterations_planned=2, time_limit_s=10.0,
    )  # fmt: skip
    records.write_text(json.dumps(claim) + "\n")
    contradicted = pytester.runpytest(*args)
    contradicted.assert_outcomes(errors=1)
    contradicted.stdout.fnmatch_lines(
        ["*iteration 1 of tiny / replay:agent.json / run 0 in the records scores 1.0 although it failed*"]
    )
    assert not list(where.rglob("*.md")) or all(p.is_relative_to(where) for p in where.rglob("*.md"))
    # Another data identity is refused too, naming the option that resumes it.
    records.write_text(json.dumps({**claim, "score": 0.0, "data_key": "v1-seed7-other"}) + "\n")
    other = pytester.runpytest(*args)
    other.assert_outcomes(errors=1)
    other.stdout.fnmatch_lines(["*this run started on data v1-seed7-other*--weirdml-data-seed=*"])


@pytest.mark.parametrize(
    ("score", "shown"), [("NaN", "nan"), ('"nan"', "'nan'"), ("1.5", "1.5"), ("-0.1", "-0.1"), ("true", "True")]
)
def test_a_baseline_with_a_bad_score_is_refused_naming_the_file_and_field(
    pytester: pytest.Pytester, tiny: Path, base_args: list[str], score: str, shown: str
) -> None:
    cell = (
        f'{{"scores": [1.0, {score}], "conditions": {{"protocol": "published", "iterations": 1, '
        '"time_limit_s": 20.0, "data": "v1-seed0-abc"}}'
    )
    path = pytester.path / "sent.json"
    path.write_text(f'{{"format": "pytest-weirdml-baseline", "version": 1, "models": {{"m": {{"tiny": {cell}}}}}}}')
    result = pytester.runpytest("--weirdml-model=reference", f"--weirdml-baseline={path}", *base_args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    field = "field 'models.m.tiny.scores[1]'"
    assert (
        f"--weirdml-baseline: {path}: {field} is {shown}; a score is a finite number in [0, 1]" in result.stderr.str()
    )


def test_a_baseline_name_that_would_drive_the_terminal_is_refused(
    pytester: pytest.Pytester, tiny: Path, base_args: list[str]
) -> None:
    cell = (
        '{"scores": [1.0], "conditions": {"protocol": "published", "iterations": 1, "time_limit_s": 20.0, "data": "d"}}'
    )
    path = pytester.path / "sent.json"
    raw = {"format": "pytest-weirdml-baseline", "version": 1, "models": {"m\x1b[2J": {"tiny": json.loads(cell)}}}
    path.write_text(json.dumps(raw))
    result = pytester.runpytest("--weirdml-model=reference", f"--weirdml-baseline={path}", *base_args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "\x1b[2J" not in result.stdout.str() + result.stderr.str()
    result.stderr.fnmatch_lines(["*--weirdml-baseline: *sent.json: model name 'm\\x1b[[]2J' holds characters*"])


def test_what_the_harness_raises_on_a_script_is_its_zero_and_a_dead_backend_is_an_error(tmp_path: Path) -> None:
    """A backend of one's own (as a conftest registers it): an exception while it handles a script
    is that submission's zero; a ``SandboxError`` (the backend itself broke) ends the run."""
    from pytest_weirdml.errors import SandboxError
    from pytest_weirdml.loop import LoopSettings, run_task
    from pytest_weirdml.models.offline import ReplayModel
    from pytest_weirdml.sandbox import Environment, ExecResult, Limits, Sandbox
    from pytest_weirdml.tasks import build_data, load_task

    class Picky(Sandbox):
        name = "picky"
        isolated = True

        def run(self, code: str, data_dir: Path, limits: Limits, gpu: str | None = None) -> ExecResult:
            if "BOOM" in code:
                raise RecursionError("maximum recursion depth exceeded")
            if "DEAD" in code:
                raise SandboxError("the backend's daemon went away")
            return ExecResult(0, False, 0.1, "ok", 2, b"\n".join(b"0" for _ in range(100)))

        def environment(self) -> Environment:
            return Environment(python="3.11")

    spec = load_task(write_tiny_task(tmp_path, iterations=3))
    data = build_data(spec, tmp_path / "cache")
    replay = write_replay(tmp_path / "r.json", ["print('BOOM')", "print('fine')", "print('DEAD')"])
    seen: list[object] = []
    settings = LoopSettings(limits=Limits(time_s=5))
    with pytest.raises(SandboxError, match="daemon went away"):
        run_task(spec, data, ReplayModel(str(replay)), Picky(), run=0, settings=settings, on_iteration=seen.append)
    boom, fine = seen
    assert boom.score == 0.0  # type: ignore[attr-defined]
    assert boom.zero_reason == (  # type: ignore[attr-defined]
        "the harness could not handle this script (RecursionError: maximum recursion depth exceeded)"
    )
    assert fine.zero_reason is None and "RecursionError" in fine.prompt  # type: ignore[attr-defined]
    assert fine.isolation == "picky"  # type: ignore[attr-defined]


def test_who_may_run_unisolated() -> None:
    from pytest_weirdml.isolation import unisolated_refusal

    for offline in ("reference", "baseline", "replay:answers.json", "human"):
        assert unisolated_refusal((offline,), "no bwrap") is None
    refusal = unisolated_refusal(("reference", "queue:inbox"), "no bwrap")
    assert refusal is not None and refusal.startswith("--weirdml-model=queue:inbox is answered by an outside agent")
    refusal = unisolated_refusal(("anthropic:claude-x",), "no bwrap")
    assert refusal is not None and "calls a provider" in refusal and "--weirdml-allow-unisolated" in refusal
