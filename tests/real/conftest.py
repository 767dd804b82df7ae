"""The real tier: the real Kubernetes programs (`make tools`) judge gpulab's layers.

`make test-real` runs it (GPULAB_REAL=1) and stops with one line when a program is missing. Anywhere else
(`make test`, a bare pytest) the tier skips with one line: it starts a control plane of its own, which a
suite spread over several workers would start once per worker, and it is no part of `make test`'s budget.

One control plane (the process lab's, on 127.0.0.1) serves the judges: tenant-a of Pulumi.dev.yaml as the
program would set it up (its namespace, quota and inventory, its admission policies, its GPU node with the
inventory the program's script writes), read through the project's own config loader and object builders.
test_process_lab.py runs the process lab's own tenants.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from cel_harness import hami_webhook
from shared_data import ROOT

from components.docker.hami_chart import HAMI_NAMESPACE
from model.catalog import REGISTER_ANNOTATION, Card, gpu_capacity, register_annotation
from model.config import Tenant
from model.config.loading import load_stack_file
from model.kube_objects.admission_policy import policy_objects
from model.kube_objects.tenant_objects import tenant_objects
from model.names import DENY_POLICY, WARN_POLICY
from process_lab.commands import run
from process_lab.gpu_nodes import node_object, node_status
from tests.acceptance.helpers import gpu_pod, wait_until
from tests.real import cluster as kwok
from tests.real.cluster import NOT_BUILT, POLL, Cluster

REQUESTED = os.environ.get("GPULAB_REAL") == "1"
TENANT = "tenant-a"
# Where the double is compared with the API server: a namespace without quota, so that only the policies judge.
JUDGED_NAMESPACE = "gpulab-judged"
WAIT = 90  # seconds for any one condition of the setup


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    real = [item for item in items if "tests/real/" in str(item.fspath).replace("\\", "/")]
    if not real:
        return
    for item in real:
        item.add_marker(pytest.mark.real)
    missing = kwok.missing()
    if REQUESTED and missing:
        # Asked for and impossible: a failure, never a vacuous pass.
        raise pytest.UsageError(f"{NOT_BUILT} ({', '.join(missing)} missing in {kwok.bin_dir()})")
    if not REQUESTED:
        # One line in the summary for the whole tier: its first case skips, the others are deselected.
        reason = NOT_BUILT if missing else "the real programs judge with `make test-real`"
        real[0].add_marker(pytest.mark.skip(reason=f"{reason} ({len(real)} cases)"))
        rest = {id(item) for item in real[1:]}
        config.hook.pytest_deselected(items=real[1:])
        items[:] = [item for item in items if id(item) not in rest]


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    started = kwok.create(tmp_path_factory.mktemp("real"))
    try:
        yield started
    finally:
        problems = kwok.delete(started)
        assert not problems, "\n".join(problems)


@dataclass
class TenantLab:
    tenant: Tenant
    deny: dict  # the ValidatingAdmissionPolicies as the program builds them
    warn: dict
    namespace: str  # the tenant's own namespace
    quota: dict  # its ResourceQuota as the program builds it
    node: str
    legacy: dict  # a Deployment created before the policies (user's spelling), which they would refuse now
    judged: str = JUDGED_NAMESPACE  # where requests are judged by the policies alone

    def __repr__(self) -> str:  # short, in a failing case's report
        return f"TenantLab({self.tenant.name}, namespace={self.namespace}, judged={self.judged})"


def legacy_deployment(image: str) -> dict:
    """A 90000 MB Deployment from before the policies existed: retiring it must still work."""
    pod = gpu_pod("legacy", image, gpumem=90000, gpucores=30)  # a template: HAMi's webhook mutates Pods only
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "legacy", "namespace": JUDGED_NAMESPACE, "labels": {"app": "legacy"}},
        # paused: the deployment controller creates no ReplicaSet, which the policies would refuse meanwhile.
        "spec": {
            "replicas": 3,
            "paused": True,
            "selector": {"matchLabels": {"app": "legacy"}},
            "template": {"metadata": {"labels": {"app": "legacy"}}, "spec": pod["spec"]},
        },
    }


@pytest.fixture(scope="session")
def tenant_lab(cluster: Cluster) -> TenantLab:
    """Tenant-a as the program sets it up, through its own builders: namespace, quota and inventory
    (tenant_objects), its GPU node and the inventory script, then the admission policies (policy_objects)."""
    # The test fixture's reference stack, whose tenants still name HAMi v2.8.3: these judges were written for that
    # release's rules and messages; the shipped stack moved to v2.10.0 on 2026-12-08.
    lab = load_stack_file(ROOT / "tests" / "fixtures" / "lab" / "Pulumi.dev.yaml")
    tenant = next(t for t in lab.tenants if t.name == TENANT)
    [namespace] = tenant.namespaces
    [gpu_node] = tenant.gpu_nodes()
    namespaces, quotas, inventory = tenant_objects(tenant, lab, gpu_node.cards, gpu_node.name)
    judged = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": JUDGED_NAMESPACE}}
    apply = ("apply", "--server-side", "--field-manager=gpulab", "-f", "-")
    cluster.ok(*apply, stdin=[*namespaces, *quotas.values(), inventory, judged])
    add_gpu_node(cluster, gpu_node.name, gpu_node.cards)
    legacy = legacy_deployment(lab.versions.workload_image)
    cluster.ok("create", "-f", "-", stdin=legacy)
    objects = policy_objects(tenant)
    cluster.ok(*apply, stdin=objects)
    policies = {o["metadata"]["name"]: o for o in objects if o["kind"] == "ValidatingAdmissionPolicy"}

    # What must hold before a case can be judged, each a condition of the real cluster.
    def type_checked(name: str) -> bool:
        policy = cluster.get("validatingadmissionpolicy", name) or {}
        return policy.get("status", {}).get("observedGeneration") == policy.get("metadata", {}).get("generation")

    for name in policies:
        wait_until(lambda name=name: type_checked(name), WAIT, f"the API server to type-check {name}", interval=POLL)
    # A policy is enforced once the admission plugin's informer has it and its binding: 90000 MB on an 80 GB card
    # (refused by the deny policy under either HAMi release) and 120 % cores (a warning of the advice policy) show it.
    probe = hami_webhook(gpu_pod("probe", "x", gpumem=90000, gpucores=120))
    dry_run = ("create", "--dry-run=server", "-n", JUDGED_NAMESPACE, "-f", "-")

    def enforced() -> str:
        stderr = cluster.kubectl(*dry_run, stdin=probe).stderr
        return stderr if f"'{DENY_POLICY}'" in stderr and f"'{WARN_POLICY}'" in stderr else ""

    wait_until(enforced, WAIT, f"{DENY_POLICY} to deny and {WARN_POLICY} to warn at admission", interval=POLL)
    quota = quotas[namespace]
    where = ("resourcequota", "-n", namespace, quota["metadata"]["name"])
    wait_until(
        lambda: (cluster.get(*where) or {}).get("status", {}).get("hard"),
        WAIT,
        f"the quota controller to fill status.hard of {namespace}/{quota['metadata']['name']}",
        interval=POLL,
    )
    for each in (namespace, JUDGED_NAMESPACE):
        wait_until(
            lambda each=each: cluster.get("serviceaccount", "-n", each, "default"),
            WAIT,
            f"service account {each}/default (every Pod create needs it)",
            interval=POLL,
        )
    return TenantLab(tenant, policies[DENY_POLICY], policies[WARN_POLICY], namespace, quota, gpu_node.name, legacy)


def add_gpu_node(cluster: Cluster, name: str, cards: list[Card]) -> None:
    """The GPU node as the lab gets it: registered (the process lab's KWOK node, without the register
    annotation) with the status its kubelet and device plugin report (node_status), then given its cards by
    the script the program runs once the node has joined (scripts/apply-gpu-inventory.sh: annotation +
    capacity), fed as the program feeds it (components/docker/mock_gpu_node.py)."""
    node = node_object(name, cards)
    del node["metadata"]["annotations"][REGISTER_ANNOTATION]
    cluster.ok("create", "-f", "-", stdin=node)
    cluster.ok("patch", "node", name, "--subresource=status", "--type=merge", "-p", json.dumps(node_status(cards)))
    environment = {
        "NODE_NAME": name,
        "REGISTER_JSON": register_annotation(cards),
        "GPU_CAPACITY": str(gpu_capacity(cards)),
        "HAMI_NAMESPACE": HAMI_NAMESPACE,
    }
    script = run(
        ["bash", ROOT / "scripts" / "apply-gpu-inventory.sh"],
        env={**cluster.env(), **environment},
        what="scripts/apply-gpu-inventory.sh",
        timeout=120,
        stdin=cluster.kubeconfig.read_text(),
        check=False,
    )
    assert script.returncode == 0, f"apply-gpu-inventory.sh failed ({script.returncode}): {script.stderr}"


@pytest.fixture(scope="session")
def real_bin() -> Path:
    """The folder of the real programs (test_process_lab's control planes)."""
    return kwok.bin_dir()


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the checkout for the real engine (tests/real/engine.py), one per test module."""
    from tests.real.engine import engine_project

    return engine_project(tmp_path_factory)
