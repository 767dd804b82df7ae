"""What the program registers for a config, in a form that can be stored and compared across commits:
per URN its type, parent and dependencies.

`python tests/registration_snapshot.py OUT.json` writes the snapshot of the configs below; the stored
snapshot (tests/snapshots/one-node-registrations.json) was made by the code before tenants could have
several GPU nodes (commit 317f006), so a test can prove the one-node stacks register the same
resources, URNs and dependency graph as before. Inputs are left out: they embed script bodies, the
host's platform and pins that other changes legitimately alter. A change that adds, renames or
rewires resources on purpose regenerates the snapshot with the command above."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lab_harness import lab_config, run_program


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


def real_gpu_config() -> dict[str, Any]:
    """The reference stack with tenant-a on an SSH worker with real GPUs (gpuMode real)."""
    config = lab_config()
    tenant = dict(config["tenants"][0])
    tenant.update(workerMode="ssh", gpuMode="real", workers=[{"host": "10.0.0.21", "user": "ubuntu"}])
    config["tenants"] = [tenant, *config["tenants"][1:]]
    return config


CONFIGS = {"reference": lab_config, "ssh-gpu-node": ssh_config, "real-gpus": real_gpu_config}
SSH_SECRETS = {"sshPrivateKey": "-----BEGIN OPENSSH PRIVATE KEY-----\nx\n-----END OPENSSH PRIVATE KEY-----\n"}


def snapshot(config: dict[str, Any], secrets: dict[str, str] | None = None) -> dict[str, Any]:
    program = run_program(config, secrets=secrets)
    return {
        urn: {"type": r.type, "parent": r.parent, "dependencies": sorted(r.dependencies)}
        for urn, r in sorted(program.registrations.items())
    }


def snapshots() -> dict[str, Any]:
    return {
        "reference": snapshot(lab_config()),
        "ssh-gpu-node": snapshot(ssh_config(), secrets=SSH_SECRETS),
        "real-gpus": snapshot(real_gpu_config(), secrets=SSH_SECRETS),
    }


if __name__ == "__main__":
    Path(sys.argv[1]).write_text(json.dumps(snapshots(), indent=1, sort_keys=True) + "\n")
