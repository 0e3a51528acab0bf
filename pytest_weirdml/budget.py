"""``--weirdml-max-cost=USD``: a budget guard. No new run starts once the session's spending
reaches the cap; runs in flight finish, and the items not started are skipped with the reason.

The spending is the sum of the session's recorded iteration costs (``records.jsonl``: every
worker appends to it, so each sees what all spent). A model whose prices are unknown cannot be
held to a cap, so choosing one under a cap is a usage error naming the price settings.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_weirdml.items import task_of
from pytest_weirdml.models import OFFLINE, Catalog
from pytest_weirdml.records import IterationRecord
from pytest_weirdml.session import SessionDir

# The skip reason's start: the summary finds the items the cap kept from running by it.
NOT_RUN = "not run: the session's spending reached --weirdml-max-cost"


def check_prices(names: tuple[str, ...], catalog: Catalog, max_cost: float) -> None:
    """``ValueError`` naming the price settings for a chosen model whose prices are unknown."""
    for name in names:
        if OFFLINE.get(name.partition(":")[0]) is not None:
            continue  # calls no API: costs nothing
        config = catalog.lookup(name)
        if config.price_input is None or config.price_output is None:
            raise ValueError(
                f"--weirdml-max-cost=${max_cost:g} needs every model's prices, and {name} ({config.spec}) has "
                f'none: set price_input and price_output (USD per million tokens) under [tool.weirdml.models."'
                f'{config.spec}"] in pyproject.toml (or [models."{config.spec}"] in weirdml.toml)'
            )


def spent_usd(session_dir: Path) -> float:
    """What the session's recorded iterations cost (unknown costs count as nothing)."""
    session = SessionDir(session_dir)
    return sum(r.usage.cost_usd or 0.0 for r in session.read() if isinstance(r, IterationRecord))


class CostCap:
    """Registered in every process that runs items, when a cap is set."""

    def __init__(self, session_dir: Path, max_cost: float) -> None:
        self.session_dir = session_dir
        self.max_cost = max_cost

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        if task_of(item) is None:
            return
        spent = spent_usd(self.session_dir)
        if spent >= self.max_cost:
            pytest.skip(f"{NOT_RUN}=${self.max_cost:g} (${spent:.4f} spent)")
