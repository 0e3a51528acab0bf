"""The regression gate in a session: ``--weirdml-baseline``, ``--weirdml-save-baseline``.

Before anything runs, every process that collects items (the single process, or each xdist
worker) checks each item against the baseline: an item whose (model, task) the baseline holds
under other conditions (data, protocol, submissions, time limit) is skipped with the reason, so
no model is called for a comparison that would be refused. At the end, on the controller only,
the comparison is computed from the session's records (``report.build``), put in
``summary.json``, printed, turned into JUnit properties of the compared items, and into the exit
status: 1 on a regression (as a failed test), 4 (pytest's usage error) when the comparison was
refused. Then the session is saved as a baseline when asked.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections import defaultdict
from typing import Any

import pytest

from pytest_weirdml import models
from pytest_weirdml.baseline import Baseline, BaselineError, Conditions, from_session, load
from pytest_weirdml.config import GateSettings, Settings
from pytest_weirdml.items import task_of
from pytest_weirdml.loop import plan_run
from pytest_weirdml.models.pool import ModelPool
from pytest_weirdml.records import RunRecord
from pytest_weirdml.report.build import Gate

# Starts the skip reason of an item the baseline refuses; the controller counts these.
REFUSED = "weirdml baseline refused"


def load_baseline(settings: GateSettings) -> Baseline | None:
    """The baseline of ``--weirdml-baseline``, read once per process; a usage error when unreadable."""
    if settings.baseline is None:
        return None
    try:
        return load(settings.baseline)
    except BaselineError as exc:
        raise pytest.UsageError(f"--weirdml-baseline: {exc}") from None


def gate_of(settings: GateSettings, baseline: Baseline | None) -> Gate | None:
    if baseline is None:
        return None
    return Gate(baseline, margin=settings.regression_margin, force=settings.baseline_force)


class BaselineCheck:
    """Registered where items are collected: skips the items the baseline cannot be compared with.

    Each item's conditions are those of the plan its run will get (``loop.plan_run``), with the
    client from the process's model pool."""

    def __init__(self, settings: Settings, pool: ModelPool, baseline: Baseline) -> None:
        self.settings = settings
        self.pool = pool
        self.baseline = baseline

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        settings = self.settings
        if settings.gate.baseline_force:
            return
        for item in items:
            callspec = getattr(item, "callspec", None)
            case = callspec.params.get("weirdml_case") if callspec is not None else None
            spec = task_of(item)
            if case is None or spec is None:
                continue
            name = models.label(case.model)
            cell = self.baseline.cells.get(name, {}).get(spec.name)
            if cell is None:
                continue
            plan = plan_run(
                spec,
                self.pool.get(case.model),
                settings.loop,
                data_key=spec.data_key(settings.data_seed),
                data_seed=settings.data_seed,
            )
            differences = Conditions.of(plan).differences(cell.conditions)
            if differences:
                reason = (
                    f"{REFUSED}: {name} / {spec.name}: {'; '.join(differences)}. Run under the baseline's "
                    "conditions, or compare anyway with --weirdml-baseline-force"
                )
                item.add_marker(pytest.mark.skip(reason=reason))


class Verdicts:
    """Controller side: which items belong to which (model, task), and what became of the gate."""

    def __init__(self) -> None:
        self.nodeids: defaultdict[tuple[str, str], list[str]] = defaultdict(list)
        self.refused: dict[str, None] = {}

    def see(self, report: pytest.TestReport) -> None:
        props = dict(report.user_properties)
        if report.when == "call" and "weirdml_task" in props:
            self.nodeids[(str(props["weirdml_model"]), str(props["weirdml_task"]))].append(report.nodeid)
        if report.skipped and isinstance(report.longrepr, tuple) and REFUSED in str(report.longrepr[2]):
            # "Skipped: weirdml baseline refused: m / t: ..." -> the part after the prefix.
            self.refused[str(report.longrepr[2]).split(f"{REFUSED}: ", 1)[-1]] = None

    def finish(self, session: pytest.Session, comparison: dict[str, Any]) -> None:
        """Exit status and JUnit properties from the comparison of ``summary.json``."""
        if self.refused or comparison.get("refused"):
            if session.exitstatus in (
                pytest.ExitCode.OK,
                pytest.ExitCode.TESTS_FAILED,
                pytest.ExitCode.NO_TESTS_COLLECTED,
            ):
                session.exitstatus = pytest.ExitCode.USAGE_ERROR
        elif (
            comparison.get("regressions") or comparison.get("incomplete")
        ) and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        _junit_properties(session.config, comparison, self.nodeids)


def _junit_properties(
    config: pytest.Config, comparison: dict[str, Any], nodeids: dict[tuple[str, str], list[str]]
) -> None:
    """Each compared item's verdict as JUnit properties (``weirdml_verdict``, ``weirdml_delta``).

    The verdict is known only once every run of a (model, task) has ended, after junitxml has
    turned the items' reports into test cases; the properties are added to those test cases
    before it writes the file. This reaches into junitxml's internals (pytest offers no later
    hook), so a pytest that changes them loses the properties, never the session.
    """
    from _pytest import junitxml

    xml = config.stash.get(junitxml.xml_key, None)
    if xml is None:
        return
    verdicts: dict[tuple[str, str], tuple[str, str]] = {}
    for row in comparison.get("rows", []):
        delta = row["delta"]
        text = f"{delta['mean']:+.4f} [{delta['ci_low']:+.4f}, {delta['ci_high']:+.4f}]"
        for nodeid in nodeids.get((row["model"], row["task"]), []):
            names = junitxml.mangle_test_address(nodeid)
            verdicts[(".".join(names[:-1]), names[-1])] = (row["verdict"], text)
    try:
        for reporter in xml.node_reporters_ordered:
            case = reporter.to_xml()
            found = verdicts.get((case.get("classname", ""), case.get("name", "")))
            if found is None:
                continue
            properties = case.find("properties")
            if properties is None:
                properties = ET.Element("properties")
                case.insert(0, properties)
            for name, value in zip(("weirdml_verdict", "weirdml_delta"), found, strict=True):
                ET.SubElement(properties, "property", name=name, value=value)
    except (AttributeError, TypeError):  # pragma: no cover - a pytest whose junitxml differs
        return


def save(
    settings: GateSettings, runs: list[RunRecord], comparison: dict[str, Any] | None = None, *, source: str = ""
) -> str | None:
    """``--weirdml-save-baseline``: the session's finished runs as a baseline file; its path, or
    why it was not written. A session that regressed against the baseline it was compared with
    does not replace it, so a rolling baseline never rolls onto a regression."""
    if settings.save_baseline is None:
        return None
    if comparison is not None and comparison.get("regressions"):
        return f"not saved: this session regressed against {comparison.get('baseline')}, which stays as it is"
    if comparison is not None and comparison.get("incomplete"):
        return f"not saved: runs of this session were not scored; {comparison.get('baseline')} stays as it is"
    baseline = from_session(runs, source=source)
    if not baseline.cells:
        return None  # nothing finished: an earlier baseline file is kept as it is
    return str(baseline.save(settings.save_baseline))
