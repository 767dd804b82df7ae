"""HAMi on one of a tenant's GPU nodes: which cards of the node a pod's containers take (`Node`), for the release a
`Rules` (hami/releases.py) names: v2.8.3 by default, v2.10.0 when a tenant runs it (placement/inventory.py passes
the tenant's). Which node a pod goes to, among a tenant's nodes, is hami/cluster.py's.

Pure logic on top of hami/cards.py's per-card rules. Facts, from HAMi tag v2.8.3 (read, not copied):

- On one node (`fitInDevices`, pkg/scheduler/score.go), per container: asking for more cards than the node
  has is NodeInsufficientDevice; else the cards are scored and sorted (hami/cards.py `card_score`; `rank` here)
  and walked from the end (device.go `Fit`), each checked by hami/cards.py `card_reason`.
- The namespace quota (HAMi's quota manager) counts a namespace's use over every node: the nodes of a
  hami/cluster.py `Cluster` share one namespace-use table.

What v2.10.0 changes here (tag v2.10.0, commit 4707fb02c91c; each a `Rules` field):
- the card order (gpu_policy.go `Less` 77-127): score first, NUMA only as a tie-break; `mutex` puts busy cards
  first; a comma-separated policy is a chain of sort keys ending in the card index (`lessByChain` 132-167).
  Ties left by a single policy keep node order (Go's insertion sort up to 12 cards, as in v2.8.3);
- the card-count check counts the cards of the request's type only (score.go 98-103), and only those are walked;
- init containers are placed, each on the node as it was before the pod (score.go `allocateInitContainers`
  226-254), and the pod then holds per card the larger of their peak and its app containers' sum
  (initContainer.go `CollapseInitContainerUsage`); a pod's quota counts its init containers the same way;
  Not modelled: device.go `fitQuota` hands an app container's quota check the pod's app allocations indexed
  from 0, so CollapseInitContainerUsage takes the first len(initContainers) of them for init containers (per card
  the larger, not the sum); the engine sums them, which is stricter only when two of those share a card;
- AllocatedCardsInsufficientRequest counts the cards taken (device.go 871-874);
- a quota limit of 0 blocks (quota.go 84, 90).
- `topology-aware` with no hami.io/node-nvidia-score annotation (gpulab writes none, model/catalog.py) walks
  every card, keeps those that fit and takes the first ones found (`computeWorstSingleCard` /
  `computeBestCombination` over all-zero pair scores, device.go 850-870): the same cards as the plain walk, in
  spread order, which is how it is modelled.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cmp_to_key
from typing import NamedTuple

from hami.cards import (
    MUTEX,
    CardSpec,
    CardUse,
    ContainerRequest,
    NamespaceQuota,
    PodRequest,
    card_reason,
    card_score,
    policy_of,
    reason_detail,
    resolve_request,
)
from hami.reasons import ALLOCATED_CARDS_INSUFFICIENT_REQUEST, NODE_INSUFFICIENT_DEVICE
from hami.releases import V2_8_3, Rules


@dataclass
class ContainerFailure:
    """A container no card takes: HAMi's reason counts (`GenReason`) and a line per card."""

    pod: PodRequest
    container: ContainerRequest
    reasons: dict[str, int]
    lines: list[str]
    cards: tuple[str, ...]

    @property
    def reason(self) -> str:
        """Every reason HAMi names (GenReason: one FilteringFailed reason per key), the cards' own first:
        a partial multi-card fit adds AllocatedCardsInsufficientRequest to what stopped the other cards."""
        cards = sorted(r for r in self.reasons if r != ALLOCATED_CARDS_INSUFFICIENT_REQUEST)
        partial = [ALLOCATED_CARDS_INSUFFICIENT_REQUEST] if ALLOCATED_CARDS_INSUFFICIENT_REQUEST in self.reasons else []
        return ", ".join(cards + partial)

    def explain(self) -> str:
        what = f"container {self.container.name} asks {self.container.describe()}"
        if self.container in self.pod.init_containers and self.container not in self.pod.containers:
            what = "init " + what
        return f"{what}; " + "; ".join(self.lines)


class Placement(list):
    """What `Node.place_hami` returns on success: each app container's cards (a list, as before), and in
    `init` each init container's (v2.10.0's rules only; empty otherwise)."""

    def __init__(self, cards: Iterable[list[int]] = (), init: Sequence[list[int]] = ()) -> None:
        super().__init__(cards)
        self.init = [list(c) for c in init]


# One card taken by one container: (taken by an init container, card, MB, cores).
Entry = tuple[bool, Hashable, int, int]


def collapsed_use(entries: Iterable[Entry]) -> dict[Hashable, tuple[int, int, int]]:
    """What a pod holds per card, (slots, MB, cores): init containers run one after the other, so their peak;
    app containers together, so their sum; the larger of the two per field, and at least one slot (v2.10.0
    pkg/device/initContainer.go `CollapseInitContainerUsage` 36-113). Without init containers: the sums."""
    peak: dict[Hashable, list[int]] = {}
    total: dict[Hashable, list[int]] = {}
    for init, card, memory, cores in entries:
        if init:
            held = peak.setdefault(card, [1, 0, 0])
            held[1], held[2] = max(held[1], memory), max(held[2], cores)
        else:
            held = total.setdefault(card, [0, 0, 0])
            held[0], held[1], held[2] = held[0] + 1, held[1] + memory, held[2] + cores
    found = {}
    for card in peak.keys() | total.keys():
        a, b = peak.get(card, [0, 0, 0]), total.get(card, [0, 0, 0])
        found[card] = (max(a[0], b[0], 1), max(a[1], b[1]), max(a[2], b[2]))
    return found


class CardKey(NamedTuple):
    """What HAMi's card sort compares (gpu_policy.go `DeviceListsScore`): the score, NUMA node, slots in use
    and the card's index."""

    score: float
    numa: int = 0
    used: int = 0
    index: int = 0


_CHAIN_KEYS = ("binpack", "spread", "numa")  # gpu_policy.go `gpuSortKeyOrder` (52-56)


def sort_key_chain(policy: str) -> list[str]:
    """v2.10.0 gpu_policy.go `gpuSortKeyChain` (62-75): the sort keys a comma-separated policy names, in the
    order written, each once; mutex and topology-aware are Fit filters, not sort keys."""
    chain: list[str] = []
    for entry in policy.split(","):
        name = entry.strip()
        if name in _CHAIN_KEYS and name not in chain:
            chain.append(name)
    return chain


def card_less(a: CardKey, b: CardKey, policy: str, rules: Rules = V2_8_3, numa_bind: bool = False) -> bool:
    """HAMi's `DeviceUsageList.Less(a, b)` for the release of `rules` (gpulab sets no nvidia.com/numa-bind, so the
    engine passes numa_bind False; the argument is there for HAMi's own Less vectors)."""
    binpack = policy == "binpack"
    if not rules.score_before_numa:
        # v2.8.3 gpu_policy.go `Less`: NUMA first (binpack: higher NUMA first), score within a NUMA node.
        if a.numa == b.numa:
            return a.score < b.score if binpack else a.score > b.score
        return a.numa > b.numa if binpack else a.numa < b.numa
    if rules.policy_chains and ("," in policy or policy == "numa"):
        chain = sort_key_chain(policy) or ["spread"]  # lessByChain 132-167
        if numa_bind and chain[0] != "numa":
            chain = ["numa", *(key for key in chain if key != "numa")]
        for key in chain:
            if key == "binpack" and a.score != b.score:
                return a.score < b.score
            if key == "spread" and a.score != b.score:
                return a.score > b.score
            if key == "numa" and a.numa != b.numa:
                return a.numa < b.numa
        return a.index < b.index
    if rules.mutex_policy and policy == MUTEX:  # busy cards first, idle ones last: Fit walks from the end
        return a.used > b.used if a.used != b.used else a.numa < b.numa
    if numa_bind:
        if a.numa == b.numa:
            return a.score < b.score if binpack else a.score > b.score
        return a.numa > b.numa if binpack else a.numa < b.numa
    if a.score != b.score:
        return a.score < b.score if binpack else a.score > b.score
    return a.numa < b.numa


def rank_cards(
    order: Sequence[int], keys: Sequence[CardKey], policy: str, rules: Rules = V2_8_3, numa_bind: bool = False
) -> list[int]:
    """`order` sorted as Go's sort.Sort sorts it with `card_less`: an insertion sort (so stable) up to 12 cards.
    Above 12 Go's pdqsort may order ties otherwise, which this does not model (a chain's index tie-break leaves
    no ties)."""

    def compare(i: int, j: int) -> int:
        if card_less(keys[i], keys[j], policy, rules, numa_bind):
            return -1
        return 1 if card_less(keys[j], keys[i], policy, rules, numa_bind) else 0

    return sorted(order, key=cmp_to_key(compare))


class Node:
    """The cards of one tenant node, what is allocated on them, and the namespaces' quota use; `rules` is the
    HAMi release whose rules apply (hami/releases.py; v2.8.3 by default)."""

    def __init__(
        self,
        cards: Sequence[CardSpec],
        use: Sequence[CardUse] | None = None,
        quotas: Mapping[str, NamespaceQuota] | None = None,
        namespace_use: Mapping[str, tuple[int, int]] | None = None,
        *,
        rules: Rules = V2_8_3,
    ) -> None:
        self.cards = list(cards)
        self.use = [CardUse(u.slots, u.memory_mb, u.cores) for u in use] if use else [CardUse() for _ in cards]
        self.quotas = dict(quotas or {})
        self.namespace_use = {ns: list(v) for ns, v in (namespace_use or {}).items()}
        self.rules = rules

    def copy(self) -> Node:
        return Node(
            self.cards,
            self.use,
            self.quotas,
            {ns: tuple(v) for ns, v in self.namespace_use.items()},
            rules=self.rules,
        )

    def quota_room(self, namespace: str, pending_mb: int = 0, pending_cores: int = 0) -> tuple[int | None, int | None]:
        """What HAMi's quota still allows in `namespace`. A limit of 0 is no limit under v2.8.3 (FitQuota:
        `Limit != 0`) and blocks under v2.10.0 (quota.go `LimitSet`, 84, 90); None is no limit in both."""
        quota = self.quotas.get(namespace)
        if quota is None:
            return None, None
        used_mb, used_cores = self.namespace_use.get(namespace, (0, 0))
        if self.rules.quota_zero_limit_blocks:
            memory = quota.memory_mb - used_mb - pending_mb if quota.memory_mb is not None else None
            cores = quota.cores - used_cores - pending_cores if quota.cores is not None else None
            return memory, cores
        memory = quota.memory_mb - used_mb - pending_mb if quota.memory_mb else None
        cores = quota.cores - used_cores - pending_cores if quota.cores else None
        return memory, cores

    def reason(
        self, index: int, request: ContainerRequest, pod: PodRequest, room: tuple, policy: str | None = None
    ) -> str | None:
        """`card_reason` on card `index` with this node's rules; `policy` is the card policy in force (default:
        the pod's own annotation, the only way gpulab sets `mutex`)."""
        request = resolve_request(request, self.rules)
        policy = pod.gpu_policy if policy is None else policy
        return card_reason(self.cards[index], self.use[index], request, pod, room, self.rules, policy)

    def allocate(self, index: int, request: ContainerRequest, namespace: str, sign: int = 1) -> None:
        request = resolve_request(request, self.rules)
        use = self.use[index]
        memory = request.memory_on(self.cards[index])
        use.slots += sign
        use.memory_mb += sign * memory
        use.cores += sign * request.fit_cores
        if namespace in self.quotas:
            totals = self.namespace_use.setdefault(namespace, [0, 0])
            totals[0] += sign * memory
            totals[1] += sign * request.fit_cores

    def typed(self, request: ContainerRequest) -> list[int]:
        """The cards a request may take on this node. v2.10.0 looks its type up first (score.go
        `getNodeResources` 43-52: case-insensitive substring of the card's type) and checks the card count
        against those only (98-103). gpulab's v2.8.3 rules have always counted and walked every card."""
        if not self.rules.type_lookup_before_count:
            return list(range(len(self.cards)))
        wanted = request.device_type.lower()
        return [i for i, card in enumerate(self.cards) if wanted in card.type.lower()]

    def rank(self, order: Sequence[int], scores: Sequence[float], policy: str) -> list[int]:
        """The cards in HAMi's order for `policy` (hami.nodes `card_less`). Cards all on one NUMA node under a
        plain spread/binpack order as the key sort `rank` does (the common, fast case)."""
        simple = policy in ("spread", "binpack") or not (
            self.rules.policy_chains and ("," in policy or policy in ("numa", MUTEX))
        )
        if simple and all(card.numa == self.cards[0].numa for card in self.cards):
            return rank(order, scores, "binpack" if policy == "binpack" else "spread")
        keys = [CardKey(scores[i], card.numa, self.use[i].slots, i) for i, card in enumerate(self.cards)]
        return rank_cards(order, keys, policy, self.rules)

    def place_hami(self, pod: PodRequest, policy: str) -> ContainerFailure | Placement:
        """Place one pod exactly as HAMi's Filter would; commit on success and return each container's cards
        (and, under v2.10.0's rules, each init container's in `.init`)."""
        rules = self.rules
        policy = policy_of(pod, policy, rules)
        weights = pod.scoring_weights if rules.scoring_weights else None
        inits: list[list[int]] = []
        init_entries: list[Entry] = []
        if rules.init_containers_counted:
            # score.go `allocateInitContainers`: each init container on a copy of the node before the pod; the
            # quota counts the earlier ones at their peak (device.go `fitQuota` over CollapseInitContainerUsage).
            for init in pod.init_containers:
                outcome = self.copy()._fit(init, pod, policy, list(range(len(self.cards))), weights, init_entries)
                if isinstance(outcome, ContainerFailure):
                    return outcome
                request = resolve_request(init, rules)
                inits.append(outcome[1])
                init_entries += [(True, i, request.memory_on(self.cards[i]), request.fit_cores) for i in outcome[1]]
        order = list(range(len(self.cards)))  # node order, rebuilt for every pod (getNodesUsage)
        placed: list[tuple[int, ContainerRequest]] = []
        chosen_all: list[list[int]] = []
        for container in pod.containers:
            outcome = self._fit(container, pod, policy, order, weights)
            if isinstance(outcome, ContainerFailure):
                self._undo(placed, pod.namespace)
                return outcome
            order, chosen = outcome
            for index in chosen:
                self.allocate(index, container, pod.namespace)
                placed.append((index, container))
            chosen_all.append(chosen)
        if init_entries:
            self.hold_init_peak(pod.namespace, init_entries, placed)
        return Placement(chosen_all, inits)

    def _fit(
        self,
        container: ContainerRequest,
        pod: PodRequest,
        policy: str,
        order: list[int],
        weights: tuple[int, int, int] | None,
        prior: list[Entry] | None = None,
    ) -> ContainerFailure | tuple[list[int], list[int]]:
        """`fitInDevices` for one container: (the card order after the sort, the cards taken), or why not.
        `prior`: the pod's init containers placed before this one (this is one of them)."""
        rules = self.rules
        request = resolve_request(container, rules)
        typed = self.typed(request) if rules.type_lookup_before_count else None
        count = len(self.cards) if typed is None else len(typed)
        if request.nums > count:
            line = f"asks {request.nums} cards, the node has {count}"
            return ContainerFailure(pod, container, {NODE_INSUFFICIENT_DEVICE: 1}, [line], ())
        scores = [
            card_score(card, use, (request,), rules, weights) for card, use in zip(self.cards, self.use, strict=True)
        ]
        order = self.rank(order, scores, policy)
        if typed is None or count == len(self.cards):
            walked = order
        else:
            keep = set(typed)
            walked = [i for i in order if i in keep]
        chosen, reasons, rejected = self.walk(walked, request, pod, policy=policy, prior=prior)
        if len(chosen) < request.nums:
            # Each card's line tells the use HAMi's check saw: the pod's earlier containers included.
            lines = [
                f"{self._card(i)}: {why} ({reason_detail(self.cards[i], self.use[i], request, why)})"
                for i, why in rejected
            ]
            if chosen:
                lines.insert(0, f"only {len(chosen)} of the {request.nums} cards it needs fit")
            return ContainerFailure(pod, container, reasons, lines, tuple(self.cards[i].id for i, _ in rejected))
        return order, chosen

    def walk(
        self,
        order: Sequence[int],
        container: ContainerRequest,
        pod: PodRequest,
        *,
        policy: str | None = None,
        prior: list[Entry] | None = None,
    ) -> tuple[list[int], dict[str, int], list[tuple[int, str]]]:
        """HAMi's `Fit`: walk `order` from the end, take the first `nums` cards that pass every check.
        Returns the cards taken, the reason counts (as `GenReason` reports them) and each rejection.
        `prior` (v2.10.0, an init container): the pod's earlier init containers' cards, which the quota counts
        at their peak with this container's (device.go `fitQuota` 666-692)."""
        rules = self.rules
        container = resolve_request(container, rules)
        policy = pod.gpu_policy if policy is None else policy
        chosen: list[int] = []
        pending = [0, 0]
        reasons: dict[str, int] = {}
        rejected: list[tuple[int, str]] = []
        for index in reversed(order):
            if prior is None:
                room = self.quota_room(pod.namespace, pending[0], pending[1])
            else:
                room = self._init_room(pod.namespace, prior, chosen, container, index)
            why = card_reason(self.cards[index], self.use[index], container, pod, room, rules, policy)
            if why is not None:
                reasons[why] = reasons.get(why, 0) + 1
                rejected.append((index, why))
                continue
            chosen.append(index)
            pending[0] += container.memory_on(self.cards[index])
            pending[1] += container.fit_cores
            if len(chosen) == container.nums:
                return chosen, {}, rejected
        if chosen:
            # v2.10.0 counts the cards taken (device.go 871-874); v2.8.3 `len(tmpDevs)`: one device type.
            reasons[ALLOCATED_CARDS_INSUFFICIENT_REQUEST] = len(chosen) if self.rules.partial_fit_counts_cards else 1
        return chosen, reasons, rejected

    def _init_room(
        self, namespace: str, prior: list[Entry], chosen: list[int], container: ContainerRequest, index: int
    ) -> tuple[int | None, int | None]:
        """The quota room an init container's candidate card sees: the namespace's use plus the pod's init
        containers at their peak per card, this card included, minus this card's own ask (so that card_reason's
        `ask > room` is HAMi's `used + collapsed > limit`)."""
        memory, cores = container.memory_on(self.cards[index]), container.fit_cores
        entries = [
            *prior,
            *((True, i, container.memory_on(self.cards[i]), cores) for i in chosen),
            (True, index, memory, cores),
        ]
        held = collapsed_use(entries).values()
        return self.quota_room(namespace, sum(h[1] for h in held) - memory, sum(h[2] for h in held) - cores)

    def hold_init_peak(
        self, namespace: str, init_entries: list[Entry], placed: list[tuple[int, ContainerRequest]]
    ) -> None:
        """Raise the use of the cards the pod's init containers took to what the pod holds there once placed
        (v2.10.0 `CollapseInitContainerUsage`: per card the larger of the init peak and the app sum, at least one
        slot; scheduler.go `Filter` 1133 records that). Its app containers are already allocated."""
        self.add_use(namespace, self.init_peak(init_entries, placed))

    def init_peak(
        self, init_entries: list[Entry], placed: list[tuple[int, ContainerRequest]]
    ) -> dict[Hashable, tuple[int, int, int]]:
        """Per card, (slots, MB, cores) the pod holds beyond its app containers' sum (`placed`, allocated) once its
        init containers (`init_entries`) are counted at their peak (`hold_init_peak`)."""
        app: list[Entry] = []
        for index, container in placed:
            request = resolve_request(container, self.rules)
            app.append((False, index, request.memory_on(self.cards[index]), request.fit_cores))
        sums = collapsed_use(app)
        extra = {}
        for card, (slots, memory, cores) in collapsed_use([*init_entries, *app]).items():
            had = sums.get(card, (0, 0, 0))
            extra[card] = (slots - had[0], memory - had[1], cores - had[2])
        return extra

    def add_use(self, namespace: str, extra: Mapping[Hashable, tuple[int, int, int]], sign: int = 1) -> None:
        """Add (`sign` -1: take back) `init_peak`'s extra use to the cards and to the namespace's quota use."""
        for card, (slots, memory, cores) in extra.items():
            use = self.use[card]  # type: ignore[index]
            use.slots += sign * slots
            use.memory_mb += sign * memory
            use.cores += sign * cores
            if namespace in self.quotas:
                totals = self.namespace_use.setdefault(namespace, [0, 0])
                totals[0] += sign * memory
                totals[1] += sign * cores

    def _card(self, index: int) -> str:
        return f"{self.cards[index].id} ({self.cards[index].type})"

    def _undo(self, placed: list[tuple[int, ContainerRequest]], namespace: str) -> None:
        for index, container in reversed(placed):
            self.allocate(index, container, namespace, sign=-1)

    def _first_fit_cards(
        self, container: ContainerRequest, pod: PodRequest, prior: list[Entry] | None = None
    ) -> list[int] | None:
        # Full cards (CardTimeSlicingExhausted) are left out cheaply: they are the common case.
        typed = self.typed(resolve_request(container, self.rules))
        open_cards = [i for i in typed if self.use[i].slots < self.cards[i].split_count]
        chosen, _, _ = self.walk(open_cards[::-1], container, pod, prior=prior)  # walk goes from the end
        return chosen if len(chosen) >= container.nums else None

    def place_first_fit(self, pod: PodRequest) -> bool:
        """Some valid placement of one pod (HAMi's per-card rules, first cards that pass); commit on success.
        Proves that a placement exists; it is not HAMi's choice of cards."""
        init_entries: list[Entry] = []
        if self.rules.init_containers_counted:
            for init in pod.init_containers:
                chosen = self.copy()._first_fit_cards(init, pod, init_entries)
                if chosen is None:
                    return False
                request = resolve_request(init, self.rules)
                init_entries += [(True, i, request.memory_on(self.cards[i]), request.fit_cores) for i in chosen]
        placed: list[tuple[int, ContainerRequest]] = []
        for container in pod.containers:
            chosen = self._first_fit_cards(container, pod)
            if chosen is None:
                self._undo(placed, pod.namespace)
                return False
            for index in chosen:
                self.allocate(index, container, pod.namespace)
                placed.append((index, container))
        if init_entries:
            self.hold_init_peak(pod.namespace, init_entries, placed)
        return True


def rank(order: Sequence[int], scores: Sequence[float], policy: str) -> list[int]:
    """HAMi's card sort (gpu_policy.go `Less`) with every card on one NUMA node: binpack ascending, spread
    descending, stable. Go's sort.Sort is an insertion sort (stable) up to 12 elements; above 12 cards Go may
    order ties otherwise, which this does not model."""
    return sorted(order, key=scores.__getitem__, reverse=policy != "binpack")


def quota_allows(node: Node, pod: PodRequest, container: ContainerRequest, cards: Sequence[int]) -> bool:
    """HAMi's namespace quota for one container on the cards it would take: its memory on those cards and
    its cores times their count within the room the namespace has left (pkg/device/quota.go, FitQuota)."""
    container = resolve_request(container, node.rules)
    memory = sum(container.memory_on(node.cards[i]) for i in cards)
    room_mb, room_cores = node.quota_room(pod.namespace)
    if room_mb is not None and memory > room_mb:
        return False
    return room_cores is None or container.fit_cores * len(cards) <= room_cores
