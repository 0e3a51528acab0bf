"""Exceptions the harness raises, each mapped to one pytest outcome.

- ``TaskError``: a task directory is broken (collection error for that task).
- ``DataUnavailable``: an offline data source is absent (the task's items skip).
- ``HarnessError`` and its children: the harness, a sandbox or a provider broke;
  the item errors, and the model is never scored 0 for it.
"""

from __future__ import annotations


class WeirdMLError(Exception):
    """Base class of every error raised by pytest-weirdml."""


class TaskError(WeirdMLError):
    """A task directory cannot be used; the message names the file and the fix."""


class DataUnavailable(WeirdMLError):
    """A task's data source is missing on this machine; the message says how to get it."""


class HarnessError(WeirdMLError):
    """Something outside the model's control failed while running an item."""


class SandboxError(HarnessError):
    """The sandbox could not run a script (not the script's fault)."""


class ModelError(HarnessError):
    """A model provider failed in a way that is not the model's answer."""
