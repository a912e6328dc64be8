"""What every part of the in-process bus shares: the state behind a bus and its peers
(:class:`Broker`), and one handle's view of it (:class:`MemoryCore`).

Everything runs on one event loop, so no locks are needed: there is no await between a check and
the update it guards.

**A bounded number of finished sessions.** A session is finished once its ``session.finished``
event is logged (a ``session.started`` logged later makes it running again). The broker keeps the
newest ``finished_kept`` finished sessions (default :data:`DEFAULT_FINISHED_KEPT`), and when one
more finishes it forgets the oldest entirely: its event log, inboxes, agent and lead records,
lease, budget, store, own spawn queue and wake-up watches. A running session is never dropped,
however many there are. So a long-lived in-process server does not grow with every session it
ever ran; the price is that an old finished session's log can no longer be read back
(``sessions()`` no longer lists it). Something written to a session after it was forgotten (a
straggler) starts its state afresh. Dead letters are bounded on their own (the newest 10,000).
"""

from __future__ import annotations

import itertools
import weakref
from collections import OrderedDict, deque
from collections.abc import Sequence
from typing import TYPE_CHECKING

from baton.bus.errors import BusClosed, redact_url
from baton.bus.events import Event, SessionFinished, SessionStarted
from baton.bus.memory.streams import EventStream, Stream
from baton.bus.messages import DeadLetter
from baton.bus.options import BusOptions
from baton.bus.parts.dead import DEAD_LETTERS_KEPT
from baton.bus.parts.routes import SpawnRoutes
from baton.bus.parts.store import StoreTable
from baton.bus.spend import SpendTotals
from baton.bus.wake import WakeHub

if TYPE_CHECKING:
    from baton.bus.memory.inboxes import MemoryInboxes

ROUTES = SpawnRoutes()
"""Stream names as on Redis: the spawn queues route by name, and both backends route alike."""

DEFAULT_FINISHED_KEPT = 256
"""How many finished sessions a memory bus keeps (the newest); older ones are forgotten."""


def inbox_channel(session: str, agent: str) -> str:
    """The wake-up channel of an inbox."""
    return f"{session}\x00{agent}"


def spawn_channel(stream: str) -> str:
    """The wake-up channel of a spawn stream (a pool's streams share their pool's)."""
    return f"\x00spawn\x00{ROUTES.spawn_channel(stream)}"


class Broker:
    """The shared state behind one in-memory bus and all its peers: every part's tables."""

    def __init__(self, event_log_cap: int, finished_kept: int = DEFAULT_FINISHED_KEPT) -> None:
        self.seq = itertools.count(1)
        self.inboxes: dict[tuple[str, str], Stream] = {}
        self.hub = WakeHub()
        self.logs: dict[str, EventStream] = {}
        self.event_log_cap = event_log_cap
        self.session_touch: dict[str, int] = {}
        self.spawn: dict[str, Stream] = {}  # stream name (as on Redis) → its requests
        self.workers: dict[str, dict[str, tuple[frozenset[str], float]]] = {}
        """pool → worker → (its profiles, when its announcement lapses)"""
        self.agents: dict[tuple[str, str], dict[str, str]] = {}
        self.dead: deque[DeadLetter] = deque(maxlen=DEAD_LETTERS_KEPT)
        self.spend: dict[str, SpendTotals] = {}
        self.leads: dict[str, dict[str, str]] = {}
        self.lead_leases: dict[str, tuple[str, float]] = {}  # session → (holder, ends at)
        self.tables: dict[tuple[str, StoreTable], dict[str, str]] = {}  # the sessions' stores
        self.finished_kept = finished_kept
        self.finished: OrderedDict[str, None] = OrderedDict()  # oldest finished first
        self.readers: weakref.WeakSet[MemoryInboxes] = weakref.WeakSet()  # their ledgers

    def inbox(self, session: str, agent: str) -> Stream:
        stream = self.inboxes.get((session, agent))
        if stream is None:
            stream = self.inboxes[(session, agent)] = Stream()
        return stream

    def log(self, session: str, cap: int) -> EventStream:
        """The session's log, made (keeping its newest ``cap`` events) on first use."""
        log = self.logs.get(session)
        if log is None:
            log = self.logs[session] = EventStream(deque(maxlen=cap))
        return log

    def spawn_stream(self, stream: str) -> Stream:
        queue = self.spawn.get(stream)
        if queue is None:
            queue = self.spawn[stream] = Stream()
        return queue

    def drop_inbox(self, session: str, agent: str) -> None:
        """Delete an inbox nobody will read (its agent never ran), and every ledger of it."""
        self.inboxes.pop((session, agent), None)
        for reader in self.readers:
            reader.forget_ledgers(session, agent)

    def logged(self, session: str, events: Sequence[Event]) -> None:
        """Follow the session's life by what it logs: finished sessions beyond the bound go."""
        for event in events:
            if isinstance(event, SessionFinished):
                self.finished[session] = None
                self.finished.move_to_end(session)
            elif isinstance(event, SessionStarted):
                self.finished.pop(session, None)
        while len(self.finished) > self.finished_kept:
            oldest, _ = self.finished.popitem(last=False)
            self.forget(oldest)

    def forget(self, session: str) -> None:
        """Drop everything kept of a finished session (its agents are gone: a scan per drop is
        bounded by what the bus holds, and a drop happens once per session)."""
        self.logs.pop(session, None)
        self.session_touch.pop(session, None)
        self.spend.pop(session, None)
        self.leads.pop(session, None)
        self.lead_leases.pop(session, None)
        self.spawn.pop(ROUTES.spawn_local(session), None)
        for key in [key for key in self.inboxes if key[0] == session]:
            del self.inboxes[key]
            self.hub.remove(inbox_channel(*key))
        for key in [key for key in self.agents if key[0] == session]:
            del self.agents[key]
        for reader in self.readers:
            reader.forget_session_ledgers(session)
        for key in [key for key in self.tables if key[0] == session]:
            del self.tables[key]


class MemoryCore:
    """One handle on a broker: its own options (its consumer name) and its own closed state,
    as one process's connection to a shared Redis would have."""

    __slots__ = ("broker", "closed", "options", "url")

    def __init__(self, broker: Broker, options: BusOptions, url: str) -> None:
        self.broker = broker
        self.options = options
        self.url = url
        self.closed = False

    @property
    def consumer(self) -> str:
        return self.options.consumer

    def check_open(self) -> None:
        """Raise ``BusClosed`` once this handle was closed."""
        if self.closed:
            raise BusClosed(f"the bus {redact_url(self.url)} is closed; open a new one")

    def close(self) -> None:
        """Refuse new work on this handle, and wake every waiter (they raise ``BusClosed``)."""
        self.closed = True
        self.broker.hub.wake_all()
