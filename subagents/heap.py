"""A worker process's heap of idle agents, kept out of the garbage collector's full passes.

CPython's collector is generational, and a full pass walks every object it tracks. A worker that
hosts thousands of idle agents holds a large heap that lives long and changes little; yet what
the agents' rounds leave behind outlives the young generations (and each one's minute look did
too, while a parked agent had a timer of its own: subagents/parking.py), and once it adds up to a
quarter of the old generation a full pass starts. With 12,500 idle agents in one process
(524,000 tracked objects) a full pass took 267 ms on the 2-core machine, and a task sent to an
agent meanwhile waits for it: ``benchmarks/scale.py`` at 30,000 agents over 8 workers measured
dispatch p99 74 ms with the collector as it is, 16 ms with it off.

So a worker *process* (``baton worker``; a library class never changes a process's collector)
moves its settled heap to the permanent generation (:func:`gc.freeze`) each time its agents grew
by a tenth, after a pass over what is not frozen yet (the growth: short). A frozen object is
still freed when nothing refers to it; only garbage in a cycle among frozen objects waits, so
once a quarter of the agents frozen with the heap have left, the heap is collected whole once
(:func:`gc.unfreeze`, a full pass) and frozen again. Below :data:`MIN_AGENTS` nothing is frozen:
a small heap's full pass is short.
"""

from __future__ import annotations

import gc
import logging
import time
from collections.abc import Callable
from typing import Literal

import anyio

log = logging.getLogger(__name__)

MIN_AGENTS = 1000
"""Hosted agents below which the collector is left as it is."""
GROWTH = 0.1
"""How much the agents grow (of those frozen) before the growth is frozen too."""
SHRINK = 0.25
"""How many of the agents frozen leave before the whole heap is collected and frozen again."""
LOOK_EVERY_S = 5.0

Step = Literal["freeze", "refreeze"]


def next_step(hosted: int, frozen_with: int) -> Step | None:
    """What to do with ``hosted`` agents when the heap was last frozen with ``frozen_with``."""
    if hosted >= MIN_AGENTS and hosted - frozen_with >= max(1, frozen_with * GROWTH):
        return "freeze"
    if frozen_with and hosted <= frozen_with * (1 - SHRINK):
        return "refreeze"
    return None


class HeapKeeper:
    """Freezes a worker process's heap as its agents settle (see the module docstring)."""

    def __init__(self) -> None:
        self.frozen_with = 0
        """How many agents were hosted when the heap was last frozen (0: it is not)."""

    def look(self, hosted: int) -> Step | None:
        """Freeze or collect and refreeze the heap if ``hosted`` asks for it; what was done."""
        step = next_step(hosted, self.frozen_with)
        if step is None:
            return None
        started = time.perf_counter()
        if step == "refreeze":
            gc.unfreeze()  # the next pass walks it all, and frees the cycles left behind
        self.frozen_with = 0  # too few left to be worth it: the collector as usual
        if hosted >= MIN_AGENTS:
            gc.collect()  # what is not frozen yet: the growth, or the whole heap once thawed
            gc.freeze()
            self.frozen_with = hosted
        log.info("heap: %s with %d agents hosted (%d objects frozen) in %.0f ms", step, hosted,
                 gc.get_freeze_count(), (time.perf_counter() - started) * 1000)  # fmt: skip
        return step

    async def run(self, hosted: Callable[[], int]) -> None:
        """Look at ``hosted()`` every :data:`LOOK_EVERY_S` until cancelled; thaw at the end."""
        try:
            while True:
                self.look(hosted())
                await anyio.sleep(LOOK_EVERY_S)
        finally:
            gc.unfreeze()
            self.frozen_with = 0
