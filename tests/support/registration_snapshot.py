"""What the program registers for a config, in a form that can be stored and compared across commits:
per URN its type, parent and dependencies.

`PYTHONPATH=tests/support venv/bin/python -m tests.support.registration_snapshot OUT.json` (from the project folder;
tests/support on the path as pytest puts it, for lab_harness) writes the snapshot of the configs below. The stored
ones were made by the code before a change that had to keep them: tests/snapshots/one-node-registrations.json
before tenants could have several GPU nodes (commit 317f006), tests/snapshots/real-gpu-registrations.json
before MockGpuNode and RealGpuNode were split; one join path for every container worker then added its
`-join-config` and `-join-token-delete` and rewired its `-join` in both, and each GPU workload pod came after the
one before it (both updated in place, everything else as stored). A test
reads today's registrations through the aliases the engine would follow (`as_before`) and proves every stored
resource keeps its URN, parent and dependencies, and only new components were added. Inputs are left out: they
embed script bodies, the host's platform and pins that other changes legitimately alter. A change that adds,
renames or rewires resources on purpose gives the moved ones aliases, or regenerates a snapshot with the command
above."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from lab_harness import lab_config, run_program

from preview.harness import Registration


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


def make_urn(like: str, parent: str, type_: str, name: str) -> str:
    """A URN in `like`'s stack and project, as the mock monitor makes it (pulumi.runtime.mocks.MockMonitor
    .make_urn): the stored snapshots hold mock URNs."""
    stack, project = like.split("::")[0].removeprefix("urn:pulumi:"), like.split("::")[1]
    if parent:
        type_ = parent.split("::")[2].split("$")[-1] + "$" + type_
    return f"urn:pulumi:{stack}::{project}::{type_}::{name}"


def identities(urn: str, registrations: dict[str, Registration]) -> list[tuple[str, str]]:
    """(URN, parent URN) pairs a resource is known by: its own, then those its parent's aliases carry over
    to it, then those its own aliases name; as the engine resolves aliases: a spec leaves out what did not
    change (name, type, parent), and a child follows its parent's former identities."""
    registration = registrations.get(urn)
    if registration is None:
        return [(urn, "")]
    own_parents = identities(registration.parent, registrations) if registration.parent else [("", "")]
    found = [(urn, registration.parent)]
    found += [(make_urn(urn, parent, registration.type, registration.name), parent) for parent, _ in own_parents[1:]]
    for alias in registration.aliases:
        if "urn" in alias:
            found.append((alias["urn"], ""))
            continue
        parents = own_parents
        if alias.get("noParent"):
            parents = [("", "")]
        elif "parentUrn" in alias:
            parents = identities(alias["parentUrn"], registrations)
        name, type_ = alias.get("name", registration.name), alias.get("type", registration.type)
        found += [(make_urn(urn, parent, type_, name), parent) for parent, _ in parents]
    return found


def as_before(registrations: dict[str, Registration], before: set[str]) -> tuple[dict[str, Any], list[str]]:
    """The registrations in a stored snapshot's terms: each resource under the URN it had there (its own, or
    the one an alias makes the engine adopt), its parent and dependencies likewise; and the URNs that
    had no counterpart there (new resources)."""

    def former(urn: str) -> tuple[str, str] | None:
        return next(((old, parent) for old, parent in identities(urn, registrations) if old in before), None)

    def old_urn(urn: str) -> str:
        found = former(urn)
        return found[0] if found else urn

    mapped: dict[str, Any] = {}
    new = []
    for urn, registration in sorted(registrations.items()):
        found = former(urn)
        if found is None:
            new.append(urn)
            continue
        old, parent = found
        assert old not in mapped, f"{old} is claimed by two resources"
        mapped[old] = {
            "type": old.split("::")[2].split("$")[-1],
            "parent": old_urn(parent) if parent else "",
            "dependencies": sorted(old_urn(dependency) for dependency in registration.dependencies),
        }
    return mapped, new


def snapshots() -> dict[str, Any]:
    return {
        "reference": snapshot(lab_config()),
        "ssh-gpu-node": snapshot(ssh_config(), secrets=SSH_SECRETS),
        "real-gpus": snapshot(real_gpu_config(), secrets=SSH_SECRETS),
    }


if __name__ == "__main__":
    Path(sys.argv[1]).write_text(json.dumps(snapshots(), indent=1, sort_keys=True) + "\n")
