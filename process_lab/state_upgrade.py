"""Upgrade, once, a process-mode state whose dynamic resources name their providers by a module path that is gone.

The engine keeps each dynamic resource's provider pickled by reference, module and class name (pulumi.dynamic
`serialize_provider`: dill, base64), in the resource's `__provider` input and output, and loads it from there for
the resource's refresh, diff and delete; an unchanged resource keeps the record it was made with. So a module path
of a provider class is part of every state that holds one. A state made before components/process/ (3844687) names
`components.process_resources` and `components.node_container_workers`; this rewrites each such record to today's
path, as the engine itself would write it (`serialize_provider` of the provider loaded through the table below),
with `pulumi stack export` and `pulumi stack import`, and leaves every other value of the state as it was.

The engine keeps a record as a secret (pulumi.dynamic marks `__provider` secret), so the checkpoint holds it as
ciphertext: it is read from `pulumi stack export --show-secrets`, and the deployment goes back by `pulumi stack
import` on its standard input, where the CLI encrypts every plaintext secret again. The deployment, kubeconfigs
included, stays in this process's memory and the two pipes: no file holds it.

`make up` and `make down` run it before the engine (a destroy loads the providers as well). It says one line when
it upgraded something and nothing otherwise. A later move of a provider class adds its old path to MOVED.
Usage: python -m process_lab.state_upgrade STACK (exit 0; 1 when the export or import failed).
"""

from __future__ import annotations

import base64
import io
import json
import os
import pickletools
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import dill

from boundary import pulumi_state
from process_lab import commands
from process_lab.commands import ProcessLabError

ROOT = Path(__file__).resolve().parents[1]
PROJECT = "gpulab"  # Pulumi.yaml's name
PROVIDER_KEY = "__provider"

# (old module, class) -> today's module, for every provider class that moved.
MOVED: dict[tuple[str, str], str] = {
    ("components.process_resources", "ControlPlaneProvider"): "components.process.control_plane",
    ("components.process_resources", "KwokNodesProvider"): "components.process.kwok_workers",
    ("components.process_resources", "HamiProvider"): "components.process.gpu_node",
    ("components.process_resources", "GpuInventoryProvider"): "components.process.gpu_node",
    ("components.node_container_workers", "LabNetworkProvider"): "components.process.node_container_workers",
    ("components.node_container_workers", "NodeContainerProvider"): "components.process.node_container_workers",
}
OLD_MODULES = {module for module, _ in MOVED}


class StateUpgradeError(Exception):
    pass


def _names(record: str) -> set[str]:
    """Every string a `__provider` record holds (dill's pickle: the operands of GLOBAL, and the strings
    STACK_GLOBAL takes its module and name from, however memoized), read without loading anything. Taken whole: a
    string that only looks like an old module path costs one rewrite, which leaves a record of today's as it was."""
    found: set[str] = set()
    try:
        for opcode, argument, _ in pickletools.genops(io.BytesIO(base64.b64decode(record))):
            if opcode.name in ("SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "UNICODE"):
                found.add(str(argument))
            elif opcode.name == "GLOBAL":
                found.add(str(argument).split(" ", 1)[0])
    except (ValueError, TypeError):  # not a pickle: not ours to judge
        return set()
    return found


# The key of a value of a special type in Pulumi's JSON (the Python SDK 3.272.0, pulumi/runtime/rpc.py _special_sig_key;
# a secret is marked with the value 1b47061264138c4ac30d75fd1eb44270, _special_secret_sig there).
SECRET_SIGNATURE = "4dabf18193072939515e22adb298388d"


def _plain(record: Any) -> str | None:
    """A record's base64 text: a plain string, or an exported secret's `plaintext` (its value as JSON)."""
    if isinstance(record, str):
        return record
    if isinstance(record, dict) and SECRET_SIGNATURE in record and isinstance(record.get("plaintext"), str):
        try:
            value = json.loads(record["plaintext"])
        except ValueError:
            return None
        return value if isinstance(value, str) else None
    return None


def stale(record: Any) -> bool:
    """Whether a record (plain or an exported secret) names a module a provider left."""
    text = _plain(record)
    return text is not None and bool(_names(text) & OLD_MODULES)


def _rewritten(record: Any) -> Any:
    """The record with today's path, in the form it came in (a secret stays a secret)."""
    text = _plain(record)
    assert text is not None
    if isinstance(record, str):
        return upgraded(text)
    return {**record, "plaintext": json.dumps(upgraded(text))}


class _MovedUnpickler(dill.Unpickler):
    """dill's loader, with a moved class found at today's path (and nothing else changed)."""

    def find_class(self, module: str, name: str) -> Any:
        return super().find_class(MOVED.get((module, name), module), name)


def upgraded(record: str) -> str:
    """The record of the same provider at today's path, byte for byte as the engine writes it."""
    from pulumi.dynamic.dynamic import serialize_provider

    provider = _MovedUnpickler(io.BytesIO(base64.b64decode(record))).load()
    return serialize_provider(provider)


def _records(resource: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The resource's inputs and outputs that hold a `__provider` record."""
    for part in ("inputs", "outputs"):
        values = resource.get(part) or {}
        if PROVIDER_KEY in values:
            yield values


def upgrade_deployment(deployment: dict[str, Any]) -> list[str]:
    """Rewrite, in place, every stale `__provider` record of an exported deployment; the URNs of the resources
    changed."""
    changed: list[str] = []
    for resource in (deployment.get("deployment") or {}).get("resources") or []:
        touched = False
        for values in _records(resource):
            record = values[PROVIDER_KEY]
            if stale(record) and (rewritten := _rewritten(record)) != record:
                values[PROVIDER_KEY] = rewritten
                touched = True
        if touched:
            changed.append(resource.get("urn", "?"))
    return changed


def may_be_stale(stack: str, backend: Path | None) -> bool:
    """From the file backend's checkpoint, without the CLI: False when no record can name an old path (no stack,
    or every record a plain string naming today's); True when one does or is a secret (ciphertext: the export
    tells). With no file backend to read, True."""
    if backend is None:
        return True
    path = pulumi_state.checkpoint_file(backend, PROJECT, stack)
    if path is None:
        return False
    records = [values[PROVIDER_KEY] for resource in pulumi_state.resources(path) for values in _records(resource)]
    return any(not isinstance(record, str) or stale(record) for record in records)


Run = Callable[..., subprocess.CompletedProcess]
CLI_TIMEOUT = 300  # seconds for one export or import: a few on this VM for a lab's state


def upgrade(stack: str, cwd: Path = ROOT, run: Run = commands.run, backend: Path | None = None) -> list[str]:
    """Export, rewrite and import the stack's state when it names an old path; the URNs upgraded."""
    backend = pulumi_state.local_backend() if backend is None else backend
    if not may_be_stale(stack, backend):
        return []
    exported = _pulumi(run, cwd, None, "stack", "export", "--stack", stack, "--show-secrets")
    deployment = json.loads(exported)
    changed = upgrade_deployment(deployment)
    if changed:
        _pulumi(run, cwd, json.dumps(deployment), "stack", "import", "--stack", stack)
    return changed


def _pulumi(run: Run, cwd: Path, given: str | None, *args: str) -> str:
    """The CLI's standard output, within a deadline (process_lab.commands.run: TERM, then KILL, to all it started);
    on a failure its last line of standard error, never its output (the deployment, secrets in the clear)."""
    done = run(
        ["pulumi", "--cwd", str(cwd), *args],
        env=os.environ.copy(),
        what=f"pulumi {' '.join(args[:2])}",
        timeout=CLI_TIMEOUT,
        stdin=given,
        check=False,
    )
    if done.returncode != 0:
        last = (done.stderr or "").strip().splitlines()[-1:] or ["no message"]
        raise StateUpgradeError(f"`pulumi {' '.join(args[:2])}` exited {done.returncode}: {last[0]}")
    return done.stdout


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m process_lab.state_upgrade STACK", file=sys.stderr)
        return 2
    stack = argv[0]
    try:
        changed = upgrade(stack)
    except (StateUpgradeError, ProcessLabError) as error:
        print(f"[gpulab] stack {stack}: upgrading its state's provider paths failed: {error}", file=sys.stderr)
        return 1
    if changed:
        print(
            f"[gpulab] stack {stack}: {len(changed)} resource(s) named process mode's providers by their paths before "
            "components/process/; their records now name today's (pulumi stack export, then import)",
            file=sys.stderr,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
