"""How a ``shutdown`` reaches an agent that is busy in a round (docs/protocol.md).

Between rounds an agent reads its inbox and meets a ``shutdown`` there. During a round it used to
read nothing, so a session that ended (Ctrl-C on ``baton run``, ``Session.cancel()``) left its
remote sub-agents running their tools to the end, long after the session had finished.

While a round runs, :class:`RoundWatch` waits on the same inbox wake-up the agent waits on
between rounds. When woken it reads the inbox: a ``shutdown`` stops the round at once (the turn's
``cancel()``: the model request and the tools in flight see an ordinary cancellation); anything
else is kept, un-acked, for the next round (:attr:`RoundWatch.ahead`). The wake-up is the one the
sender's ``send`` publishes anyway, so the cancel signal needs no key or channel of its own, reaches
an agent on any worker and any backend, and a ``shutdown`` written by any producer stops a busy
agent the same way. An idle round costs nothing: nothing is read until a wake-up says there is
something, or a minute has passed (wake-ups are hints).

The lead's turns are watched the same way (lead/agent.py), with two differences it asks for: only
a ``shutdown`` from outside its team stops it (``stops``), and the read is its own (``read``: it
reads and notes under the lock its sends hold, so no send can slip between a read and its noting
and go to an agent whose last result was just read).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from functools import partial

import anyio

from baton.bus.errors import BusClosed, BusError, BusUnreachable
from baton.bus.inbox import InboxReader
from baton.bus.messages import Envelope
from baton.bus.parts.inboxes import DEFAULT_WAIT_S
from baton.bus.retry import persist

__all__ = ["RoundWatch"]

log = logging.getLogger(__name__)


def _is_shutdown(envelope: Envelope) -> bool:
    return envelope.type == "shutdown"


class RoundWatch:
    """Watches an agent's inbox while one round runs; see the module docstring.

    Run :meth:`watch` next to the round and call :meth:`end` when the round is over. Reads are
    never cut short by :meth:`end` (only the wait is): what a read took from the inbox is always
    kept in :attr:`ahead`, so nothing it handed out is lost to the next round.
    """

    __slots__ = ("_ended", "_inbox", "_read", "_stops", "_waiting", "ahead", "shutdown")

    def __init__(
        self,
        inbox: InboxReader,
        *,
        stops: Callable[[Envelope], bool] | None = None,
        read: Callable[[], Awaitable[list[Envelope]]] | None = None,
    ) -> None:
        self._inbox = inbox
        self._stops = stops or _is_shutdown
        """Which message read stops the round (any ``shutdown`` unless said otherwise)."""
        self._read = read
        """The caller's own read, which keeps what it read itself (else the inbox is read here and
        what was read kept in :attr:`ahead` for the next round)."""
        self._ended = False
        self._waiting: anyio.CancelScope | None = None
        self.ahead: list[Envelope] = []
        """Messages read during the round, in arrival order, for the next one (un-acked)."""
        self.shutdown = False
        """Whether a ``shutdown`` was read (and the round told to stop)."""

    def end(self) -> None:
        """The round is over: stop watching (a read in flight finishes first)."""
        self._ended = True
        if self._waiting is not None:
            self._waiting.cancel()

    def _over(self) -> bool:
        return self._ended

    async def watch(self, stop_round: Callable[[], None]) -> None:
        """Until :meth:`end`: wait for a wake-up, read, and on a ``shutdown`` call
        ``stop_round()`` and return. Bus faults are retried until the round is over; a bus that
        refuses or closes ends the watch, never the round."""
        inbox = self._inbox
        wait = partial(inbox.bus.inboxes.wait, inbox.session, inbox.agent, DEFAULT_WAIT_S)
        try:
            while not self._ended:
                with anyio.CancelScope() as self._waiting:
                    # The read that made this round's batch noted the wake-up generation, so a
                    # message that landed since then wakes this wait at once.
                    await persist(wait, f"watch {inbox.agent}", give_up=self._over)
                self._waiting = None
                if self._ended:
                    return
                if self._read is not None:
                    fresh = await self._read()
                else:
                    fresh = await inbox.read(give_up=self._over)
                    self.ahead.extend(fresh)
                if any(self._stops(envelope) for envelope in fresh):
                    self.shutdown = True
                    stop_round()
                    return
        except BusUnreachable:  # only once the round is over: the next inbox read retries
            return
        except BusError as exc:  # closed or refused: the round's own bus calls meet it too
            log.log(logging.DEBUG if isinstance(exc, BusClosed) else logging.WARNING,
                    "%s/%s: stopped watching the inbox during the round: %s",
                    inbox.session, inbox.agent, exc)  # fmt: skip
