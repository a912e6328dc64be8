"""A worker's parked agents: idle sub-agents kept as a callback and a timer, not as tasks.

An idle agent waiting in a task holds the task, anyio's handle of it (a cancel scope and an
event), the coroutine frames of its loop down to the wait and the wait's own cancel scope: 7 of
the 12 KiB an idle agent cost (issue 24; tracemalloc, 2,000 agents). Parked, it holds its state,
one callback on its inbox's wake-up (``Inboxes.park``) and one timer for its next look at the
inbox (at most a minute away, or its idle deadline). Whichever comes first takes it out of the lot
and hands it to the worker, which resumes it in a new task: what it finds in its inbox is the same
as a waiting agent's, so parking changes when memory is held, not what an agent does.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Generic, TypeVar

from baton.bus.base import Bus
from baton.subagents.loop import SubAgent

T = TypeVar("T")


@dataclass(slots=True)
class _Spot(Generic[T]):
    ticket: T
    unpark: Callable[[], None]
    timer: asyncio.TimerHandle


class Parking(Generic[T]):
    """Parked agents by key; each leaves exactly once, when woken, at its time, or when
    :meth:`release` (or :meth:`release_all`) asks for it: :meth:`run` then hands its ``ticket``
    (what the host needs to resume it, its agent among the rest) to ``resume``."""

    __slots__ = ("_bus", "_leaving", "_spots", "_woken")

    def __init__(self, bus: Bus) -> None:
        self._bus = bus
        self._spots: dict[str, _Spot[T]] = {}
        self._leaving: deque[T] = deque()
        self._woken: asyncio.Future[None] | None = None

    def __len__(self) -> int:
        return len(self._spots)

    def park(self, key: str, agent: SubAgent, ticket: T) -> None:
        """Park ``agent`` (whose :meth:`~SubAgent.run` or :meth:`~SubAgent.resume` returned
        ``PARKED``) under ``key`` until its inbox is woken past its last read or until
        ``agent.wake_at`` (on the event loop's clock, which is anyio's on asyncio)."""
        loop = asyncio.get_running_loop()
        release = partial(self.release, key)
        timer = loop.call_at(agent.wake_at, release)
        unpark = self._bus.inboxes.park(agent.session, agent.name, release)
        self._spots[key] = _Spot(ticket, unpark, timer)

    def release(self, key: str) -> None:
        """Take ``key`` out of the lot and hand its ticket to ``leave``; nothing if not parked."""
        spot = self._spots.pop(key, None)
        if spot is None:
            return
        spot.unpark()
        spot.timer.cancel()
        self._leaving.append(spot.ticket)
        if self._woken is not None and not self._woken.done():
            self._woken.set_result(None)

    def release_all(self) -> None:
        """Release every parked agent (a stopping worker: each then stops as a waiting one
        would)."""
        for key in list(self._spots):
            self.release(key)

    async def run(self, resume: Callable[[T], None]) -> None:
        """Hand each agent that leaves the lot to ``resume``, from this task, until cancelled.

        The wake-ups and timers that release agents are plain callbacks of the event loop, in
        which anyio cannot start a task (it finds its backend through the current task)."""
        loop = asyncio.get_running_loop()
        while True:
            while self._leaving:
                resume(self._leaving.popleft())
            self._woken = loop.create_future()
            try:
                await self._woken
            finally:
                self._woken = None
