"""What a sandbox offers a script, asked from inside it: the Python version and the announced
packages that really import, with their versions. The system prompt states exactly this.

Besides the pinned requirements, the published sandbox offers torchvision and torchaudio. Their
builds must match torch's exactly, which only some hosts can install (the Dockerfile image does;
a CPU-only torch has no matching torchvision on PyPI), so they are optional: announced where they
import, left out quietly where they do not.

A first probe reads the packages' metadata and a fingerprint of every distribution the
interpreter sees (cheap). Importing the packages is slow (torch alone takes seconds), so its
outcome is cached on disk per (backend, fingerprint): a changed or added distribution is a new
fingerprint and is imported afresh.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import warnings
from pathlib import Path

from pytest_weirdml.errors import SandboxError
from pytest_weirdml.sandbox import Environment, Limits, Sandbox, cache_home, requirement_names

MARK = "WEIRDML-ENV "
OPTIONAL_PACKAGES = ("torchvision", "torchaudio")

METADATA_PROBE = """\
import hashlib, json, platform, sys, importlib.metadata as md
names = {names!r}

def norm(name):
    return name.lower().replace("-", "_").replace(".", "_")

modules = {{}}
for module, dists in md.packages_distributions().items():
    for dist in dists:
        modules.setdefault(norm(dist), []).append(module)
found = {{}}
for name in names:
    try:
        version = md.version(name)
    except md.PackageNotFoundError:
        continue
    tops = sorted(m for m in modules.get(norm(name), []) if not m.startswith("_"))
    # scikit-learn -> sklearn, pillow -> PIL, torch -> torch (not functorch)
    top = next((m for m in tops if norm(m) == norm(name)), tops[0] if tops else norm(name))
    found[name] = [version, top]
seen = sorted(f"{{d.metadata['Name']}}=={{d.version}}@{{d.locate_file('')}}" for d in md.distributions())
digest = hashlib.sha256(json.dumps([sys.version, sys.executable, sys.path, seen]).encode()).hexdigest()
print({mark!r} + json.dumps({{"python": platform.python_version(), "packages": found, "fingerprint": digest}}))
"""

IMPORT_PROBE = """\
import importlib, json
failed = {{}}
for name, module in {modules!r}.items():
    try:
        importlib.import_module(module)
    except BaseException as exc:
        failed[name] = f"import {{module}}: {{type(exc).__name__}}: {{exc}}"[:300]
print({mark!r} + json.dumps(failed))
"""


class MissingPackagesWarning(UserWarning):
    """The sandbox's interpreter lacks packages of the sandbox requirements list."""


def _run(sandbox: Sandbox, script: str) -> object:
    with tempfile.TemporaryDirectory() as empty:
        result = sandbox.run(script, Path(empty), Limits(time_s=120))
    for line in result.output.splitlines():
        if line.startswith(MARK):
            return json.loads(line.removeprefix(MARK))
    raise SandboxError(f"the {sandbox.name} sandbox could not run a probe script: {result.output[-2000:]}")


def _import_failures(sandbox: Sandbox, modules: dict[str, str], fingerprint: str) -> dict[str, str]:
    key = hashlib.sha256(f"{sandbox.name}\0{fingerprint}\0{sorted(modules.items())}".encode()).hexdigest()[:24]
    cached = cache_home() / "probes" / f"{key}.json"
    try:
        return dict(json.loads(cached.read_text()))
    except (OSError, ValueError):
        pass
    failed = _run(sandbox, IMPORT_PROBE.format(modules=modules, mark=MARK))
    assert isinstance(failed, dict)
    try:
        cached.parent.mkdir(parents=True, exist_ok=True)
        partial = cached.with_suffix(f".{id(failed)}.tmp")
        partial.write_text(json.dumps(failed))
        partial.replace(cached)
    except OSError:
        pass  # only a cache
    return failed


def probe_environment(sandbox: Sandbox, *, fix: str) -> Environment:
    """Run the probes inside ``sandbox``; warn, with ``fix``, about announced packages it lacks."""
    names = requirement_names()
    raw = _run(sandbox, METADATA_PROBE.format(names=[*names, *OPTIONAL_PACKAGES], mark=MARK))
    assert isinstance(raw, dict)
    found: dict[str, list[str]] = raw["packages"]
    failed = _import_failures(sandbox, {name: top for name, (_, top) in found.items()}, raw["fingerprint"])
    packages = {name: version for name, (version, _) in found.items() if name not in failed}
    missing = [name for name in names if name not in found]
    failed = {name: why for name, why in failed.items() if name not in OPTIONAL_PACKAGES}
    if missing or failed:
        # The system prompt announces only what imports; say what the scripts will lack.
        lacks = ", ".join(missing + [f"{name} ({why})" for name, why in failed.items()])
        warnings.warn(f"the {sandbox.name} sandbox's Python lacks {lacks}; {fix}", MissingPackagesWarning, stacklevel=3)
    # Where a GPU is leased the session names it instead (``leases.describe``).
    return Environment(python=raw["python"], packages=packages, device=f"CPU only ({os.cpu_count()} cores), no GPU")
