"""No quiet unisolated runs: a session that calls a provider never runs its scripts as plain
subprocesses unless ``--weirdml-allow-unisolated`` says so.

A model behind a provider is outside the user's control; its scripts, unisolated, could read the
API keys in the harness's environment (``/proc``), the hidden answers in the data cache and the
user's files, and reach the network. So is an agent answering through ``queue:DIR``. The other
offline models (``reference``, ``baseline``, ``replay:``, ``human``) run what the user gave them,
so they may run unisolated, with ``NotIsolatedWarning``. Every record says how its script was
isolated (``Sandbox.isolation``) either way.
"""

from __future__ import annotations

from pytest_weirdml.models import OFFLINE

# Offline models whose answers come from a program outside the user's control.
OUTSIDE_AGENTS = frozenset({"queue"})


def provider_models(names: tuple[str, ...]) -> list[str]:
    """The chosen models answered from outside the user's control: every provider model (all but
    the offline ones) and the outside agents."""
    return [
        name
        for name in names
        if OFFLINE.get(name.partition(":")[0]) is None or name.partition(":")[0] in OUTSIDE_AGENTS
    ]


def unisolated_refusal(names: tuple[str, ...], why: str) -> str | None:
    """Why a session with these models must not run its scripts unisolated, or None (offline only)."""
    providers = provider_models(names)
    if not providers:
        return None
    who = "is answered by an outside agent" if providers[0].partition(":")[0] in OUTSIDE_AGENTS else "calls a provider"
    return (
        f"--weirdml-model={providers[0]} {who}, but the local sandbox cannot isolate its scripts "
        f"({why}): they would run as plain subprocesses that can read your files, the API keys in this "
        "process's environment and the hidden answers, and reach the network. Install bubblewrap (apt-get "
        "install bubblewrap) or allow it user namespaces, run the scripts in Docker with "
        "--weirdml-sandbox=docker, or accept that with --weirdml-allow-unisolated"
    )


def local_refusal(names: tuple[str, ...]) -> str | None:
    """The refusal for the local sandbox here (bubblewrap missing or refused), or None."""
    if not provider_models(names):
        return None
    from pytest_weirdml.sandbox.local import bwrap_works

    ok, why = bwrap_works()
    return None if ok else unisolated_refusal(names, why)
