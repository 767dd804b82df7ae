"""A tenant may run more pods than Python's recursion allows (1000 frames by default): the engine's
search and its walks over creation orders keep their own stacks, so a Deployment of 1200 replicas is
judged, never a RecursionError (the recursive walks stopped at about 330 to 500 pods)."""

from __future__ import annotations

import sys

from hami.cards import NO_PERCENTAGE, CardSpec, ContainerRequest, PodRequest
from hami.cluster import Cluster
from hami.nodes import Node
from model.config import PodLimits
from placement.inventory import TenantInventory
from placement.orders import every_order_strands, find_stranding, simulate
from placement.replay import replay
from placement.search import Budget, search_placement
from placement.wording import evaluate_tenant
from placement.workloads import Workload

DEEPER_THAN_RECURSION = sys.getrecursionlimit() + 200


def pods(name: str, count: int, memory: int, cores: int) -> tuple[PodRequest, ...]:
    container = ContainerRequest("c", 1, memory, NO_PERCENTAGE, cores)
    return tuple(PodRequest(f"Deployment/ns/{name}#{i}", "ns", (container,)) for i in range(count))


def one_card(memory: int = 100_000, split: int = 5000) -> Cluster:
    return Cluster(["worker"], [Node([CardSpec("GPU-0", "NVIDIA-A100", memory, 100, split)])])


def test_the_walks_over_creation_orders_go_deeper_than_recursion() -> None:
    """1200 identical pods of 100 MB on a card that holds 1000: HAMi strands the 1001st in every order."""
    replicas = pods("serve", DEEPER_THAN_RECURSION, 100, 0)
    stranded = simulate(one_card(), replicas, "binpack", "binpack")
    assert stranded is not None and stranded.failure.pod.workload == "Deployment/ns/serve#1000"
    assert every_order_strands(one_card(), replicas, "binpack", "binpack") is True
    found = find_stranding(one_card(), replicas, "binpack", "binpack")
    assert found.stranding is not None and not found.exhausted
    fits = pods("serve", 1000, 100, 0)
    assert simulate(one_card(), fits, "binpack", "binpack") is None
    assert every_order_strands(one_card(), fits, "binpack", "binpack") is False


def test_the_search_goes_deeper_than_recursion() -> None:
    """Two cards of 100000 MB: 600 pods of 50 MB at 0 % cores (searched first) and three of 55000 MB, one
    per card at most. The room of both cards together holds them all, so only the search can say no: it
    places the small pods 600 deep before it meets the large ones, and runs out of its budget."""
    cards = [CardSpec(f"GPU-{i}", "NVIDIA-A100", 100_000, 100, 5000) for i in range(2)]
    cluster = Cluster(["worker"], [Node(cards)])
    small, large = pods("small", 600, 50, 0), pods("large", 3, 55_000, 10)
    budget = Budget()
    assert search_placement(cluster, [*small, *large], budget).fits is None
    assert budget.left < 0, "it searched until the budget ran out"


def test_deployments_of_more_replicas_than_recursion_allows_are_judged() -> None:
    card = CardSpec("GPU-0", "NVIDIA-A100", 100_000, 100, 5000)
    inventory = TenantInventory("t", (card,), PodLimits(), None, (), "binpack")
    replicas = pods("serve", DEEPER_THAN_RECURSION, 100, 0)
    serve = Workload("Deployment", "serve", "ns", {}, len(replicas), replicas)
    (finding,) = evaluate_tenant(inventory, [serve])
    assert (finding.severity, finding.workload, finding.reason) == (
        "error",
        "Deployment/ns/serve#1000",
        "CardInsufficientMemory",
    )
    assert replay(inventory, [serve]).inventory.card_usage[0].memory_mb == 100_000

    two = TenantInventory("t", (card, CardSpec("GPU-1", "NVIDIA-A100", 100_000, 100, 5000)), PodLimits(), None, ())
    small, large = pods("small", 600, 50, 0), pods("large", 3, 55_000, 10)
    workloads = [
        Workload("Deployment", "small", "ns", {}, 600, small),
        Workload("Deployment", "large", "ns", {}, 3, large),
    ]
    undecided, stranded = evaluate_tenant(two, workloads)
    assert (undecided.workload, undecided.reason) == ("(all GPU workloads)", "PlacementUndecided")
    assert (stranded.severity, stranded.reason) == ("warning", "OrderDependentPlacement")
    # No claim the search did not prove, and an order of 603 pods told by its ends.
    assert stranded.message.startswith("created in the order Deployment/ns/small#0 -> "), stranded.message
    assert "-> ... (587 more) -> " in stranded.message and len(stranded.message) < 1500, stranded.message
