"""How long a finished session's keys live on Redis, and removing finished sessions now.

The rules and the reasons are in ``docs/bus.md`` (*Retention*). In short: nothing of a running
session expires; once its end is logged, one script (:file:`scripts/retire_session.lua`) gives
every key of the session a TTL, empties the lead's inboxes (nobody reads them any more) and deletes
the consumers of its streams that hold nothing. ``baton clean`` removes finished sessions at once:
:meth:`RedisRetention.survey` finds every session's keys with one ``SCAN`` and says which sessions
are finished, :meth:`RedisRetention.remove` deletes them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from baton.bus.errors import InvalidEnvelope
from baton.bus.events import SessionFinished
from baton.bus.ids import name_problem
from baton.bus.parts.retention import NOTHING_LEFT, Leftovers, Retention, Retired
from baton.bus.parts.store import STORE_TABLES
from baton.bus.redis.adapter import RedisRefused
from baton.bus.redis.core import RedisCore, stream_entries
from baton.bus.redis.keys import INBOX_GROUP
from baton.bus.redis.log import forget_gone_sessions, logged_event
from baton.bus.redis.scripts import RETIRE_SESSION

log = logging.getLogger(__name__)

PRUNE_BATCH = 100
"""Ids of long-inactive sessions looked at in the sessions' index at each session's end."""
SCAN_COUNT = 1000
LAST_EVENTS = 20
"""How far back a session without a lead record is searched for its ``session.finished``: a
sub-agent that stopped after the end logs its exit after it."""

SessionState = Literal["finished", "leftover", "kept"]
"""``finished``: its end is logged and it never runs again; ``leftover``: keys of no session
(neither a lead record, nor a log, nor a lease); ``kept``: running, or its lead died and it may
be resumed, or what it is cannot be read: never removed."""


@dataclass(frozen=True, slots=True)
class SessionKeys:
    """One session as ``baton clean`` sees it: its keys, what it is, how and when it ended."""

    session: str
    state: SessionState
    keys: tuple[str, ...]
    status: str = ""
    """How a finished session ended (``completed``, ``cancelled``...), when its log says."""
    ended_at: float | None = None
    """When its end (else its last event) was logged, in seconds since the epoch."""

    def idle_for(self, now: float) -> float | None:
        """Seconds since its end was logged; None when unknown."""
        return None if self.ended_at is None else now - self.ended_at


class RedisRetention(Retention):
    """Retention on Redis: every key of a finished session gets a TTL in one script; and
    ``baton clean``'s survey and removal of finished sessions."""

    def __init__(self, core: RedisCore) -> None:
        self._core = core

    async def retire(
        self, session: str, retention_s: float, left: Leftovers = NOTHING_LEFT
    ) -> Retired:
        core, keys = self._core, self._core.keys
        emptied = [keys.inbox(session, name) for name in dict.fromkeys(left.unread)]
        named = [
            keys.events(session),
            keys.lead(session),
            keys.spend(session),
            *(keys.table(session, table) for table in STORE_TABLES),
            keys.spawn_local(session),
            *(keys.inbox(session, name) for name in left.inboxes),
            *(keys.agent(session, name) for name in left.agents),
        ]
        rest = [key for key in dict.fromkeys(named) if key not in emptied]
        ttl_ms = max(1, round(retention_s * 1000))
        script = RETIRE_SESSION.call_keys([*emptied, *rest], ttl_ms, INBOX_GROUP, len(emptied))
        found, consumers, dropped = await core.one(*script)
        core.groups.deleted(emptied)  # gone on purpose: not a loss if a read makes them again
        await self.prune_index(time.time() - retention_s)
        return Retired(keys=int(found), consumers=int(consumers), dropped=int(dropped))

    async def prune_index(self, before: float | None = None) -> set[str]:
        """Take out of the sessions' index the ids whose log is gone: at most
        :data:`PRUNE_BATCH` of those last active before ``before``, or all (``None``)."""
        core = self._core
        if before is None:
            names = await core.one("ZRANGE", core.keys.sessions, 0, -1)
        else:
            names = await core.one(
                "ZRANGEBYSCORE", core.keys.sessions, "-inf", f"({before}", "LIMIT", 0, PRUNE_BATCH
            )
        return await forget_gone_sessions(core, [str(name) for name in names])

    async def expiry(self, session: str) -> float | None:
        """Seconds the session's log has left (None: no TTL; 0: gone)."""
        ms = int(await self._core.one("PTTL", self._core.keys.events(session)))
        if ms == -1:
            return None
        return max(0, ms) / 1000

    # -- baton clean ---------------------------------------------------------------------------

    async def survey(self) -> list[SessionKeys]:
        """Every session that has keys under the prefix, with what it is; one ``SCAN`` of the
        keyspace, then one round trip per session."""
        found = await self._scan()
        return [await self._classify(session, tuple(sorted(found[session]))) for session in found]

    async def remove(self, session: SessionKeys) -> int:
        """Delete the session's keys (``UNLINK``: freed in the background) and its id in the
        sessions' index; returns how many keys went."""
        core = self._core
        removed = int(await core.one("UNLINK", *session.keys)) if session.keys else 0
        await core.one("ZREM", core.keys.sessions, session.session)
        core.groups.deleted(session.keys)
        return removed

    async def _scan(self) -> dict[str, set[str]]:
        core, keys = self._core, self._core.keys
        found: dict[str, set[str]] = {}
        async for batch in core.scan(keys.session_pattern(), SCAN_COUNT):
            for key in batch:
                session = keys.session_of(key)
                if session is not None and name_problem(session, "session") is None:
                    found.setdefault(session, set()).add(key)
        return found

    async def _classify(self, session: str, found: tuple[str, ...]) -> SessionKeys:
        """What the session is: the lease and the lead's record decide; a session without a
        record is finished when its log says so."""
        core, keys = self._core, self._core.keys
        try:
            status, leased, last = await core.call(
                ("HGET", keys.lead(session), "status"),
                ("EXISTS", keys.lead_lease(session)),
                ("XREVRANGE", keys.events(session), "+", "-", "COUNT", LAST_EVENTS),
            )
        except RedisRefused as exc:  # a key of another type, written by hand: leave it be
            log.warning("session %s cannot be read (%s): kept", session, exc)
            return SessionKeys(session, "kept", found)
        entries = stream_entries(last)
        ended_at = _entry_time(entries[0][0]) if entries else None
        finished = _finished_event(entries)
        end = "" if finished is None else finished[1].status
        if finished is not None:
            ended_at = _entry_time(finished[0])
        if int(leased) or (status is not None and status != "finished"):
            return SessionKeys(session, "kept", found, ended_at=ended_at)
        if status == "finished" or finished is not None:
            return SessionKeys(session, "finished", found, end or "finished", ended_at)
        if not entries:
            return SessionKeys(session, "leftover", found)
        return SessionKeys(session, "kept", found, ended_at=ended_at)


def _finished_event(
    entries: Sequence[tuple[str, dict[str, str] | None]],
) -> tuple[str, SessionFinished] | None:
    """The newest ``session.finished`` among the log's last entries (newest first), with its
    entry id; a malformed entry is passed over (its reader dead-letters it)."""
    for entry_id, fields in entries:
        try:
            event = logged_event(fields)
        except InvalidEnvelope:
            continue
        if isinstance(event, SessionFinished):
            return entry_id, event
    return None


def _entry_time(entry_id: str) -> float | None:
    """When a stream entry was added: its id is the time in milliseconds, then a sequence."""
    try:
        return int(entry_id.split("-", 1)[0]) / 1000
    except ValueError:
        return None
