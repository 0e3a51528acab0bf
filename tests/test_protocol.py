"""The protocols' words: the system prompt and the feedback each protocol gives."""

from __future__ import annotations

import pytest

from pytest_weirdml.protocol import INFORMED, PUBLISHED, Outcome, feedback, system_prompt


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
