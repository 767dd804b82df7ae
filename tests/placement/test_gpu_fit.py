"""HAMi's fit rules and the placement search: hand-worked cases and properties (hypothesis).

HAMi's own test vectors are in hami/tests/test_conformance.py; these are gpulab's cases and the
properties that tie the fast search to brute force."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from hami.cards import (
    CARD_COMPUTE_UNITS_EXHAUSTED,
    CARD_INSUFFICIENT_CORE,
    CARD_INSUFFICIENT_MEMORY,
    CARD_TIME_SLICING_EXHAUSTED,
    CARD_TYPE_MISMATCH,
    EXCLUSIVE_DEVICE_ALLOCATE_CONFLICT,
    NO_PERCENTAGE,
    RESOURCE_QUOTA_NOT_FIT,
    CardSpec,
    CardUse,
    ContainerRequest,
    NamespaceQuota,
    PodRequest,
    card_reason,
)
from hami.cluster import Cluster
from hami.nodes import ContainerFailure, Node
from placement.orders import cannot_strand, every_order_strands, find_stranding, simulate
from placement.search import search_placement

A100 = CardSpec("GPU-0", "NVIDIA-A100-SXM4-80GB", 81920)
L4 = [CardSpec(f"GPU-{i}", "NVIDIA-L4", 24576) for i in range(2)]
NONE = (None, None)


def alone(node: Node) -> Cluster:
    """`node` as a tenant's only GPU node: the engine's cluster of one."""
    return Cluster(["node"], [node])


def find_placement(cards: list[CardSpec], pods: list[PodRequest]) -> bool | None:
    """Whether some placement on one node of empty `cards` holds every pod (None: undecided)."""
    return search_placement(alone(Node(cards)), pods).fits


def request(memory: int | None, cores: int, nums: int = 1, percentage: int = 100) -> ContainerRequest:
    if memory is None:
        return ContainerRequest("c", nums, 0, percentage, cores)
    return ContainerRequest("c", nums, memory, NO_PERCENTAGE, cores)


def pod(name: str, memory: int | None, cores: int, nums: int = 1, percentage: int = 100, **kw) -> PodRequest:
    return PodRequest(name, kw.pop("namespace", "ns"), (request(memory, cores, nums, percentage),), **kw)


def test_check_order_follows_hami() -> None:
    """With several checks failing at once, the earliest in HAMi's order names the reason."""
    p = pod("p", 90000, 100)
    full = CardUse(slots=10, memory_mb=81920, cores=100)
    assert card_reason(A100, full, p.containers[0], p, NONE) == CARD_TIME_SLICING_EXHAUSTED
    half = CardUse(slots=1, memory_mb=1000, cores=95)
    assert card_reason(A100, half, p.containers[0], p, NONE) == CARD_INSUFFICIENT_MEMORY
    assert card_reason(A100, half, p.containers[0], p, (1000, None)) == RESOURCE_QUOTA_NOT_FIT, "quota before memory"
    small = pod("p", 100, 10)
    assert card_reason(A100, half, small.containers[0], small, NONE) == CARD_INSUFFICIENT_CORE
    typed = pod("p", 100, 10, use_types=("H100",))
    assert card_reason(A100, full, typed.containers[0], typed, NONE) == CARD_TYPE_MISMATCH


def test_a_refusal_tells_the_use_hamis_check_saw() -> None:
    """HAMi adds each container's cards to the node's use before the next container is checked (v2.8.3
    pkg/scheduler/score.go `fitInDevices`, `AddResourceUsage` per container per card);
    the refused card's line tells that use, not the use before the pod (it said "24576 MB free of 24576"
    for a 20000 MB ask)."""
    first = request(12000, 10)
    second = ContainerRequest("second", 1, 20000, NO_PERCENTAGE, 10)
    both = PodRequest("both", "ns", (first, second))
    failure = Node([L4[0]]).place_hami(both, "spread")
    assert isinstance(failure, ContainerFailure) and failure.reason == CARD_INSUFFICIENT_MEMORY
    assert "asks 20000 MB, 12576 MB free of 24576" in failure.explain(), failure.explain()


def test_whole_card_needs_an_empty_card() -> None:
    used = CardUse(slots=1, memory_mb=0, cores=0)
    p = pod("p", 100, 100)
    assert card_reason(A100, used, p.containers[0], p, NONE) == EXCLUSIVE_DEVICE_ALLOCATE_CONFLICT


def test_cores_above_100_are_clamped_not_refused() -> None:
    p = pod("p", 100, 120)
    assert card_reason(A100, CardUse(), p.containers[0], p, NONE) is None
    node = Node([A100])
    assert node.place_hami(p, "spread") == [[0]]
    assert node.use[0].cores == 100


def test_zero_core_request_on_a_fully_booked_card() -> None:
    booked = CardUse(slots=2, memory_mb=1000, cores=100)
    p = pod("p", 100, 0)
    assert card_reason(A100, booked, p.containers[0], p, NONE) == CARD_COMPUTE_UNITS_EXHAUSTED


def test_reference_lab_three_shares_then_core_refusal() -> None:
    node = Node([A100])
    for i in range(3):
        assert node.place_hami(pod(f"trainer-{i}", 20000, 30), "spread") == [[0]]
    failure = node.place_hami(pod("trainer-4", 20000, 30), "spread")
    assert isinstance(failure, ContainerFailure) and failure.reason == CARD_INSUFFICIENT_CORE
    assert "asks 30% cores, 10% free" in failure.explain()


def test_percentage_is_of_each_card_tried_and_quota_is_per_card() -> None:
    """A false refusal once made: a gpu-only pod is 100 % of *each* card, and the quota is checked
    per card, so a small card passes a quota that the large card fails."""
    cards = [CardSpec("big", "NVIDIA-A100", 81920), CardSpec("small", "NVIDIA-L4", 24576)]
    whole = PodRequest("whole", "ns", (ContainerRequest("c", 1, 0, 100, 100),))
    node = Node(cards, quotas={"ns": NamespaceQuota(memory_mb=30000)})
    assert node.place_hami(whole, "spread") == [[1]]
    assert search_placement(alone(Node(cards, quotas={"ns": NamespaceQuota(memory_mb=30000)})), [whole]).fits is True
    assert search_placement(alone(Node(cards, quotas={"ns": NamespaceQuota(memory_mb=20000)})), [whole]).fits is False


def test_gpumem_zero_is_the_whole_card() -> None:
    """gpumem: 0 is 100 % of the card in HAMi (GenerateResourceRequests), not 0 MB."""
    from placement.workloads import container_request

    zero = container_request({"name": "c", "resources": {"limits": {"nvidia.com/gpumem": "0"}}}, "Pod/x")
    assert zero is not None and zero.memory_on(A100) == 81920 and zero.cores == 0
    pods = [PodRequest(f"p{i}", "ns", (zero,)) for i in range(2)]
    assert find_placement([A100], pods) is False


def test_spread_and_binpack_choose_cards_as_hami_does() -> None:
    """Spread puts the second pod on the emptier card, binpack on the fuller one; ties go to the last card."""
    first, second = pod("a", 10000, 20), pod("b", 10000, 20)
    spread = Node(L4)
    assert spread.place_hami(first, "spread") == [[1]], "a tie: the last card in node order"
    assert spread.place_hami(second, "spread") == [[0]]
    binpack = Node(L4)
    assert binpack.place_hami(first, "binpack") == [[1]]
    assert binpack.place_hami(second, "binpack") == [[1]]


def test_score_includes_the_request() -> None:
    """On a 24 GB and an 80 GB card, both empty, a 20000 MB request scores lower on the large card,
    so spread picks it (scoring existing usage only would tie and pick the last card)."""
    cards = [CardSpec("large", "NVIDIA-A100", 81920), CardSpec("small", "NVIDIA-L4", 24576)]
    node = Node(cards)
    assert node.place_hami(pod("p", 20000, 10), "spread") == [[0]]
    node = Node(cards)
    assert node.place_hami(pod("p", 20000, 10), "binpack") == [[1]]


def test_order_dependence_is_found() -> None:
    """12000 + 12000 + 24000 MB on two L4s: spread strands the large pod, binpack does not."""
    pods = [pod("s1", 12000, 10), pod("s2", 12000, 10), pod("large", 24000, 10)]
    assert find_placement(L4, pods) is True
    stranding = find_stranding(alone(Node(L4)), pods, "spread", "binpack").stranding
    assert stranding is not None and stranding.failure.pod.workload == "large"
    assert simulate(alone(Node(L4)), pods, "binpack", "binpack") is None


def test_node_insufficient_device_before_any_card() -> None:
    node = Node(L4)
    failure = node.place_hami(pod("three", 1000, 10, nums=3), "spread")
    assert isinstance(failure, ContainerFailure) and failure.reason == "NodeInsufficientDevice"


def test_multi_card_partial_fit() -> None:
    node = Node(L4)
    node.place_hami(pod("big", 20000, 10), "spread")
    failure = node.place_hami(pod("pair", 10000, 10, nums=2), "spread")
    # HAMi names both (GenReason: one FilteringFailed reason each): what stopped the full card, and the partial fit.
    assert isinstance(failure, ContainerFailure)
    assert failure.reasons == {CARD_INSUFFICIENT_MEMORY: 1, "AllocatedCardsInsufficientRequest": 1}
    assert failure.reason == "CardInsufficientMemory, AllocatedCardsInsufficientRequest"
    assert "only 1 of the 2 cards it needs fit" in failure.explain()


def test_current_usage_is_respected() -> None:
    busy = Node([A100], use=[CardUse(slots=3, memory_mb=60000, cores=90)])
    assert search_placement(alone(busy), [pod("p", 20000, 30)]).fits is False
    assert search_placement(alone(busy), [pod("p", 20000, 10)]).fits is True


def test_cannot_strand_is_a_proof_not_a_guess() -> None:
    """The pigeonhole shortcut must never claim safety where greedy strands a pod."""
    pods = [pod("s1", 12000, 10), pod("s2", 12000, 10), pod("large", 24000, 10)]
    assert not cannot_strand(alone(Node(L4)), pods)
    many = [pod(f"p{i}", 1000, 1) for i in range(20)]
    assert cannot_strand(alone(Node([CardSpec(f"g{i}", "NVIDIA-A100", 81920) for i in range(4)])), many)


# Properties


cards_strategy = st.lists(
    st.tuples(st.sampled_from([1000, 2000, 4000]), st.integers(1, 3)),
    min_size=1,
    max_size=3,
).map(lambda specs: [CardSpec(f"GPU-{i}", "NVIDIA-L4", memory, 100, split) for i, (memory, split) in enumerate(specs)])

pod_strategy = st.builds(
    lambda i, memory, percentage, cores, nums, ns: pod(
        f"p{i}", memory, cores, nums=nums, percentage=percentage, namespace=ns
    ),
    st.integers(0, 10_000),
    st.sampled_from([None, 250, 500, 1000, 1500, 2000, 3000]),
    st.sampled_from([25, 50, 100]),
    st.sampled_from([0, 10, 30, 50, 70, 100, 120]),
    st.integers(1, 2),
    st.sampled_from(["a", "b"]),
)
pods_strategy = st.lists(pod_strategy, min_size=1, max_size=4)
quota_strategy = st.one_of(
    st.none(), st.builds(NamespaceQuota, st.sampled_from([None, 2000, 5000]), st.sampled_from([None, 100, 150]))
)


def brute_force_fits(cards: list[CardSpec], pods: list[PodRequest], quota: NamespaceQuota | None) -> bool:
    """Every assignment of every container to `nums` distinct cards, checked against final totals, with
    HAMi's order-dependent rules decided for the best order (0 % requests first, whole cards alone)."""
    items = [(p, c) for p in pods for c in p.containers]
    choices = [list(itertools.combinations(range(len(cards)), c.nums)) for _, c in items]
    for assignment in itertools.product(*choices):
        memory, cores, slots = [0] * len(cards), [0] * len(cards), [0] * len(cards)
        holders: list[list[ContainerRequest]] = [[] for _ in cards]
        namespace: dict[str, list[int]] = {}
        for (p, c), chosen in zip(items, assignment, strict=True):
            for index in chosen:
                memory[index] += c.memory_on(cards[index])
                cores[index] += c.fit_cores
                slots[index] += 1
                holders[index].append(c)
                totals = namespace.setdefault(p.namespace, [0, 0])
                totals[0] += c.memory_on(cards[index])
                totals[1] += c.fit_cores
        ok = all(
            memory[i] <= card.memory_mb and cores[i] <= card.cores and slots[i] <= card.split_count
            for i, card in enumerate(cards)
        )
        for i, card in enumerate(cards):
            if any(h.fit_cores == 100 for h in holders[i]) and len(holders[i]) > 1:
                ok = False  # a whole-card request must be alone (in any order)
            if (
                any(h.fit_cores == 0 for h in holders[i])
                and cores[i] >= card.cores
                and any(h.fit_cores > 0 for h in holders[i])
            ):
                # 0 % requests placed first, then the rest fill the cores: fine unless a whole-card one is there
                ok = ok and not any(h.fit_cores == 100 for h in holders[i])
        if quota is not None:
            for used_mb, used_cores in namespace.values():
                if (quota.memory_mb and used_mb > quota.memory_mb) or (quota.cores and used_cores > quota.cores):
                    ok = False
        if ok:
            return True
    return False


def quotas_for(quota: NamespaceQuota | None) -> dict[str, NamespaceQuota]:
    return {"a": quota, "b": quota} if quota is not None else {}


@settings(max_examples=400, deadline=None, derandomize=True)
@given(cards_strategy, pods_strategy, quota_strategy)
def test_accepted_placements_respect_every_card_and_quota(cards, pods, quota) -> None:
    verdict = search_placement(alone(Node(cards, quotas=quotas_for(quota))), pods)
    if verdict.fits is True:
        assert verdict.cluster is not None
        (node,) = verdict.cluster.nodes
        for card, use in zip(node.cards, node.use, strict=True):
            assert use.memory_mb <= card.memory_mb and use.cores <= card.cores and use.slots <= card.split_count
        for ns, (used_mb, used_cores) in node.namespace_use.items():
            assert not (quota and quota.memory_mb and used_mb > quota.memory_mb), ns
            assert not (quota and quota.cores and used_cores > quota.cores), ns


@settings(max_examples=400, deadline=None, derandomize=True)
@given(cards_strategy, pods_strategy, quota_strategy)
def test_search_agrees_with_brute_force(cards, pods, quota) -> None:
    verdict = search_placement(alone(Node(cards, quotas=quotas_for(quota))), pods).fits
    assert verdict is not None, "small cases never exhaust the budget"
    assert verdict == brute_force_fits(cards, pods, quota)


@settings(max_examples=400, deadline=None, derandomize=True)
@given(cards_strategy, pods_strategy, quota_strategy)
def test_greedy_success_implies_a_placement_exists(cards, pods, quota) -> None:
    """If HAMi's greedy order places everything, the exact search must agree (it is never stricter)."""
    for policy in ("spread", "binpack"):
        if simulate(alone(Node(cards, quotas=quotas_for(quota))), pods, policy, "binpack") is None:
            assert search_placement(alone(Node(cards, quotas=quotas_for(quota))), pods).fits is True


@settings(max_examples=300, deadline=None, derandomize=True)
@given(cards_strategy, pods_strategy)
def test_cannot_strand_never_contradicts_the_simulation(cards, pods) -> None:
    if cannot_strand(alone(Node(cards)), pods):
        for policy in ("spread", "binpack"):
            for order in itertools.permutations(pods):
                assert simulate(alone(Node(cards)), order, policy, "binpack") is None


def test_running_out_of_budget_is_reported(monkeypatch) -> None:
    """A search that cannot finish says so in a finding; it is never silently taken as a verdict."""
    import placement.evaluate as evaluate
    import placement.wording as wording
    from model.config import PodLimits
    from placement.findings import UNDECIDED
    from placement.inventory import TenantInventory
    from placement.search import Budget
    from placement.workloads import read_workload

    monkeypatch.setattr(evaluate, "Budget", lambda: Budget(left=1))
    cards = tuple(CardSpec(f"g{i}", "NVIDIA-X", size) for i, size in enumerate([16384, 24576, 49152]))
    inventory = TenantInventory("t", cards, PodLimits(), None, (), "spread")
    limits = {"nvidia.com/gpu": "2", "nvidia.com/gpumem-percentage": "30", "nvidia.com/gpucores": "20"}
    workloads = [
        read_workload(
            "Pod",
            {"metadata": {"name": f"p{i}"}, "spec": {"containers": [{"name": "c", "resources": {"limits": limits}}]}},
        )
        for i in range(5)
    ]
    findings = wording.evaluate_tenant(inventory, workloads)
    assert any(f.reason == UNDECIDED and "ran out of its budget" in f.message for f in findings), findings


def test_the_quota_is_named_next_to_a_partial_fit() -> None:
    """The quota refuses the second card and AllocatedCardsInsufficientRequest follows; HAMi
    reports both, so ResourceQuotaNotFit must not disappear behind the partial fit."""
    node = Node(L4, quotas={"ns": NamespaceQuota(cores=100)})
    failure = node.place_hami(pod("pair", 1000, 60, nums=2), "spread")
    assert isinstance(failure, ContainerFailure)
    assert failure.reason == "ResourceQuotaNotFit, AllocatedCardsInsufficientRequest"


L4_THEN_A100 = [CardSpec("GPU-0", "NVIDIA-L4", 24576), CardSpec("GPU-1", "NVIDIA-A100-SXM4-80GB", 81920)]
# Some placement holds them (the whole card on the L4, 32000 MB on the A100), but binpack puts the first
# MB-sized pod on the fuller-looking L4 and strands one pod whatever the creation order.
STRANDED_EVERY_ORDER = [pod("whole", None, 30), pod("a", 20000, 0), pod("b", 12000, 0)]


def test_a_set_stranded_in_every_order_is_found() -> None:
    assert find_placement(L4_THEN_A100, STRANDED_EVERY_ORDER) is True
    for order in itertools.permutations(STRANDED_EVERY_ORDER):
        assert simulate(alone(Node(L4_THEN_A100)), order, "binpack", "binpack") is not None
    assert every_order_strands(alone(Node(L4_THEN_A100)), STRANDED_EVERY_ORDER, "binpack", "binpack") is True
    declared = simulate(alone(Node(L4_THEN_A100)), STRANDED_EVERY_ORDER, "binpack", "binpack")
    assert declared is not None and declared.failure.pod.workload == "b", "reported as created in the declared order"
    assert every_order_strands(alone(Node(L4_THEN_A100)), STRANDED_EVERY_ORDER, "spread", "binpack") is False


def test_stranded_in_every_order_is_an_error_and_in_some_orders_a_warning() -> None:
    import placement.wording as wording
    from model.config import PodLimits
    from placement.inventory import TenantInventory
    from placement.workloads import Workload

    def evaluated(policy: str) -> list:
        inventory = TenantInventory("t", tuple(L4_THEN_A100), PodLimits(), None, (), policy)
        workloads = [Workload("Pod", p.workload, "ns", {}, 1, (p,)) for p in STRANDED_EVERY_ORDER]
        return wording.evaluate_tenant(inventory, workloads)

    certain = evaluated("binpack")
    assert [(f.severity, f.workload, f.reason) for f in certain] == [("error", "b", "CardInsufficientMemory")]
    assert "strands one in every creation order" in certain[0].message
    spread = evaluated("spread")
    assert all(f.severity == "warning" for f in spread), spread


def test_distinct_orders_count_identical_pods_once() -> None:
    from placement.orders import distinct_orders

    pods = [pod("x1", 1000, 10), pod("x2", 1000, 10), pod("y", 2000, 10), pod("z", 3000, 10)]
    assert distinct_orders(pods) == 12  # 4! / 2! (x1 and x2 are identical)


def test_an_inventory_without_cards_is_judged() -> None:
    """An inventory document may list no cards: every GPU pod is NodeInsufficientDevice, and the checker's
    placements and running usage are empty (HAMi's node score, a division by the node's totals, is never
    asked of a node that passes no filter)."""
    from placement.inventory import from_inventory_document
    from placement.replay import replay
    from placement.wording import evaluate_tenant
    from placement.workloads import read_workload
    from policies.check_output import placements

    inventory = from_inventory_document({"tenant": "t", "cards": []})
    limits = {"nvidia.com/gpu": "1"}
    manifest = {
        "metadata": {"name": "p", "namespace": "n"},
        "spec": {"containers": [{"name": "c", "resources": {"limits": limits}}]},
    }
    workloads = [read_workload("Pod", manifest)]
    (finding,) = evaluate_tenant(inventory, workloads)
    assert (finding.severity, finding.reason) == ("error", "NodeInsufficientDevice")
    run = replay(inventory, workloads, one_node="worker")
    assert run.inventory.card_usage == () and placements(run, workloads) == []
