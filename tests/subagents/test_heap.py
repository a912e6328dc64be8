"""The heap keeper of a worker process (subagents/heap.py): when it freezes the heap, and that a
cycle left behind by agents that went is collected once enough of them have gone."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from baton.subagents.heap import MIN_AGENTS, HeapKeeper, next_step


@pytest.mark.parametrize(
    ("hosted", "frozen_with", "step"),
    [
        (MIN_AGENTS - 1, 0, None),  # a small heap: the collector as usual
        (MIN_AGENTS, 0, "freeze"),
        (1099, 1000, None),  # grown by less than a tenth
        (1100, 1000, "freeze"),
        (751, 1000, None),  # fewer than a quarter left
        (750, 1000, "refreeze"),
        (0, 1000, "refreeze"),
        (0, 0, None),
    ],
)
def test_when_the_heap_is_frozen(hosted: int, frozen_with: int, step: str | None) -> None:
    assert next_step(hosted, frozen_with) == step


@pytest.fixture
def thawed() -> Iterator[None]:
    """The test process's collector as it was: these tests freeze it."""
    gc.unfreeze()
    yield
    gc.unfreeze()


class Node:
    def __init__(self) -> None:
        self.other: Node | None = None


def cycle() -> weakref.ref[Node]:
    """Garbage in a cycle, once the caller drops the reference: only a collection frees it."""
    a, b = Node(), Node()
    a.other, b.other = b, a
    return weakref.ref(a)


@pytest.mark.usefixtures("thawed")
def test_a_frozen_heap_is_left_alone_until_a_quarter_of_its_agents_left() -> None:
    keeper = HeapKeeper()
    kept = Node()
    kept.other = kept  # a cycle that is not garbage
    alive = cycle()  # not garbage yet: its last reference is dropped below, once frozen
    node = alive()
    assert keeper.look(2000) == "freeze"
    assert gc.get_freeze_count() > 0 and keeper.frozen_with == 2000
    del node
    gc.collect()
    assert alive() is not None  # frozen: a full pass no longer walks it
    assert keeper.look(1999) is None
    assert keeper.look(1500) == "refreeze"  # a quarter left: collected whole, frozen again
    assert alive() is None and keeper.frozen_with == 1500 and gc.get_freeze_count() > 0
    assert keeper.look(100) == "refreeze"
    assert keeper.frozen_with == 0 and gc.get_freeze_count() == 0  # too few to keep it frozen
    assert kept.other is kept
