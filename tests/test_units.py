"""Pure pieces of the protocol: code extraction, truncation, task loading, scoring, feedback."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from helpers import write_tiny_task

from pytest_weirdml.errors import TaskError
from pytest_weirdml.extract import code_blocks, extract_code, truncate_output
from pytest_weirdml.protocol import INFORMED, PUBLISHED, Outcome, feedback, system_prompt
from pytest_weirdml.tasks import Score, build_data, load_task, score_predictions


def test_the_longest_block_is_the_script() -> None:
    text = "Plan:\n```python\nprint(1)\n```\nand the script\n```\nimport os\nprint(os.getcwd())\n```\nDone."
    assert code_blocks(text) == ["print(1)\n", "import os\nprint(os.getcwd())\n"]
    assert extract_code(text) == "import os\nprint(os.getcwd())\n"


@pytest.mark.parametrize("text", ["no code at all", "```python\n```", "```python\nnever closed"])
def test_no_usable_block_is_none(text: str) -> None:
    assert extract_code(text) is None


@pytest.mark.parametrize(
    "bomb",
    [
        "```x\n" * 200_000,  # 1 MB of fences that never close
        "```python\n" + "`" * 1_000_000,  # one open fence, then a 1 MB line of backticks
        ("```\n" + " " * 500 + "\n") * 1_900,  # blocks whose lines almost close them
        " " * 1_000_000 + "```\nx\n```",  # a 1 MB indent before the fence
    ],
    ids=["unclosed-fences", "backtick-line", "near-closes", "indent"],
)
def test_code_extraction_is_linear_in_the_answer(bomb: str) -> None:
    import time

    def took(text: str) -> float:
        start = time.perf_counter()
        code_blocks(text)
        extract_code(text)
        return time.perf_counter() - start

    # Well under a second (about 0.1 s idle); the fastest of three, as other work shares the machine.
    # (The fence regex this replaced took 2.5 s for 4000 unclosed fences, and grew with their square.)
    assert min(took(bomb) for _ in range(3)) < 1.0


def test_fences_close_at_the_next_bare_fence_line() -> None:
    assert code_blocks("```python\na\n  ```  \nb\n```\nc\n```") == ["a\n", "c\n"]
    assert code_blocks("```\n```") == [""]
    # An open fence needs its newline; a close may end the text.
    assert code_blocks("```") == [] and code_blocks("```\nx\n```") == ["x\n"]
    assert code_blocks("````\nx\n```\ny\n```") == ["y\n"]
    assert code_blocks("```python\nx\n```\n```text\nnever closed\n```py\nz") == ["x\n"]


def test_inline_backticks_do_not_open_a_block() -> None:
    assert extract_code("use `np.savetxt` here\n```python\nx = 1\n```") == "x = 1\n"


def test_only_python_or_bare_fences_hold_the_script() -> None:
    # A long block in another language never beats the script, as in the published rule.
    log = "\n".join(f"epoch {i}: loss 0.{i:03d}" for i in range(50))
    text = f"Last output:\n```text\n{log}\n```\nRun it with\n```bash\npython solution.py\n```\n```python\nx = 1\n```"
    assert extract_code(text) == "x = 1\n"
    assert code_blocks(text, scripts_only=True) == ["x = 1\n"]
    assert len(code_blocks(text)) == 3
    assert extract_code("```Python\ny = 2\n```") == "y = 2\n"
    assert extract_code("```py\ny = 2\n```\n```text\nz\n```") is None


def test_truncation_keeps_head_and_tail_beyond_8000_chars() -> None:
    assert truncate_output("a" * 8000) == "a" * 8000
    out = truncate_output("h" * 4000 + "m" * 10 + "t" * 4000)
    assert out.startswith("h" * 4000) and out.endswith("t" * 4000) and "m" not in out
    assert "[... 10 characters cut ...]" in out


def test_scoring_flattens_and_names_each_zero_reason() -> None:
    answers = np.array([[0, 1, 2], [2, 1, 0]])
    assert score_predictions(b"0 1 2\n2 1 1\n", answers) == Score(5 / 6)
    assert score_predictions(b"0\n1\n2\n2\n1\n0\n", answers) == Score(1.0)
    assert score_predictions(None, answers).zero_reason == "no predictions: results/test_preds.txt was not written"
    assert score_predictions(b"0 1\n", answers).zero_reason == "wrong shape: predictions (2,), expected (2, 3)"
    assert score_predictions(b"", answers).zero_reason == "no predictions: results/test_preds.txt is empty"
    assert score_predictions(b"1 2 3 4 5 nan\n", answers).zero_reason.endswith("values must be integers")
    assert score_predictions(b"1\n" * 6, answers, cap=4).zero_reason.endswith("larger than 4 bytes")


def test_published_feedback_is_the_output_and_the_accuracy_only() -> None:
    crashed = Outcome(2, 0.0, "the script crashed (exit code 1)", "Traceback: boom", 2.5, "exit code 1")
    text = feedback(PUBLISHED, crashed, iterations=5, best=0.42)
    assert text == (
        "Terminal output of your script:\n\n```text\nTraceback: boom\n```\n\n"
        "Test accuracy: 0.0 (the script crashed (exit code 1))."
    )
    assert feedback(PUBLISHED, Outcome(1, 0.875, None, "ok", 3.0, "exit code 0"), iterations=5, best=0.9).endswith(
        "Test accuracy: 0.8750."
    )
    # No script ran: no output section, only the reason.
    assert feedback(PUBLISHED, Outcome(1, 0.0, "no code block", None), iterations=5, best=0.0) == (
        "Test accuracy: 0.0 (no code block)."
    )


def test_informed_feedback_says_what_is_left_and_why_zero() -> None:
    crashed = Outcome(2, 0.0, "the script crashed (exit code 1)", "Traceback: boom", 2.5, "exit code 1")
    text = feedback(INFORMED, crashed, iterations=5, best=0.42)
    assert "Submission 2 of 5. Test accuracy: 0.0 (the script crashed (exit code 1))." in text
    assert "The script ran for 2.5 s (exit code 1)" in text
    assert "Traceback: boom" in text and "Best test accuracy so far: 0.4200" in text
    assert "You have 3 submissions left" in text
    last = feedback(INFORMED, Outcome(5, 0.9, None, "", 1.0, "exit code 0"), iterations=5, best=0.9)
    assert "left" not in last.split("so far")[-1]


@pytest.mark.parametrize("protocol", [PUBLISHED, INFORMED])
def test_system_prompts_state_the_facts_of_their_protocol(protocol: str) -> None:
    text = system_prompt(
        protocol,
        device="one NVIDIA H200 GPU with 139 GB of memory",
        python="3.11.7",
        packages={"torch": "2.13.0", "numpy": "2.4.6"},
        iterations=5,
        time_limit_s=120,
    )
    for fact in (
        "one NVIDIA H200 GPU with 139 GB of memory",
        "2 minutes",
        "numpy 2.4.6, torch 2.13.0",
        "```python",
        "longest",
        "8000",
        "4000",
        "from scratch",
        "no internet",
        "other models",
    ):
        assert fact in text, fact
    disclosed = ("5 submissions", "left", "so far", "scores 0")
    if protocol == PUBLISHED:
        assert "several iterations" in text and "step by step" in text
        assert not [word for word in disclosed if word in text]
    else:
        assert all(word in text for word in disclosed if word != "so far")


def test_task_loading_checks_types_and_names(tmp_path: Path) -> None:
    task = write_tiny_task(tmp_path)
    spec = load_task(task)
    assert (spec.name, spec.time_limit_s, spec.iterations, spec.markers) == ("tiny", 20.0, 2, ("toy", "tabular"))
    (task / "task.toml").write_text((task / "task.toml").read_text().replace("iterations = 2", 'iterations = "2"'))
    with pytest.raises(TaskError, match="'iterations' must be int"):
        load_task(task)
    renamed = task.rename(tmp_path / "tasks" / "renamed")
    with pytest.raises(TaskError, match="name 'tiny' differs from the directory name 'renamed'"):
        load_task(renamed)


def test_data_is_built_once_and_hidden_answers_stay_private(tmp_path: Path) -> None:
    spec = load_task(write_tiny_task(tmp_path))
    first = build_data(spec, tmp_path / "cache")
    stamp = first.answers_path.stat().st_mtime_ns
    again = build_data(spec, tmp_path / "cache")
    assert again.root == first.root and again.answers_path.stat().st_mtime_ns == stamp
    assert sorted(p.name for p in first.public_dir.iterdir()) == ["test_x.npy", "train_x.npy", "train_y.npy"]
    assert first.answers_path.parent.stat().st_mode & 0o077 == 0
    assert first.answers().shape == (100,)


def test_builder_that_writes_other_files_is_a_task_error(tmp_path: Path) -> None:
    task = write_tiny_task(tmp_path)
    (task / "data.py").write_text((task / "data.py").read_text().replace('"test_x.npy"', '"test.npy"'))
    with pytest.raises(TaskError, match=r"wrote \['test.npy', 'train_x.npy', 'train_y.npy'\]"):
        build_data(load_task(task), tmp_path / "cache")


def test_a_malformed_file_is_named_with_a_short_clean_excerpt() -> None:
    answers = np.array([0, 1, 2])
    reason = score_predictions(b"cat\ndog\n", answers).zero_reason
    assert reason == "malformed predictions in results/test_preds.txt: line 1 holds 'cat', not a number"
    reason = score_predictions(b"1\n2\n" + b"x" * 5000 + b"\x00\x1b[2J\n", answers).zero_reason
    assert reason == "malformed predictions in results/test_preds.txt: line 3 holds 'xxxxxxxxxxxx...', not a number"
    reason = score_predictions(b"\x1b]0;evil\x07\n", answers).zero_reason
    assert reason is not None and "\x1b" not in reason and "\x07" not in reason
    reason = score_predictions(b"1 2\n3\n", answers).zero_reason
    assert reason == (
        "malformed predictions in results/test_preds.txt: line 2 has 1 values where the lines before it have 2"
    )


@pytest.mark.parametrize("limit", ["inf", "nan", "-1", "0"])
def test_a_task_time_limit_must_be_finite_and_positive(tmp_path: Path, limit: str) -> None:
    task = write_tiny_task(tmp_path)
    (task / "task.toml").write_text(
        (task / "task.toml").read_text().replace("time_limit_s = 20", f"time_limit_s = {limit}")
    )
    with pytest.raises(TaskError, match="'time_limit_s' must be a finite number > 0"):
        load_task(task)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("MYSERVICE_APIKEY", "apikey-0123456789"),
        ("SMTP_PASS", "smtp-pass-0123"),
        ("DB_PWD", "db-pwd-0123456"),
        ("GCP_CREDENTIALS", '{"private_key": "abc"}'),
        ("AWS_ACCESS_KEY_ID", "AKIAABCDEFGHIJKLMNOP"),
    ],
)
def test_the_wider_secret_names_are_redacted(monkeypatch: pytest.MonkeyPatch, name: str, value: str) -> None:
    from pytest_weirdml import redact

    monkeypatch.setenv(name, value)
    assert redact.redact(f"before {value} after") == "before [redacted] after"


def test_the_password_of_a_url_is_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_weirdml import redact

    monkeypatch.setenv("DATABASE_URL", "postgres://alice:s3cret-password@db.example:5432/app")
    monkeypatch.setenv("CACHE_URL", "redis://bob:pw@cache:6379")  # a short password: user and password go
    monkeypatch.setenv("PLAIN_URL", "https://example.org/path")
    text = "connect s3cret-password / redis://bob:pw@cache:6379 / https://example.org/path"
    assert redact.redact(text) == "connect [redacted] / redis://[redacted]cache:6379 / https://example.org/path"


def test_a_stream_is_redacted_wherever_its_chunks_split_a_key() -> None:
    from pytest_weirdml.redact import StreamRedactor

    key = "sk-planted-0123456789abcdef"
    stream = ("x" * 50 + key + "y" * 7 + key + "z").encode()
    for size in range(1, len(stream) + 1):
        redactor = StreamRedactor([key, "short-key-1"])
        chunks = [stream[i : i + size] for i in range(0, len(stream), size)]
        out = b"".join(redactor.feed(c) for c in chunks) + redactor.flush()
        assert out == ("x" * 50 + "[redacted]" + "y" * 7 + "[redacted]" + "z").encode(), size


def test_a_key_across_the_capture_cut_is_redacted_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_weirdml.sandbox._output import CappedBuffer

    key = "sk-planted-0123456789abcdef"
    monkeypatch.setenv("PLANTED_API_KEY", key)
    buffer = CappedBuffer(1024)
    # The key straddles the end of the kept head (512 bytes) and the start of the kept tail.
    stream = b"a" * 500 + key.encode() + b"b" * 5000 + key.encode() + b"c" * 500
    for i in range(0, len(stream), 7):
        buffer.feed(stream[i : i + 7])
    text = buffer.text()
    assert buffer.total == len(stream)
    assert not [key[i : i + 6] for i in range(len(key) - 5) if key[i : i + 6] in text], text
    assert text.startswith("a" * 500 + "[redacted]") and text.endswith("[redacted]" + "c" * 500)


def test_transcripts_hold_no_terminal_escapes(tmp_path: Path) -> None:
    from pytest_weirdml.records import IterationRecord, RunRecord
    from pytest_weirdml.report.transcript import write_transcript

    it = IterationRecord(
        task="t", model="m", run=0, iteration=1, prompt="p", response="\x1b]0;owned\x07\x1b[2J\x1b[31mred\x1b[0m",
        code=None, output="\x1b[1Abell\x07 nul\x00 c1\x9b", output_bytes=0, exit_code=None, timed_out=False,
        duration_s=0.0, score=0.0, zero_reason="no code",
    )  # fmt: skip
    text = write_transcript(tmp_path, RunRecord("t", "m", 0, [it])).read_text()
    assert "red" in text and "bell nul c1" in text
    assert not [c for c in text if (ord(c) < 32 and c not in "\n\t") or 0x7F <= ord(c) <= 0x9F]


def test_every_known_secret_is_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_weirdml import redact

    monkeypatch.setenv("SOME_SERVICE_TOKEN", "tok-0123456789")
    monkeypatch.setenv("MY_API_KEY", "key-abcdefghij")
    monkeypatch.setenv("DB_PASSWORD", "hunter2-but-longer")
    monkeypatch.setenv("AWS_SECRET", "aws-secret-value")
    monkeypatch.setenv("SHORT_KEY", "1234")  # too short to be told from ordinary text
    monkeypatch.setenv("HOME_DIRECTORY", "/root/somewhere")  # not named like a secret
    monkeypatch.setattr(redact, "_registered", set())
    redact.register("registered-secret-value")
    text = "tok-0123456789 key-abcdefghij hunter2-but-longer aws-secret-value registered-secret-value"
    text += " 1234 /root/somewhere"
    assert redact.redact(text) == "[redacted] [redacted] [redacted] [redacted] [redacted] 1234 /root/somewhere"
    assert redact.redact_values({"error": "HTTP 401: key-abcdefghij", "attempt": 2}) == {
        "error": "HTTP 401: [redacted]",
        "attempt": 2,
    }


def test_who_may_run_unisolated() -> None:
    from pytest_weirdml.isolation import unisolated_refusal

    for offline in ("reference", "baseline", "replay:answers.json", "human"):
        assert unisolated_refusal((offline,), "no bwrap") is None
    refusal = unisolated_refusal(("reference", "queue:inbox"), "no bwrap")
    assert refusal is not None and refusal.startswith("--weirdml-model=queue:inbox is answered by an outside agent")
    refusal = unisolated_refusal(("anthropic:claude-x",), "no bwrap")
    assert refusal is not None and "calls a provider" in refusal and "--weirdml-allow-unisolated" in refusal


def test_a_task_name_is_a_safe_name(tmp_path: Path) -> None:
    task = write_tiny_task(tmp_path, name="odd name")
    with pytest.raises(TaskError, match="a task name holds letters, digits"):
        load_task(task)


def test_the_header_shows_a_server_without_its_credentials() -> None:
    from pytest_weirdml.terminal import _shown_url

    assert _shown_url("https://alice:s3cret@llm.example:8443/v1") == "https://llm.example:8443/v1"
    assert _shown_url("http://127.0.0.1:8000/v1\x1b[2J") == "http://127.0.0.1:8000/v1"
