"""The parts a bus is made of: one small interface each, with what it guarantees and raises.

A :class:`~baton.bus.base.Bus` is the bundle of these (``bus.inboxes``, ``bus.log``...), so code
that needs one part takes that part, and each part has its own contract suite over both backends
(``tests/bus/contract/``). The backends implement them in :mod:`baton.bus.memory` and
:mod:`baton.bus.redis`, one module per part.

=================  =========================================================================
part               what it keeps
=================  =========================================================================
``Inboxes``        each agent's inbox: send, read, wait for a wake-up, ack, hand back
``EventLog``       each session's event log and its tails; the list of sessions
``Spawns``         spawn requests as a session sends them: submit, watch, where each stands
``Claims``         spawn requests as a worker takes them: claim, renew, ack, release
``Workers``        which workers serve a pool now
``Records``        each agent's state record; the lead's lease and record
``Budget``         the session's caps and totals of model calls and tokens
``Retention``      how long a finished session's data lives
``SessionStore``   a small key-value store per session (a server's HTTP tokens)
``DeadLetters``    what could not be delivered, with why
=================  =========================================================================
"""

from __future__ import annotations

from baton.bus.parts.budget import Budget
from baton.bus.parts.claims import Claims, SpawnClaim, SpawnQueue
from baton.bus.parts.dead import DeadLetters, Quarantine
from baton.bus.parts.inboxes import DEFAULT_WAIT_S, Inboxes, InboxLedger
from baton.bus.parts.log import EventLog, LoggedEvent
from baton.bus.parts.records import LeadLease, Records
from baton.bus.parts.retention import DEFAULT_RETENTION_S, Leftovers, Retention, Retired
from baton.bus.parts.spawns import SpawnListener, Spawns, SpawnState
from baton.bus.parts.store import SessionStore, StoreTable
from baton.bus.parts.workers import Workers

__all__ = [
    "DEFAULT_RETENTION_S",
    "DEFAULT_WAIT_S",
    "Budget",
    "Claims",
    "DeadLetters",
    "EventLog",
    "InboxLedger",
    "Inboxes",
    "LeadLease",
    "Leftovers",
    "LoggedEvent",
    "Quarantine",
    "Records",
    "Retention",
    "Retired",
    "SessionStore",
    "SpawnClaim",
    "SpawnListener",
    "SpawnQueue",
    "SpawnState",
    "Spawns",
    "StoreTable",
    "Workers",
]
