"""placement/dra_fit.py: the allocator model's own rules (tests/real/test_dra_allocation.py holds it against the
real kube-scheduler on generated claims)."""

from __future__ import annotations

from model.catalog import expand_cards
from placement.dra_fit import ClaimAsk, allocate, free_now

A100, L4 = expand_cards("t", [("A100-80GB", 1), ("L4", 1)])


def test_claims_take_the_first_card_that_holds_them_and_consume_its_capacity() -> None:
    nodes = [("n", [A100, L4])]
    asks = [ClaimAsk(f"p{i}", memory_mb=20000, cores=30) for i in range(4)]
    placed = allocate(nodes, asks)
    assert [[d.card.id for d in a.devices] for a in placed] == [[A100.id]] * 3 + [[L4.id]]
    assert free_now(nodes, placed) == [(A100, 21920, 10), (L4, 4576, 70)]


def test_a_claim_without_memory_takes_the_whole_card_and_count_takes_distinct_cards() -> None:
    nodes = [("n", [A100, L4])]
    whole, pair = ClaimAsk("whole"), ClaimAsk("pair", count=2, memory_mb=1000)
    placed = allocate(nodes, [whole, pair])
    assert [d.card.id for d in placed[0].devices] == [A100.id]
    assert placed[1].devices == [], "the A100 has no memory left, so two distinct cards cannot be found"
    assert [d.card.id for d in allocate(nodes, [pair])[0].devices] == [A100.id, L4.id]


def test_the_next_node_is_tried_when_the_first_cannot_hold_the_claim() -> None:
    nodes = [("a", [L4]), ("b", [A100])]
    [placed] = allocate(nodes, [ClaimAsk("big", memory_mb=40000)])
    assert [(d.node, d.card.id) for d in placed.devices] == [("b", A100.id)]
