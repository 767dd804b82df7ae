"""What the program registers for a config, in a form that can be stored and compared across commits:
per URN its type, parent, dependencies and inputs (with this checkout's paths and Python replaced).

`python tests/registration_snapshot.py OUT.json` writes the snapshot of the configs below; the stored
snapshot (tests/snapshots/one-node-registrations.json) was made by the code before tenants could have
several GPU nodes, so a test can prove the one-node stacks register exactly what they did."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lab_harness import ROOT, lab_config, run_program


def ssh_config() -> dict[str, Any]:
    """The reference stack with tenant-a on two SSH workers, the second carrying the cards."""
    config = lab_config()
    tenant = dict(config["tenants"][0])
    tenant.update(
        workerMode="ssh",
        workers=[{"host": "10.0.0.21", "name": "cpu-1"}, {"host": "10.0.0.22", "name": "gpu-1", "gpuNode": True}],
    )
    config["tenants"] = [tenant, *config["tenants"][1:]]
    return config


CONFIGS = {"reference": lab_config, "ssh-gpu-node": ssh_config}
SSH_SECRETS = {"sshPrivateKey": "-----BEGIN OPENSSH PRIVATE KEY-----\nx\n-----END OPENSSH PRIVATE KEY-----\n"}


def _normalise(value: Any) -> Any:
    if isinstance(value, str):
        return value.replace(sys.executable, "<python>").replace(str(ROOT), "<root>")
    if isinstance(value, dict):
        return {key: _normalise(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_normalise(item) for item in value]
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    # Assets and archives: their kind and what they point at.
    return {type(value).__name__: _normalise(str(getattr(value, "path", None) or getattr(value, "uri", value)))}


def snapshot(config: dict[str, Any], secrets: dict[str, str] | None = None) -> dict[str, Any]:
    program = run_program(config, secrets=secrets)
    return {
        urn: {
            "type": r.type,
            "parent": r.parent,
            "dependencies": sorted(r.dependencies),
            "inputs": _normalise(r.inputs),
        }
        for urn, r in sorted(program.registrations.items())
    }


def snapshots() -> dict[str, Any]:
    return {
        "reference": snapshot(lab_config()),
        "ssh-gpu-node": snapshot(ssh_config(), secrets=SSH_SECRETS),
    }


if __name__ == "__main__":
    Path(sys.argv[1]).write_text(json.dumps(snapshots(), indent=1, sort_keys=True) + "\n")
