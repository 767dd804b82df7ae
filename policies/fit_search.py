"""The certain verdict on one GPU node: can any placement hold a set of pods? HAMi strands at least one
whatever the order when none can. Exhaustive search over hami/cards.py's card rules, bounded by a
step budget; running out is reported, never hidden."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field

from hami.cards import CardSpec, Node, PodRequest, quota_allows

SEARCH_BUDGET = 20_000  # search steps per tenant evaluation before the exact answer is given up (and reported)


@dataclass
class Budget:
    """Search steps left; one budget can be shared by every search of one evaluation, so that the
    whole evaluation is bounded, not each search."""

    left: int = SEARCH_BUDGET


@dataclass
class Search:
    exhausted: bool = False
    seen: set = field(default_factory=set)


def _search_order(pod: PodRequest) -> tuple[bool, int, int]:
    """Pods asking 0 % cores first: HAMi refuses them on a card whose cores are all booked *by then*
    (CardComputeUnitsExhausted), so they fit in some arrival order iff they fit placed before the
    others. Then the largest first, which finds a placement fast when there is one."""
    memory = sum(c.nums * (c.memreq if not c.uses_percentage() else 10**9 * c.mem_percentage) for c in pod.containers)
    cores = sum(c.nums * c.fit_cores for c in pod.containers)
    return (cores > 0, -memory, -cores)


class _Searcher:
    def __init__(self, node: Node, pods: Sequence[PodRequest], budget: Budget) -> None:
        self.node = node
        self.items = [(pod, container) for pod in sorted(pods, key=_search_order) for container in pod.containers]
        self.budget = budget
        self.search = Search()
        by_id = any(pod.selects_uuids for pod in pods)
        # Cards equal here are interchangeable for every rule (UUID selectors make every card distinct).
        self.group = [
            (card.id if by_id else "", card.type, card.memory_mb, card.cores, card.split_count, card.healthy)
            for card in node.cards
        ]
        smallest = min(card.memory_mb for card in node.cards)
        self.demand = [(0, 0, 0)]
        for _, container in reversed(self.items):
            slots, cores, memory = self.demand[-1]
            each = container.memory_for(smallest)
            self.demand.append(
                (slots + container.nums, cores + container.nums * container.fit_cores, memory + container.nums * each)
            )
        self.demand.reverse()

    def run(self) -> bool | None:
        if self._search(0):
            return True
        return None if self.search.exhausted else False

    def _state(self, index: int) -> tuple:
        node = self.node
        return (
            index,
            tuple(sorted(zip(self.group, ((u.slots, u.memory_mb, u.cores) for u in node.use), strict=True))),
            tuple(sorted((ns, tuple(v)) for ns, v in node.namespace_use.items())),
        )

    def _search(self, index: int) -> bool:
        if index == len(self.items):
            return True
        search = self.search
        self.budget.left -= 1
        if self.budget.left < 0:
            search.exhausted = True
            return False
        node = self.node
        slots_free = cores_free = memory_free = 0
        for card, use in zip(node.cards, node.use, strict=True):
            if card.healthy:
                slots_free += max(0, card.split_count - use.slots)
                cores_free += card.cores - use.cores
                memory_free += card.memory_mb - use.memory_mb
        slots, cores, memory = self.demand[index]
        if slots > slots_free or cores > cores_free or memory > memory_free:
            return False
        key = self._state(index)
        if key in search.seen:
            return False
        pod, container = self.items[index]
        room = node.quota_room(pod.namespace)
        fits = [i for i in range(len(node.cards)) if node.reason(i, container, pod, room) is None]
        tried: set = set()
        for combination in itertools.combinations(fits, container.nums):
            signature = tuple(sorted((self.group[i], repr(node.use[i])) for i in combination))
            if signature in tried:  # identical cards in identical states: one try is enough
                continue
            tried.add(signature)
            if container.nums > 1 and not quota_allows(node, pod, container, combination):
                continue
            for card_index in combination:
                node.allocate(card_index, container, pod.namespace)
            if self._search(index + 1):
                return True
            for card_index in combination:
                node.allocate(card_index, container, pod.namespace, sign=-1)
            if search.exhausted:
                return False
        search.seen.add(key)
        return False


@dataclass
class Verdict:
    """The certain verdict: True some placement holds every pod, False none does, None undecided."""

    fits: bool | None
    node: Node | None  # on True, the node with one such placement allocated


def search_placement(node: Node, pods: Sequence[PodRequest], budget: Budget | None = None) -> Verdict:
    """Whether some placement holds `pods` on `node` (left as it is); on True, a node holding them.

    First a cheap first-fit attempt (any placement that passes HAMi's per-card rules proves one exists),
    then exhaustive depth-first search over which cards each container takes (pods in `_search_order`),
    pruned by the aggregate room left and by treating identical cards in identical states as one."""
    trial = node.copy()
    if all(trial.place_first_fit(pod) for pod in sorted(pods, key=_search_order)):
        return Verdict(True, trial)
    if not node.cards:
        return Verdict(False, None)
    for pod in pods:
        if any(container.nums > len(node.cards) for container in pod.containers):
            return Verdict(False, None)  # NodeInsufficientDevice, whatever else is placed
    if budget is None:
        budget = Budget()
    if budget.left <= 0:
        return Verdict(None, None)
    trial = node.copy()
    searcher = _Searcher(trial, pods, budget)
    verdict = searcher.run()
    return Verdict(verdict, trial if verdict else None)


def find_placement(cards: Sequence[CardSpec], pods: Sequence[PodRequest], budget: int = SEARCH_BUDGET) -> bool | None:
    """True if some placement on empty `cards` holds every pod, False if none does, None if undecided."""
    return search_placement(Node(cards), pods, Budget(budget)).fits
