"""The three ways a stack file says where a tenant's cards are (`gpus`, `nodes`,
`workers[].gpus` with `gpuNode`) are read into one list of nodes (model/config/nodes.py), and the tenant's
own checks are small named rules (model/config/rules.py)."""

from __future__ import annotations

import pytest
from lab_harness import with_pushed_plugin

from model.config import ConfigError, Tenant, parse_config
from model.config.nodes import TenantNode
from model.config.rules import TENANT_RULES, Check

L4 = [{"model": "L4", "count": 1}]
TWO_L4 = [{"model": "L4", "count": 2}]


def tenant_of(**keys: object):
    return parse_config(with_pushed_plugin({"tenants": [{"name": "tenant-a", **keys}]})).tenants[0]


def error_for(**keys: object) -> str:
    with pytest.raises(ConfigError) as raised:
        parse_config({"tenants": [{"name": "tenant-a", **keys}]})
    return str(raised.value)


def test_gpus_is_one_container_with_the_tenant_s_card_ids() -> None:
    tenant = tenant_of(gpus=TWO_L4)
    [node] = tenant.declared_nodes
    assert (node.name, node.card_stem, node.declared_in, node.worker) == ("tenant-a-worker", "tenant-a", "gpus", None)
    assert [card.id for card in tenant.cards()] == ["GPU-MOCK-tenant-a-0", "GPU-MOCK-tenant-a-1"]
    assert tenant.gpu_node_name() == "tenant-a-worker" == tenant.worker_node_names()[0]


def test_nodes_are_one_container_each_with_the_node_s_card_ids() -> None:
    tenant = tenant_of(nodes=[{"name": "gpu-1", "gpus": L4}, {"gpus": TWO_L4}])
    assert [(n.name, n.card_stem, n.declared_in) for n in tenant.declared_nodes] == [
        ("tenant-a-gpu-1", "tenant-a-gpu-1", "nodes"),
        ("tenant-a-worker-1", "tenant-a-worker-1", "nodes"),
    ]
    assert [len(node.cards) for node in tenant.gpu_nodes()] == [1, 2]
    assert tenant.cards()[-1].id == "GPU-MOCK-tenant-a-worker-1-1"


def test_ssh_workers_are_one_node_each_and_the_gpu_node_holds_the_tenant_s_gpus() -> None:
    workers = [{"host": "10.1.0.1"}, {"host": "10.1.0.2", "gpuNode": True, "name": "box"}]
    tenant = tenant_of(workerMode="ssh", workers=workers, gpus=L4)
    assert [(n.name, len(n.gpus), n.declared_in) for n in tenant.declared_nodes] == [
        ("tenant-a-worker-0", 0, "workers"),
        ("box", 1, "gpus"),
    ]
    assert [n.worker.host for n in tenant.declared_nodes if n.worker] == ["10.1.0.1", "10.1.0.2"]
    assert tenant.gpu_node_name() == "box" and tenant.cards()[0].id == "GPU-MOCK-tenant-a-0"
    unmarked = tenant_of(workerMode="ssh", workers=[workers[0], {"host": "10.1.0.2"}], gpus=L4)
    assert unmarked.gpu_node_name() == "tenant-a-worker-0", "without gpuNode the first worker holds them"


def test_ssh_workers_with_their_own_gpus_are_each_a_gpu_node() -> None:
    workers = [{"host": "10.1.0.1", "gpus": L4}, {"host": "10.1.0.2"}, {"host": "10.1.0.3", "gpus": TWO_L4}]
    tenant = tenant_of(workerMode="ssh", workers=workers)
    assert len(tenant.declared_nodes) == 3 and all(isinstance(n, TenantNode) for n in tenant.declared_nodes)
    assert [(node.name, len(node.cards)) for node in tenant.gpu_nodes()] == [
        ("tenant-a-worker-0", 1),
        ("tenant-a-worker-2", 2),
    ]
    assert tenant.cards()[0].id == "GPU-MOCK-tenant-a-worker-0-0"


def test_a_copy_under_another_name_has_its_own_nodes() -> None:
    """benchmarks/process_lab.py copies a tenant with model_copy(update={"name": ...}): the list is read from
    the fields, never kept stale."""
    copy = tenant_of(gpus=L4).model_copy(update={"name": "bench-1"})
    assert copy.worker_node_names() == ["bench-1-worker"] and copy.cards()[0].id == "GPU-MOCK-bench-1-0"


def test_checks_are_named_rules_that_each_give_checks() -> None:
    names = [rule.__name__ for rule in TENANT_RULES]
    assert len(set(names)) == len(names) and all(not name.startswith("_") for name in names)
    raw = {"name": "tenant-a", "gpus": L4, "workloads": [{"name": "t", "gpus": 2}], "podCidr": "10.96.0.0/16"}
    tenant = Tenant.model_validate(raw, context={"fields_only": True})  # read without its own checks
    found = tenant.checks()
    assert found and all(isinstance(item, Check) and item.needs for item in found)
    assert [item.key for item in found] == ["podCidr", "workloads[0].gpus"]
    assert tenant.problems() == [(item.key, item.value, item.message) for item in found]


def test_cards_on_workers_in_container_mode_are_refused_in_words_not_by_a_crash() -> None:
    """Before the one list, two container-mode workers with their own gpus raised zip()'s ValueError."""
    error = error_for(workers=[{"host": "10.1.0.1", "gpus": L4}, {"host": "10.1.0.2", "gpus": L4}])
    assert error.splitlines()[1:] == [
        "  gpulab:tenants[0].workers: are only for workerMode: ssh; remove them or set workerMode: ssh"
    ]


@pytest.mark.parametrize(
    ("keys", "line"),
    [
        ({"gpus": L4, "nodes": [{"gpus": L4}]}, "tenants[0].nodes: give either gpus (one GPU node) or nodes"),
        ({}, "tenants[0].gpus: is required: the tenant's cards"),
        (
            {"workerMode": "ssh", "workers": [{"host": "10.1.0.1", "gpus": L4, "gpuNode": True}]},
            "tenants[0].workers: gpuNode marks the worker that carries the tenant's gpus",
        ),
        (
            {"nodes": [{"name": "a", "gpus": L4}, {"name": "a", "gpus": L4}]},
            "tenants[0].nodes: node names ['tenant-a-a', 'tenant-a-a'] are not unique",
        ),
        ({"nodes": [{"gpus": [{"model": "L4", "count": 40}]}] * 2}, "tenants[0].nodes: declares 80 cards"),
        ({"gpus": [{"model": "L4", "count": 40}] * 2}, "tenants[0].gpus: declares 80 cards"),
    ],
)
def test_every_spelling_is_still_read_and_refused_as_before(keys: dict, line: str) -> None:
    assert f"gpulab:{line}" in error_for(**keys)
