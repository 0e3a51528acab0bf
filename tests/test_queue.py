"""The queue model: an outside program plays the benchmark through request and answer files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from helpers import GOOD_SCRIPT, needs_bwrap, read_iterations, read_jsonl, session_dir, write_tiny_task

from pytest_weirdml.errors import ModelError
from pytest_weirdml.models import Message, Request, resolve
from pytest_weirdml.models.queue import ANSWER_CAP_BYTES, QueueModel, decode_answer, read_answer
from pytest_weirdml.tasks import load_task

THINK_S = 0.4

# A separate program that answers like an outside agent: it reads each request file in id order,
# answers only from what the file says (the messages and answer_path), and writes atomically.
ANSWERER = textwrap.dedent(
    """
    import json, os, sys, time
    from pathlib import Path

    queue, wanted, think = Path(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
    good = Path(sys.argv[4]).read_text()
    seen, started = [], time.monotonic()
    while len(seen) < wanted and time.monotonic() - started < 240:
        for request in sorted(queue.glob("*.request.json")):
            if request.name in seen:
                continue
            asked = json.loads(request.read_text())
            seen.append(request.name)
            time.sleep(think)
            if asked["iteration"] == 1:
                # The prompt's own example script (the last message is the task prompt).
                text = asked["messages"][-1]["content"]
                example = text.split("```python", 1)[1].split("```", 1)[0]
                reply = "The example first.\\n\\n```python" + example + "```\\n"
            else:
                reply = "Now the parity rule.\\n\\n```python\\n" + good + "```\\n"
            answer = Path(asked["answer_path"])
            part = answer.with_name(answer.name + ".tmp")
            part.write_text(reply)
            os.replace(part, answer)
        time.sleep(0.05)
    Path(sys.argv[5]).write_text(json.dumps(seen))
    """
)


@needs_bwrap
def test_a_two_task_session_plays_through_the_queue_with_a_separate_answerer(
    pytester: pytest.Pytester, tiny: Path, base_args: list[str]
) -> None:
    write_tiny_task(pytester.path, "second")
    queue = pytester.path / "queue"
    (pytester.path / "answerer.py").write_text(ANSWERER)
    (pytester.path / "good.py").write_text(GOOD_SCRIPT)
    seen_file = pytester.path / "seen.json"
    answerer = subprocess.Popen(
        [sys.executable, "answerer.py", str(queue), "4", str(THINK_S), "good.py", str(seen_file)], cwd=pytester.path
    )
    try:
        # Two xdist workers ask at the same time: the ids must still be unique and in order.
        result = pytester.runpytest_subprocess(
            "-n", "2", f"--weirdml-model=queue:{queue}", "--weirdml-runs=1", *base_args, timeout=300
        )
        assert answerer.wait(timeout=60) == 0
    finally:
        answerer.kill()
    result.assert_outcomes(passed=2)
    iterations = read_iterations(session_dir(pytester) / "records.jsonl")
    assert sorted((r["task"], r["iteration"]) for r in iterations) == [
        ("second", 1), ("second", 2), ("tiny", 1), ("tiny", 2)
    ]  # fmt: skip
    for record in iterations:
        assert record["model"] == "queue:queue"
        think = record["usage"]["think_s"]
        # The clock runs from the request to the answer read: the answerer's pause and the settling.
        assert THINK_S <= think < THINK_S + 30, record["usage"]
        assert record["usage"]["latency_s"] == think
        assert record["usage"]["cost_usd"] is None
        assert record["score"] == (1.0 if record["iteration"] == 2 else pytest.approx(0.5, abs=0.2))

    requests = sorted(queue.glob("*.request.json"))
    ids = [path.name.removesuffix(".request.json") for path in requests]
    assert [i.split("-")[0] for i in ids] == ["000001", "000002", "000003", "000004"]
    assert json.loads(seen_file.read_text()) == [path.name for path in requests]
    by_task: dict[str, list[dict]] = {}  # type: ignore[type-arg]
    for path in requests:
        asked = json.loads(path.read_text())
        assert asked["answer_path"] == str(path.with_name(f"{asked['id']}.answer.md"))
        assert Path(asked["answer_path"]).is_file()
        assert "atomically" in asked["instructions"] and asked["timeout_s"] == 8 * 3600
        # The answerer sees the conversation, not the task's name (it could give the task away).
        assert "task" not in asked and "tiny" not in asked["id"] and "second" not in asked["id"]
        by_task.setdefault(asked["conversation"], []).append(asked)
    assert len(by_task) == 2
    for task, asks in by_task.items():
        # Ids sort in request order: each run's second request comes after its first.
        assert [a["iteration"] for a in asks] == [1, 2], task
        first, second = asks
        assert [m["role"] for m in first["messages"]] == ["system", "user"]
        assert [m["role"] for m in second["messages"]] == ["system", "user", "assistant", "user"]
        assert second["messages"][2]["content"] == Path(first["answer_path"]).read_text()
        assert "Test accuracy: " in second["messages"][3]["content"]


def test_no_answer_is_an_infrastructure_error_naming_the_file(
    pytester: pytest.Pytester, tiny: Path, base_args: list[str]
) -> None:
    queue = pytester.path / "queue"
    result = pytester.runpytest(
        f"--weirdml-model=queue:{queue}", "--weirdml-runs=1", "--weirdml-answer-timeout=1", *base_args
    )
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        [f"weirdml models: queue:{queue} (answered through files, waiting up to 1 s per answer)"]
    )
    (request,) = queue.glob("*.request.json")
    answer = request.with_name(request.name.replace(".request.json", ".answer.md"))
    assert answer.name == f"000001-{json.loads(request.read_text())['conversation']}-i1.answer.md"
    result.stdout.fnmatch_lines([f"*ModelError: no answer in {answer} after 1 s (--weirdml-answer-timeout)*"])
    ends = [r for r in read_jsonl(session_dir(pytester) / "records.jsonl") if r["kind"] == "run_end"]
    assert [e["status"] for e in ends] == ["error"] and str(answer) in ends[0]["error"]
    # The answerer is told the harness stopped waiting.
    assert str(answer) in answer.with_name(answer.name.replace(".answer.md", ".cancelled")).read_text()


def test_a_bad_timeout_is_a_usage_error(pytester: pytest.Pytester, base_args: list[str]) -> None:
    for bad in ("0", "nan", "inf", "soon"):
        result = pytester.runpytest("--weirdml-model=queue:q", f"--weirdml-answer-timeout={bad}", *base_args)
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        result.stderr.fnmatch_lines(["*--weirdml-answer-timeout must be seconds*"])


def _request(tmp_path: Path) -> Request:
    task = load_task(write_tiny_task(tmp_path))
    return Request(messages=(Message("system", "s"), Message("user", task.prompt)), task=task, run=3, iteration=1)


def test_the_answer_is_untrusted_text(tmp_path: Path) -> None:
    answer = tmp_path / "a.md"
    answer.write_bytes(b"\xef\xbb\xbfok \xff\x00 done")
    data, cut = read_answer(answer)
    assert decode_answer(data) == "ok \ufffd\ufffd done" and not cut
    answer.write_bytes(b"x" * (ANSWER_CAP_BYTES + 5))
    data, cut = read_answer(answer)
    assert len(data) == ANSWER_CAP_BYTES and cut
    secret = tmp_path / "secret"
    secret.write_text("key")
    link = tmp_path / "link.md"
    link.symlink_to(secret)
    with pytest.raises(ModelError, match=r"link\.md: cannot be read .*plain file"):
        read_answer(link)
    fifo = tmp_path / "fifo.md"
    os.mkfifo(fifo)
    with pytest.raises(ModelError, match=r"fifo\.md: not a regular file"):
        read_answer(fifo)


def test_an_answer_is_read_only_once_it_has_settled(tmp_path: Path) -> None:
    model = QueueModel(str(tmp_path / "q"), timeout_s=30, settle_s=0.6, poll_s=0.05)
    request = _request(tmp_path)
    writer = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\n"
            "f = open(sys.argv[1], 'w')\n"
            "for part in ('Half ', 'and the rest.'):\n"
            "    f.write(part); f.flush(); time.sleep(0.4)\n",
            str(tmp_path / "q" / f"000001-{model.conversation(request)}-i1.answer.md"),
        ]
    )
    started = time.monotonic()
    response = model.generate(request)
    writer.wait(timeout=10)
    assert response.text == "Half and the rest."
    assert response.usage.think_s is not None and 0.8 <= response.usage.think_s <= time.monotonic() - started


def test_the_timeout_option_reaches_the_model(tmp_path: Path) -> None:
    model = resolve(f"queue:{tmp_path / 'q'}", answer_timeout_s=12.5)
    assert isinstance(model, QueueModel) and model.timeout_s == 12.5 and model.name == "queue:q"
    with pytest.raises(ValueError, match="queue needs a directory: --weirdml-model=queue:DIR"):
        resolve("queue:")
    (tmp_path / "file").write_text("")
    with pytest.raises(ValueError, match="cannot use"):
        resolve(f"queue:{tmp_path / 'file'}")
