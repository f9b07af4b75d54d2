"""The broker's garbage-collection policy (server/heap.py): frozen objects stay out of full passes,
and the periodic full pass still frees cycles among them."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from brook.server.heap import HeapKeeper, settle


class Node:
    def __init__(self) -> None:
        self.other: Node | None = None


def cycle() -> tuple[Node, weakref.ref[Node]]:
    a, b = Node(), Node()
    a.other, b.other = b, a
    return a, weakref.ref(a)


@pytest.fixture(autouse=True)
def thawed() -> Iterator[None]:
    yield
    gc.unfreeze()
    gc.collect()


def test_settle_freezes_survivors_and_collects_garbage() -> None:
    dead = cycle()[1]  # garbage already: only its cycle keeps it
    kept, alive = cycle()
    frozen, _ = settle(full=False)
    assert dead() is None
    # Frozen objects may die since (other threads of the test process run): the count only falls.
    assert 0 < gc.get_freeze_count() <= frozen
    assert all(o is not kept for o in gc.get_objects(generation=2))
    assert alive() is kept


def test_a_frozen_cycle_is_freed_by_the_full_pass_only() -> None:
    keeper = HeapKeeper(full_every_s=3600)
    keeper.started()
    ref = None

    def make() -> None:
        nonlocal ref
        kept, ref = cycle()
        settle(full=False)  # frozen while alive
        del kept

    make()
    gc.collect()
    keeper.tick()  # not due: a frozen cycle survives the collector
    assert ref is not None and ref() is not None
    keeper.full_every_s = 0
    keeper.tick()
    assert ref() is None


def test_many_long_lived_objects_made_later_are_frozen() -> None:
    keeper = HeapKeeper(full_every_s=3600, grown_objects=1_000)
    keeper.started()
    made = [Node() for _ in range(3_000)]
    gc.collect()  # survivors reach the oldest generation, as after minutes of life
    assert len(gc.get_objects(generation=2)) > 1_000
    keeper.tick()
    assert len(gc.get_objects(generation=2)) < 1_000
    assert made[0].other is None
