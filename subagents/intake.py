"""Where a sub-agent's next batch comes from: what its last round read ahead, else its inbox.

Reading the inbox waits for a wake-up up to the agent's idle deadline (the agent leaves ``idle``
at it), looking again at least once a :attr:`~baton.subagents.loop.SubAgent.look_s` since wake-ups
are hints. An agent its host parks does not wait: where it would, it returns :data:`PARKED`, the
idle deadline held across resumes, and its host resumes it when woken or at :attr:`Intake.wake_at`.

One per agent, kept while it is parked: slotted, and what it read ahead is an empty tuple shared by
every agent while there is none (issue 24: memory per idle agent).
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Sequence

import anyio

from baton.bus.inbox import InboxReader
from baton.bus.messages import Envelope


class Parked(enum.Enum):
    """What :meth:`SubAgent.run` returns when the agent parked (see there)."""

    PARKED = "parked"


PARKED = Parked.PARKED


class Intake:
    """The next batch of the agent whose inbox is ``inbox``; :attr:`parks` says whether it
    parks where it would wait."""

    __slots__ = ("_ahead", "_idle_deadline", "inbox", "parks", "wake_at")

    def __init__(self, inbox: InboxReader) -> None:
        self.inbox = inbox
        self.parks = False
        """Whether it parks where it would wait (see :meth:`SubAgent.run`)."""
        self._idle_deadline: float | None = None
        """When it leaves idle unless a message comes; set while it waits for one."""
        self.wake_at = math.inf
        """While parked: when its host resumes it even if nothing wakes it (the next look at
        its inbox, at most a minute away, or its idle deadline)."""
        self._ahead: Sequence[Envelope] = ()
        """Messages the last round's inbox watch read: the start of the next batch."""

    @property
    def idle_deadline(self) -> float:
        """While parked: when it leaves ``idle`` unless a message comes (anyio's clock)."""
        return math.inf if self._idle_deadline is None else self._idle_deadline

    @property
    def holds_ahead(self) -> bool:
        """Whether a round read messages ahead that no round has taken yet."""
        return bool(self._ahead)

    def keep(self, ahead: Sequence[Envelope]) -> None:
        """Messages a round read ahead: the start of the next batch, in arrival order."""
        if ahead:
            self._ahead = [*self._ahead, *ahead]

    async def next_batch(
        self, *, idle_timeout_s: float, look_s: float, stopping: Callable[[], bool]
    ) -> list[Envelope] | Parked | None:
        """New messages, waiting up to the idle timeout (``idle_timeout_s`` from the first wait)
        and looking again every ``look_s``; None when idle or ``stopping()``; PARKED where it
        would wait, when it parks (the idle deadline then holds across resumes)."""
        if self._idle_deadline is None:
            self._idle_deadline = anyio.current_time() + idle_timeout_s
        deadline = self._idle_deadline
        # Wake-ups are hints: look again at least once a minute (docs/protocol.md), and a
        # resumed agent at least once a lease, since its un-acked messages come back only once
        # the dead owner's lease expires, with no wake-up.
        slice_s = look_s
        batch, self._ahead = list(self._ahead), ()  # read during the last round, still un-acked
        if batch:
            self._idle_deadline = None
            # Already read and handed out, so they are the next round as they are: a read first
            # could fail until the idle deadline, and the agent would leave "idle" and ack them
            # unprocessed on its way out. What arrives meanwhile is the round after.
            return None if stopping() else batch

        async def take(fresh: list[Envelope]) -> bool:
            batch.extend(fresh)  # ids already in the checkpoint were acked by the reader
            return bool(batch)

        ending = await self.inbox.collect(
            take, deadline=deadline, slice_s=slice_s, stop=stopping, park=self.parks
        )
        if ending == "parked":
            self.wake_at = min(deadline, anyio.current_time() + slice_s)
            return PARKED
        self._idle_deadline = None
        return batch if ending == "taken" else None
