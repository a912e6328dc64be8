"""A worker's parked agents: idle sub-agents kept as a callback and a time, not as tasks.

An idle agent waiting in a task holds the task, anyio's handle of it (a cancel scope and an
event), the coroutine frames of its loop down to the wait and the wait's own cancel scope: 7 of
the 12 KiB an idle agent cost (issue 24; tracemalloc, 2,000 agents). Parked, it holds its state,
one callback on its inbox's wake-up (``Inboxes.park``) and the time of its next look at the
inbox (at most a minute away, or its idle deadline). A wake-up takes it out of the lot and hands
it to the worker, which resumes it in a new task: what it finds in its inbox is the same as a
waiting agent's, so parking changes when memory is held, not what an agent does.

**The minute look is batched.** Wake-ups are hints, so a waiting agent reads its inbox at least
once a minute even when nothing woke it (``docs/protocol.md``). Resuming each parked agent for
that read would cost a task, its stretch of the loop and a read round trip per agent per minute:
at 12,500 agents a worker, some 200 resumptions a second that find nothing. Instead, the agents
whose look is due are asked about together (:meth:`~baton.bus.parts.inboxes.Inboxes.holding`: one
``XLEN`` each, a pipeline per node): only an inbox that holds a message resumes its agent, which
then reads it as a woken one would; the others stay parked, their next look a minute on. Its idle
deadline always resumes an agent (it then leaves ``idle`` as a waiting one would).

**The timers are one queue.** Each parked agent's next look is an entry of one heap of ``(when,
key)`` under a single event-loop timer for the earliest, not a timer of its own. A timer per agent
was an ``asyncio.TimerHandle`` and its arguments made anew at every minute look: objects the
garbage collector tracks, which live a minute, so they outlive its young generations, and 50,000
agents a worker left some 100,000 of them in the old generation each minute, past the heap that
:mod:`baton.subagents.heap` freezes. Every full pass walked them: 140-260 ms a pass, a few a
minute, and a task sent meanwhile waited (``benchmarks/scale.py``, 100,000 agents). A tuple of a
float and a string is untracked once the collector has seen it, so a look now leaves nothing
behind for the old generation. An entry whose agent left, or looks at another time now, is
skipped when it comes up (and the heap is rebuilt once such entries outnumber the live ones).
"""

from __future__ import annotations

import asyncio
import heapq
import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Generic, TypeVar

import anyio

from baton.bus.base import Bus
from baton.subagents.loop import SubAgent

log = logging.getLogger(__name__)

T = TypeVar("T")

LOOK_BATCH = 1000
"""At most this many inboxes per ``holding`` call (one operation's commands and replies)."""
EARLY_S = 0.005
"""A timer fires up to the clock's resolution early: one this close to the idle deadline is it."""


@dataclass(slots=True)
class _Spot(Generic[T]):
    ticket: T
    agent: SubAgent
    unpark: Callable[[], None]
    due: float | None
    """When its timer entry comes up (None: it came up, and its look is under way)."""


class Parking(Generic[T]):
    """Parked agents by key; each leaves exactly once, when woken, at its idle deadline, when a
    minute look finds its inbox holding a message, or when :meth:`release` asks for it:
    :meth:`run` then hands its ``ticket`` (what the host needs to resume it, its agent among the
    rest) to ``resume``; or when :meth:`take_all` empties the lot."""

    __slots__ = ("_alarm", "_bus", "_due", "_leaving", "_looks", "_spots", "_timers", "_woken")

    def __init__(self, bus: Bus) -> None:
        self._bus = bus
        self._spots: dict[str, _Spot[T]] = {}
        self._leaving: deque[T] = deque()
        self._woken: asyncio.Future[None] | None = None
        self._due: list[tuple[str, _Spot[T]]] = []
        self._looks: asyncio.Future[None] | None = None
        self._timers: list[tuple[float, str]] = []
        """A heap of ``(when, key)``: each parked agent's next look or idle deadline, and stale
        entries (see the module docstring)."""
        self._alarm: asyncio.TimerHandle | None = None
        """The event loop's one timer, for the earliest entry of :attr:`_timers`."""

    def __len__(self) -> int:
        return len(self._spots)

    def park(self, key: str, agent: SubAgent, ticket: T) -> None:
        """Park ``agent`` (whose :meth:`~SubAgent.run` or :meth:`~SubAgent.resume` returned
        ``PARKED``) under ``key`` until its inbox is woken past its last read, its minute look
        finds a message, or its idle deadline (``agent.wake_at`` is the first of the last two,
        on the event loop's clock, which is anyio's on asyncio)."""
        unpark = self._bus.inboxes.park(agent.session, agent.name, partial(self.release, key))
        spot = self._spots[key] = _Spot(ticket, agent, unpark, None)
        self._set_timer(key, spot, agent.wake_at)
        self._arm()

    def release(self, key: str) -> None:
        """Take ``key`` out of the lot and hand its ticket to ``leave``; nothing if not parked."""
        spot = self._spots.pop(key, None)
        if spot is None:
            return
        spot.unpark()  # its entry in the heap is stale now: the lot no longer holds it
        self._leaving.append(spot.ticket)
        _set(self._woken)

    def take_all(self) -> list[T]:
        """Empty the lot and return every parked agent's ticket, without handing any to
        ``resume``: a stopping worker gives idle agents back together (each resumed on its own
        would cost a task and a few round trips, and at 12,500 agents a worker, half of them
        missed the stop's bound)."""
        spots, self._spots = self._spots, {}
        for spot in spots.values():
            spot.unpark()
        self._timers = []
        if self._alarm is not None:
            self._alarm.cancel()
            self._alarm = None
        return [spot.ticket for spot in spots.values()]

    def _set_timer(self, key: str, spot: _Spot[T], when: float) -> None:
        """Time ``spot``'s next look (or idle deadline) for ``when``; call :meth:`_arm` after."""
        spot.due = when
        heapq.heappush(self._timers, (when, key))
        if len(self._timers) > 2 * len(self._spots) + 64:  # mostly stale: rebuilt from the lot
            self._timers = [(s.due, k) for k, s in self._spots.items() if s.due is not None]
            heapq.heapify(self._timers)

    def _arm(self) -> None:
        """Set the event loop's one timer for the earliest entry, unless it is set for it."""
        if not self._timers:
            return
        first = self._timers[0][0]
        alarm = self._alarm
        if alarm is not None and alarm.when() <= first:
            return  # it rings first; what is due then is handled, and the timer set again
        if alarm is not None:
            alarm.cancel()
        self._alarm = asyncio.get_running_loop().call_at(first, self._ring)

    def _ring(self) -> None:
        """The earliest entries came up: each live one's idle deadline releases its agent,
        a minute look is batched; then the timer is set for what is left."""
        self._alarm = None
        now = asyncio.get_running_loop().time() + EARLY_S  # a timer may ring that much early
        timers = self._timers
        while timers and timers[0][0] <= now:
            when, key = heapq.heappop(timers)
            spot = self._spots.get(key)
            if spot is None or spot.due != when:
                continue  # the agent left, or looks at another time now
            spot.due = None
            if now >= spot.agent.idle_deadline:
                self.release(key)
                continue
            self._due.append((key, spot))
            _set(self._looks)
        self._arm()

    async def run(self, resume: Callable[[T], None]) -> None:
        """Hand each agent that leaves the lot to ``resume``, and make the minute looks, from
        this task (and one of its own for the looks), until cancelled.

        The wake-ups and timers that release agents are plain callbacks of the event loop, in
        which anyio cannot start a task (it finds its backend through the current task)."""
        async with anyio.create_task_group() as group:
            group.start_soon(self._look_when_due)
            loop = asyncio.get_running_loop()
            while True:
                while self._leaving:
                    resume(self._leaving.popleft())
                self._woken = loop.create_future()
                try:
                    await self._woken
                finally:
                    self._woken = None

    async def _look_when_due(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            while self._due:
                batch, self._due = self._due[:LOOK_BATCH], self._due[LOOK_BATCH:]
                await self._look(batch)
            self._looks = loop.create_future()
            try:
                await self._looks
            finally:
                self._looks = None

    async def _look(self, due: list[tuple[str, _Spot[T]]]) -> None:
        """Ask whether the due agents' inboxes hold anything: those that do are released, the
        others park on, their next look a minute (or a lease) on. A wake-up that comes while
        the question is out releases its agent as ever (it is no longer in the lot when the
        answer comes). A bus that cannot answer releases them all: each then reads itself,
        and meets the fault as a waiting agent would."""
        parked = [(key, spot) for key, spot in due if self._spots.get(key) is spot]
        if not parked:
            return  # each was woken meanwhile (and maybe parked again, with a timer of its own)
        inboxes = [(spot.agent.session, spot.agent.name) for _, spot in parked]
        try:
            holding = await self._bus.inboxes.holding(inboxes)
            if len(holding) != len(parked):
                raise ValueError(f"{len(holding)} answers for {len(parked)} inboxes")
        except Exception as exc:  # BusError, or anything else: never lose an agent to a look
            log.debug("a look at %d parked agents' inboxes failed: %s", len(parked), exc)
            holding = [True] * len(parked)
        now = asyncio.get_running_loop().time()
        for (key, spot), holds in zip(parked, holding, strict=True):
            if self._spots.get(key) is not spot:
                continue  # woken (or released) meanwhile
            if holds:
                self.release(key)
                continue
            self._set_timer(key, spot, min(spot.agent.idle_deadline, now + spot.agent.look_s))
        self._arm()


def _set(future: asyncio.Future[None] | None) -> None:
    if future is not None and not future.done():
        future.set_result(None)
