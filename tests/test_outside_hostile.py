"""Hostile answerers of ``queue:DIR`` and ``human``: each a separate process that writes in the
directory it shares with the harness. Nothing is written through a link it plants, nothing it
links to is read, no lock it holds keeps the session past the answer timeout, no name it drops
breaks a request, and the conversation key tells it nothing of the task."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import select
import shlex
import signal
import subprocess
import sys
import termios
import textwrap
import time
import warnings
from pathlib import Path

import pytest
from helpers import read_jsonl, session_dir, write_tiny_task

from pytest_weirdml.errors import ModelError
from pytest_weirdml.models import Message, Request
from pytest_weirdml.models.queue import QueueModel
from pytest_weirdml.tasks import load_task

ROOT_ONLY = "root's own file, mode 0600\n"

# Plants a symbolic link to TARGET at each name given, as an answerer who predicts them would.
PLANT_LINKS = textwrap.dedent(
    """
    import os, sys
    target, names = sys.argv[1], sys.argv[2:]
    for name in names:
        os.symlink(target, name)
    """
)

# Holds an exclusive lock (what filelock takes) on a file until killed.
HOLD_LOCK = textwrap.dedent(
    """
    import fcntl, os, sys, time
    fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)
    print("held", flush=True)
    time.sleep(600)
    """
)

# Answers the first request with a hard link to a file it may not read itself.
LINK_ANSWER = textwrap.dedent(
    """
    import json, os, sys, time
    from pathlib import Path
    queue, secret = Path(sys.argv[1]), sys.argv[2]
    while not (requests := sorted(queue.glob("*.request.json"))):
        time.sleep(0.05)
    os.link(secret, json.loads(requests[0].read_text())["answer_path"])
    """
)

# Drops what an answerer may leave in the queue directory: its own numbered notes and files.
DROP_NAMES = textwrap.dedent(
    """
    import os, sys
    os.chdir(sys.argv[1])
    for name in ("9" * 240 + "-x", "000777-notes.txt", "000500-0123456789-i1.answer.md",
                 "12-a-b.request.json", ".000900-0123456789-i1.request.json.part"):
        open(name, "w").write("the answerer's\\n")
    """
)


def _secret(path: Path) -> Path:
    path.write_text(ROOT_ONLY)
    path.chmod(0o600)
    return path


def _request(tmp_path: Path) -> Request:
    task = load_task(write_tiny_task(tmp_path))
    return Request(messages=(Message("system", "s"), Message("user", task.prompt)), task=task, run=0, iteration=1)


def _hostile(script: str, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", script, *args], cwd=cwd, check=True, timeout=60, text=True)


def test_links_planted_at_every_name_the_queue_writes_are_never_written_through(tmp_path: Path) -> None:
    queue = tmp_path / "q"
    model = QueueModel(str(queue), timeout_s=1, settle_s=0.1, poll_s=0.05)
    request = _request(tmp_path)
    # The answerer knows the run's key (from the run's first request, or by hashing names).
    ident = f"000001-{model.conversation(request)}-i1"
    secret = _secret(tmp_path / "secret")
    planted = [f".{ident}.request.json.{os.getpid()}.part", f".{ident}.cancelled.{os.getpid()}.part"]
    _hostile(PLANT_LINKS, str(secret), *planted, cwd=queue)
    with pytest.raises(ModelError, match="no answer"):
        model.generate(request)
    assert secret.read_text() == ROOT_ONLY and secret.stat().st_mode & 0o777 == 0o600
    asked = queue / f"{ident}.request.json"
    assert not asked.is_symlink() and json.loads(asked.read_text())["id"] == ident
    cancelled = queue / f"{ident}.cancelled"
    assert not cancelled.is_symlink() and "no answer" in cancelled.read_text()
    assert all((queue / name).is_symlink() for name in planted)
    # No temporary file is left behind.
    assert sorted(p.name for p in queue.iterdir() if p.name.endswith(".part")) == sorted(planted)


def test_an_answer_hard_linked_to_a_file_of_the_harness_is_refused(tmp_path: Path) -> None:
    queue = tmp_path / "q"
    queue.mkdir()
    secret = _secret(tmp_path / "secret")
    answerer = subprocess.Popen([sys.executable, "-c", LINK_ANSWER, str(queue), str(secret)])
    try:
        model = QueueModel(str(queue), timeout_s=30, settle_s=0.2, poll_s=0.05)
        with pytest.raises(ModelError, match=r"answer\.md: a hard link \(2 names of one file\)"):
            model.generate(_request(tmp_path))
        assert answerer.wait(timeout=30) == 0
    finally:
        answerer.kill()
    (cancelled,) = queue.glob("*.cancelled")
    assert "hard link" in cancelled.read_text() and ROOT_ONLY not in cancelled.read_text()


def test_an_answerer_holding_the_id_lock_cannot_hold_the_session(
    pytester: pytest.Pytester, tiny: Path, base_args: list[str]
) -> None:
    queue = pytester.path / "queue"
    queue.mkdir()
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(queue / ".ids.lock")], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        started = time.monotonic()
        result = pytester.runpytest_subprocess(
            f"--weirdml-model=queue:{queue}", "--weirdml-runs=1", "--weirdml-answer-timeout=2", *base_args, timeout=90
        )
        took = time.monotonic() - started
    finally:
        holder.kill()
        holder.wait()
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        [f"*ModelError: {queue / '.ids.lock'} stayed locked by another process for 2 s (--weirdml-answer-timeout)*"]
    )
    assert took < 40, took
    assert list(queue.glob("*.request.json")) == []


def test_names_an_answerer_drops_in_the_queue_neither_break_nor_move_the_ids(tmp_path: Path) -> None:
    queue = tmp_path / "q"
    queue.mkdir()
    _hostile(DROP_NAMES, str(queue))
    model = QueueModel(str(queue), timeout_s=5)
    request = _request(tmp_path)
    with warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        first = model.submit(request)
    assert first.id == f"000001-{model.conversation(request)}-i1" and first.request.is_file()
    assert [type(w.message).__name__ for w in warned] == ["QueueNameWarning", "QueueNameWarning"]
    said = sorted(str(w.message) for w in warned)
    assert said[0].startswith(f"{queue}: '12-a-b.request.json' is not a file this queue wrote; ignored")
    assert f"{queue}: '{'9' * 40}...{'9' * 10}-x' is not a file this queue wrote; ignored" in said[1]
    # Warned once per name; the next id follows the harness's own last one.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        second = model.submit(Request(request.messages, request.task, run=1, iteration=1))
    assert second.id.startswith("000002-") and second.id.split("-")[1] != first.id.split("-")[1]


def test_the_conversation_key_is_a_random_token_kept_in_the_records_and_on_resume(
    pytester: pytest.Pytester, tiny: Path, base_args: list[str]
) -> None:
    queue = pytester.path / "queue"
    options = [f"--weirdml-model=queue:{queue}", "--weirdml-runs=1", *base_args]
    session = subprocess.Popen(
        [sys.executable, "-m", "pytest", *options],
        cwd=pytester.path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        while not list(queue.glob("*.request.json")) and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        session.kill()  # killed while it waits for the first answer
        session.wait(timeout=30)
    (first,) = queue.glob("*.request.json")
    key = json.loads(first.read_text())["conversation"]
    # What an answerer would try: the model's name, every task name it knows, the first runs.
    names = ["tiny", *(p.name for p in (Path(__file__).parents[1] / "tasks").iterdir())]
    guesses = {
        hashlib.sha256(f"queue:queue\0{name}\0{run}".encode()).hexdigest()[:10] for name in names for run in range(9)
    }
    assert key not in guesses
    where = session_dir(pytester)
    (start,) = [r for r in read_jsonl(where / "records.jsonl") if r["kind"] == "run_start"]
    assert start["plan"]["conversation"] == key
    resumed = pytester.runpytest(*options, "--weirdml-answer-timeout=1", f"--weirdml-resume={where}")
    resumed.assert_outcomes(errors=1)
    first_again, second = sorted(queue.glob("*.request.json"))
    assert first_again == first and second.name == f"000002-{key}-i1.request.json"
    assert json.loads(second.read_text())["conversation"] == key


# The human model on a terminal of its own ----------------------------------------------------------

# A person's session: one request of the human model, the answer or the error on the terminal.
DRIVER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from pytest_weirdml.models import Message, Request
    from pytest_weirdml.models.human import HumanModel
    from pytest_weirdml.tasks import load_task

    human, task_dir, timeout = Path(sys.argv[1]), Path(sys.argv[2]), float(sys.argv[3])
    task = load_task(task_dir)
    model = HumanModel(str(human), timeout_s=timeout, settle_s=0.1, poll_s=0.05)
    request = Request(messages=(Message("system", "s"), Message("user", task.prompt)), task=task, run=0, iteration=1)
    try:
        print("ANSWER", repr(model.generate(request).text), flush=True)
    except Exception as exc:
        print("ERROR", type(exc).__name__, exc, flush=True)
    """
)
WRITES_AN_ANSWER = "import sys; open(sys.argv[1], 'a').write('My answer.\\n')"
NEVER_CLOSES = "import time; time.sleep(601)"

# Holds the terminal (as a request of another worker in the editor would) until the harness has
# written the next request, then plants a link to TARGET at each name the harness writes for it.
RACE_TO_THE_DRAFT = textwrap.dedent(
    """
    import fcntl, os, sys, time
    from pathlib import Path
    human, target = Path(sys.argv[1]), sys.argv[2]
    fd = os.open(human / ".terminal.lock", os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)
    print("held", flush=True)
    while not (requests := sorted(human.glob("*.request.json"))):
        time.sleep(0.01)
    ident = requests[0].name.removesuffix(".request.json")
    for name in (f"{ident}.request.md", f"{ident}.draft.md", f".{ident}.answer.md.part"):
        try:
            os.symlink(target, human / name)
        except FileExistsError:  # written already
            pass
    fcntl.flock(fd, fcntl.LOCK_UN)
    """
)


def _on_a_terminal(command: list[str], env: dict[str, str], timeout: float) -> str:
    """Run ``command`` on a terminal of its own (a pty it takes as its controlling terminal, as a
    person's shell has); what the terminal showed by its end or by ``timeout``."""
    main, sub = os.openpty()
    process = subprocess.Popen(
        command,
        stdin=sub,
        stdout=sub,
        stderr=sub,
        env=env,
        start_new_session=True,
        preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0),
    )
    os.close(sub)
    shown = bytearray()
    end = time.monotonic() + timeout
    try:
        while time.monotonic() < end:
            if select.select([main], [], [], 0.2)[0]:
                try:
                    chunk = os.read(main, 1 << 16)
                except OSError:  # EIO: everything on the terminal has ended
                    break
                shown += chunk
            elif process.poll() is not None:
                break
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        os.close(main)
    return shown.decode(errors="replace").replace("\r\n", "\n")


def _play(tmp_path: Path, editor: str, timeout: float) -> tuple[str, float]:
    """One request of the human model on a terminal, answered by ``editor``; the terminal, the time."""
    task_dir = write_tiny_task(tmp_path)
    env = {**os.environ, "EDITOR": shlex.join([sys.executable, "-c", editor])}
    command = [sys.executable, "-c", DRIVER, str(tmp_path / "human"), str(task_dir), str(timeout)]
    started = time.monotonic()
    shown = _on_a_terminal(command, env, timeout=60)
    return shown, time.monotonic() - started


def test_links_planted_at_the_human_models_names_are_never_written_through(tmp_path: Path) -> None:
    (tmp_path / "human").mkdir()
    secret = _secret(tmp_path / "secret")
    answerer = subprocess.Popen(
        [sys.executable, "-c", RACE_TO_THE_DRAFT, str(tmp_path / "human"), str(secret)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert answerer.stdout is not None and answerer.stdout.readline() == "held\n"
        shown, _ = _play(tmp_path, WRITES_AN_ANSWER, timeout=30)
        assert answerer.wait(timeout=30) == 0
    finally:
        answerer.kill()
    assert secret.read_text() == ROOT_ONLY
    assert "ANSWER 'My answer.\\n'" in shown, shown
    (answer,) = (tmp_path / "human").glob("*.answer.md")
    assert not answer.is_symlink() and answer.read_text() == "My answer.\n"
    (request,) = (tmp_path / "human").glob("*.request.md")
    assert not request.is_symlink() and "# WeirdML task tiny" in request.read_text()
    # The draft is the harness's own, elsewhere: the links planted at its old names stay as they were.
    assert [p.name for p in (tmp_path / "human").glob("*draft.md")] == [f"{answer.name[:-10]}.draft.md"]
    assert all(p.is_symlink() for p in (tmp_path / "human").glob("*.part"))


@pytest.mark.parametrize("holds", ["the terminal lock", "the editor"])
def test_nothing_an_answerer_holds_keeps_the_human_model_past_its_timeout(tmp_path: Path, holds: str) -> None:
    human = tmp_path / "human"
    human.mkdir()
    holder = None
    if holds == "the terminal lock":  # another process at the terminal, or one that only pretends to be
        holder = subprocess.Popen(
            [sys.executable, "-c", HOLD_LOCK, str(human / ".terminal.lock")], stdout=subprocess.PIPE, text=True
        )
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
    try:
        shown, took = _play(tmp_path, WRITES_AN_ANSWER if holder else NEVER_CLOSES, timeout=2)
    finally:
        if holder is not None:
            holder.kill()
            holder.wait()
    assert "ERROR ModelError no answer in" in shown and "after 2 s (--weirdml-answer-timeout)" in shown, shown
    assert took < 20, took
    assert subprocess.run(["pgrep", "-f", "time.sleep.601"], capture_output=True).returncode == 1


# The person saves the answer as a file from another shell.
SAVES_THE_ANSWER = textwrap.dedent(
    """
    import json, os, sys, time
    from pathlib import Path
    human = Path(sys.argv[1])
    while not (requests := sorted(human.glob("*.request.json"))):
        time.sleep(0.05)
    answer = Path(json.loads(requests[0].read_text())["answer_path"])
    answer.with_name("saved.tmp").write_text("Saved from another shell.\\n")
    os.replace(answer.with_name("saved.tmp"), answer)
    """
)


def test_an_answer_saved_while_the_terminal_is_held_is_read_at_once(tmp_path: Path) -> None:
    human = tmp_path / "human"
    human.mkdir()
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(human / ".terminal.lock")], stdout=subprocess.PIPE, text=True
    )
    saver = subprocess.Popen([sys.executable, "-c", SAVES_THE_ANSWER, str(human)])
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        shown, took = _play(tmp_path, WRITES_AN_ANSWER, timeout=40)
        assert saver.wait(timeout=30) == 0
    finally:
        for process in (holder, saver):
            process.kill()
            process.wait()
    assert "ANSWER 'Saved from another shell.\\n'" in shown, shown
    assert took < 30, took
