"""Per-channel wake-up flags shared by both backends.

The rule that makes ``wait`` lose nothing: a reader notes the wake-up generation *before* it
reads, and every wake-up bumps it. A message that lands after the read therefore leaves the
generation ahead of the mark, and the next ``wait`` returns at once instead of sleeping through it.
A spurious wake-up is harmless (the caller reads an empty inbox again); a lost one would cost a
whole wait timeout.

``park`` keeps the same rule without a waiting task: a worker's idle agent leaves a callback
instead of a frame stack (subagents/parking.py), called once when the channel is woken past the
reader's mark.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable
from functools import partial

import anyio

RELEASED = "released"
"""The wake-up payload of work handed back at once: claimants look past their usual throttle."""


class _Confirmed:
    """Stands in for a set ``anyio.Event`` once a subscription is confirmed, so that ten
    thousand watched channels do not each keep an event (and its waiter deque) alive."""

    def is_set(self) -> bool:
        return True

    async def wait(self) -> None:
        return None


CONFIRMED = _Confirmed()


def wake_soon(callback: Callable[[], None]) -> Callable[[], None]:
    """A park woken at once: ``callback`` is called soon, unless what it returns is called."""
    return asyncio.get_running_loop().call_soon(callback).cancel


class Watch:
    """The wake-up state of one channel (an inbox, an event log, the spawn queue).

    ``generation`` counts wake-ups. A reader notes it before reading (``mark_read``); ``wait``
    returns at once if it moved since. Several readers of one channel each pass their own
    ``since`` instead of sharing ``seen``.
    """

    __slots__ = ("confirmed", "generation", "parked", "refused", "releases", "seen", "waiters")

    def __init__(self) -> None:
        self.generation = 0
        self.releases = 0  # wake-ups that announced work handed back (see RELEASED)
        self.seen = 0
        self.waiters: list[asyncio.Future[None]] | None = None
        """One bare future per task in :meth:`wait`. Not an ``anyio.Event``: idle agents wait
        here by the hundred thousand, and an event with its waiter deque and the frames of its
        ``wait`` cost 1.3 KiB each (issue 24); a future costs a tenth of that. Each waiter has
        its own, so one waiter's cancellation never reaches another."""
        # Set once the backend is sure no wake-up for this channel can be missed any more (Redis:
        # the SUBSCRIBE was confirmed). Reads wait for it so the first read cannot race the wait.
        self.confirmed: anyio.Event | _Confirmed | None = None
        # Why the backend will not watch this channel (Redis: the user may not SUBSCRIBE to it):
        # set with ``confirmed``, and raised to whoever waits for it.
        self.refused: Exception | None = None
        self.parked: list[Callable[[], None]] | None = None
        """The callbacks of readers parked on the channel (:meth:`park`), each called once."""

    def wake(self, payload: str | None = None) -> None:
        self.generation += 1
        if payload == RELEASED:
            self.releases += 1
        waiters, self.waiters = self.waiters, None
        for waiter in waiters or ():
            if not waiter.done():  # a cancelled waiter's future is done already
                waiter.set_result(None)
        parked, self.parked = self.parked, None
        for callback in parked or ():  # soon, not here: the caller may be the subscriber's reader
            wake_soon(callback)

    def mark_read(self) -> int:
        """Call just before reading; returns the generation the read covers."""
        self.seen = self.generation
        return self.seen

    def park(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback`` once, soon after the channel is woken past the last ``mark_read``
        (at once if it was already); returns what takes it back, uncalled unless a wake-up
        already scheduled the call (callers make ``callback`` idempotent).

        :meth:`wait` without a task to wait in: the reader's frames, its task and their cancel
        scopes are gone while it is parked, which is most of an idle agent's memory (issue 24).
        """
        if self.generation != self.seen:
            return wake_soon(callback)
        if self.parked is None:
            self.parked = [callback]
        else:
            self.parked.append(callback)
        return partial(self._unpark, callback)

    def _unpark(self, callback: Callable[[], None]) -> None:
        parked = self.parked
        if parked is not None and callback in parked:
            parked.remove(callback)
            if not parked:
                self.parked = None

    async def wait(self, timeout: float, since: int | None = None) -> bool:
        """Block until woken past ``since`` (default: the last ``mark_read``) or the timeout.

        On the asyncio loop, like the Redis client the bus is built on."""
        mark = self.seen if since is None else since
        if self.generation != mark:
            return True
        if timeout <= 0:
            return False
        waiter = asyncio.get_running_loop().create_future()
        if self.waiters is None:
            self.waiters = [waiter]
        else:
            self.waiters.append(waiter)
        try:
            if timeout == math.inf:  # bounded by the caller's own scope
                await waiter
            else:
                with anyio.move_on_after(timeout):
                    await waiter
        finally:
            waiters = self.waiters
            if waiters is not None and waiter in waiters:  # not woken: timed out or cancelled
                waiters.remove(waiter)
                if not waiters:
                    self.waiters = None
        return self.generation != mark


class WakeHub:
    """Channel name → :class:`Watch`, for everything one bus instance is watching."""

    __slots__ = ("_watches",)

    def __init__(self) -> None:
        self._watches: dict[str, Watch] = {}

    def get(self, channel: str) -> Watch | None:
        return self._watches.get(channel)

    def add(self, channel: str) -> Watch:
        watch = self._watches.get(channel)
        if watch is None:
            watch = self._watches[channel] = Watch()
        return watch

    def remove(self, channel: str) -> Watch | None:
        return self._watches.pop(channel, None)

    def wake(self, channel: str, payload: str | None = None) -> None:
        watch = self._watches.get(channel)
        if watch is not None:
            watch.wake(payload)

    def wake_all(self) -> None:
        """After a reconnect nothing is known about what was missed: everyone re-reads."""
        for watch in self._watches.values():
            watch.wake()

    def channels(self) -> list[str]:
        return list(self._watches)

    def __len__(self) -> int:
        return len(self._watches)
