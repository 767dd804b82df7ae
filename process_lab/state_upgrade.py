"""Upgrade, once, a process-mode state whose dynamic resources name their providers by a module path that is gone.

The engine keeps each dynamic resource's provider pickled by reference, module and class name (pulumi.dynamic
`serialize_provider`: dill, base64), in the resource's `__provider` input and output, and loads it from there for
the resource's refresh, diff and delete; an unchanged resource keeps the record it was made with. So a module path
of a provider class is part of every state that holds one. A state made before components/process/ (3844687) names
`components.process_resources` and `components.node_container_workers`; this rewrites each such record to today's
path, as the engine itself would write it (`serialize_provider` of the provider loaded through the table below),
with `pulumi stack export` and `pulumi stack import`, and leaves every other byte of the state as it was.

`make up` and `make down` run it before the engine (a destroy loads the providers as well). It says one line when
it upgraded something and nothing otherwise. A later move of a provider class adds its old path to MOVED.
Usage: python -m process_lab.state_upgrade STACK (exit 0; 1 when the export or import failed).
"""

from __future__ import annotations

import base64
import io
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import dill

from model import pulumi_state

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
    """Every module a `__provider` record names (dill's pickle: GLOBAL / STACK_GLOBAL operands), read without
    loading anything."""
    import pickletools

    found: set[str] = set()
    strings: list[str] = []
    try:
        for opcode, argument, _ in pickletools.genops(io.BytesIO(base64.b64decode(record))):
            if opcode.name in ("SHORT_BINUNICODE", "BINUNICODE", "UNICODE"):
                strings.append(str(argument))
            elif opcode.name == "STACK_GLOBAL" and len(strings) >= 2:
                found.add(strings[-2])
            elif opcode.name == "GLOBAL":
                found.add(str(argument).split(" ", 1)[0])
    except (ValueError, TypeError):  # not a pickle: not ours to judge
        return set()
    return found


def stale(record: Any) -> bool:
    return isinstance(record, str) and bool(_names(record) & OLD_MODULES)


class _MovedUnpickler(dill.Unpickler):
    """dill's loader, with a moved class found at today's path (and nothing else changed)."""

    def find_class(self, module: str, name: str) -> Any:
        return super().find_class(MOVED.get((module, name), module), name)


def upgraded(record: str) -> str:
    """The record of the same provider at today's path, byte for byte as the engine writes it."""
    from pulumi.dynamic.dynamic import serialize_provider

    provider = _MovedUnpickler(io.BytesIO(base64.b64decode(record))).load()
    return serialize_provider(provider)


def _records(resource: dict[str, Any]) -> Iterator[tuple[dict[str, Any], str]]:
    for part in ("inputs", "outputs"):
        values = resource.get(part) or {}
        if PROVIDER_KEY in values:
            yield values, PROVIDER_KEY


def upgrade_deployment(deployment: dict[str, Any]) -> list[str]:
    """Rewrite, in place, every stale `__provider` record of an exported deployment; the URNs of the resources
    changed."""
    changed: list[str] = []
    for resource in (deployment.get("deployment") or {}).get("resources") or []:
        touched = False
        for values, key in _records(resource):
            if stale(values[key]):
                values[key] = upgraded(values[key])
                touched = True
        if touched:
            changed.append(resource.get("urn", "?"))
    return changed


def checkpoint_is_stale(stack: str, backend: Path | None) -> bool | None:
    """From the file backend's checkpoint, without the CLI: whether a record names an old path; None when there is
    no file backend to read (the export then tells)."""
    if backend is None:
        return None
    path = pulumi_state.checkpoint_file(backend, PROJECT, stack)
    if path is None:
        return False
    return any(stale(values[key]) for resource in pulumi_state.resources(path) for values, key in _records(resource))


Run = Callable[..., subprocess.CompletedProcess]


def upgrade(stack: str, cwd: Path = ROOT, run: Run = subprocess.run, backend: Path | None = None) -> list[str]:
    """Export, rewrite and import the stack's state when it names an old path; the URNs upgraded."""
    backend = pulumi_state.local_backend() if backend is None else backend
    if checkpoint_is_stale(stack, backend) is False:
        return []
    with tempfile.TemporaryDirectory(prefix="gpulab-state.") as folder:
        exported = Path(folder) / "state.json"  # secrets stay ciphertext: export without --show-secrets
        _pulumi(run, cwd, "stack", "export", "--stack", stack, "--file", str(exported))
        deployment = json.loads(exported.read_text())
        changed = upgrade_deployment(deployment)
        if not changed:
            return []
        exported.write_text(json.dumps(deployment))
        _pulumi(run, cwd, "stack", "import", "--stack", stack, "--file", str(exported))
    return changed


def _pulumi(run: Run, cwd: Path, *args: str) -> None:
    done = run(["pulumi", *args], cwd=cwd, capture_output=True, text=True, env=os.environ.copy(), timeout=300)
    if done.returncode != 0:
        last = (done.stderr or done.stdout or "").strip().splitlines()[-1:] or ["no output"]
        raise StateUpgradeError(f"`pulumi {' '.join(args[:2])}` exited {done.returncode}: {last[0]}")


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m process_lab.state_upgrade STACK", file=sys.stderr)
        return 2
    stack = argv[0]
    try:
        changed = upgrade(stack)
    except StateUpgradeError as error:
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
