"""Code extraction from an answer, and the truncation of what a script printed."""

from __future__ import annotations

import pytest

from pytest_weirdml.extract import code_blocks, extract_code, truncate_output


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
