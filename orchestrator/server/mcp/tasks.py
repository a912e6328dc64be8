"""MCP tasks on the bus: a task is the session its ``run`` started, and a small record beside it.

**Ids.** A task id is ``<session id>~<43 characters>``: the session says where the record is, the
rest is 32 random bytes (``secrets.token_urlsafe``), so nobody enumerates or guesses a task. The
bus keeps only the SHA-256 of the id, as HTTP session tokens are kept (``baton.server.access``):
whoever reads Redis cannot use a task id from it.

**Where it lives.** The record is one field of the session's ``mcp_tasks`` table
(``baton:{S}:mcp_tasks``, docs/protocol.md's key table): field = the id's digest, value = the
record's JSON (when it was made, its ttl, whether its host can answer questions, whether it was
cancelled). It lives and expires with the session's other keys (docs/bus.md, *Retention*).
Everything else a task reports is folded from the session's event log (:mod:`.fold`) at each
request: its status, its newest progress line, the questions it waits on, its result. So any
``baton serve`` on the same Redis answers for a task, and a restarted one still does; a task
started by ``baton mcp`` on ``memory://`` lives as long as that process.

**Status**, from the record and the log, in this order: ``cancelled`` once ``tasks/cancel`` was
accepted (it stays so, whatever the session did next); the session's end (``cancelled`` for a
cancelled session; ``failed`` for a failed one on 2025-11-25, whose tasks fail on a tool error;
``completed`` otherwise, the result inline on 2026-07-28 with ``isError`` for a failed session);
``input_required`` while a question waits for a person the host can answer; else ``working``,
with the newest progress line as ``statusMessage``. A session whose lead process died (its lease
lapsed, so nothing runs it) stays ``working``, and the message says ``baton resume`` continues it.
"""

from __future__ import annotations

import hashlib
import secrets
from contextlib import aclosing
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from baton.bus.base import Bus
from baton.bus.events import utc_now
from baton.bus.ids import name_problem
from baton.bus.parts.store import StoreTable
from baton.bus.tail import tail_events
from baton.engine.questions import OpenQuestion
from baton.lead.keeper import lead_lost
from baton.server.mcp.fold import LogFold

TABLE: StoreTable = "mcp_tasks"
SEPARATOR = "~"
SECRET_BYTES = 32
POLL_MS = 500
"""The polling interval tasks suggest: an offline session ends within a second or two."""

TaskStatus = Literal["working", "input_required", "completed", "failed", "cancelled"]
TERMINAL: frozenset[str] = frozenset({"completed", "failed", "cancelled"})
Asked = Literal["host", "nobody"]


class TaskRecord(BaseModel):
    """What the bus keeps of a task beside its session (see the module docstring)."""

    model_config = ConfigDict(defer_build=True, extra="forbid", frozen=True)

    session: str
    created_at: datetime
    ttl_ms: int | None
    asked: Asked
    """Who answers the session's questions: the ``host`` (through ``tasks/result`` or
    ``tasks/update``), or ``nobody`` (the host offered no elicitation: each is declined)."""
    cancelled_at: datetime | None = None


def digest(task_id: str) -> str:
    return hashlib.sha256(task_id.encode("utf-8", "surrogateescape")).hexdigest()


def session_of(task_id: str) -> str | None:
    """The session a task id names, or None when it is not shaped like one."""
    session, separator, secret = task_id.partition(SEPARATOR)
    if not separator or not secret or name_problem(session, "session id") is not None:
        return None
    return session


async def create_task(bus: Bus, session: str, ttl_ms: int | None, asked: Asked) -> str:
    """Record a task of ``session`` on the bus and return its id; once this returns, any server
    of the bus finds it."""
    task_id = f"{session}{SEPARATOR}{secrets.token_urlsafe(SECRET_BYTES)}"
    record = TaskRecord(session=session, created_at=utc_now(), ttl_ms=ttl_ms, asked=asked)
    await bus.store.put(session, TABLE, {digest(task_id): record.model_dump_json()})
    return task_id


async def load_task(bus: Bus, task_id: str) -> TaskRecord | None:
    """The record of ``task_id``, or None for an id the bus has no task of."""
    session = session_of(task_id)
    if session is None:
        return None
    raw = await bus.store.get(session, TABLE, digest(task_id))
    if raw is None:
        return None
    try:
        record = TaskRecord.model_validate_json(raw)
    except ValidationError:
        return None
    return record if record.session == session else None


async def cancel_task(bus: Bus, task_id: str, record: TaskRecord) -> TaskRecord:
    """Mark the task cancelled on the bus (before the session has stopped: the task reports
    ``cancelled`` from now on)."""
    if record.cancelled_at is not None:
        return record
    cancelled = record.model_copy(update={"cancelled_at": utc_now()})
    await bus.store.put(record.session, TABLE, {digest(task_id): cancelled.model_dump_json()})
    return cancelled


@dataclass(slots=True)
class TaskView:
    """A task as it stands: its record and its session's log folded."""

    task_id: str
    record: TaskRecord
    fold: LogFold
    lead_gone: bool

    def status(self, *, failed_is_failure: bool) -> TaskStatus:
        """The status (see the module docstring); ``failed_is_failure``: 2025-11-25's rule that
        a tool error fails the task."""
        finished = self.fold.finished
        if self.record.cancelled_at is not None:
            return "cancelled"
        if finished is not None:
            if finished.status == "cancelled":
                return "cancelled"
            if finished.status == "failed" and failed_is_failure:
                return "failed"
            return "completed"
        if self.questions():
            return "input_required"
        return "working"

    def questions(self) -> list[OpenQuestion]:
        """The questions the host is to answer now (none while nobody can be asked, or once the
        session's lead is gone)."""
        if self.record.asked != "host" or self.lead_gone or self.fold.finished is not None:
            return []
        return self.fold.open_questions()

    def message(self, status: TaskStatus) -> str:
        session = self.record.session
        finished = self.fold.finished
        if status == "cancelled" and self.record.cancelled_at is not None:
            return "cancelled by tasks/cancel"
        if finished is not None:
            return f"session {session} {finished.status.replace('_', ' ')}"
        if status == "input_required":
            asked = self.questions()
            return f"waiting for a person: {asked[0].message}" if asked else "waiting for a person"
        if self.lead_gone:
            return (
                f"the lead of session {session} is gone (its process died): `baton resume "
                f"{session}` continues it"
            )
        return self.fold.line or f"session {session} starting"

    @property
    def updated(self) -> datetime:
        moments = [self.record.created_at]
        if self.fold.updated is not None:
            moments.append(self.fold.updated)
        if self.record.cancelled_at is not None:
            moments.append(self.record.cancelled_at)
        return max(moments)


async def view_task(bus: Bus, task_id: str, record: TaskRecord) -> TaskView:
    """Fold the task's session as its log stands now."""
    fold = LogFold(record.session)
    async with aclosing(tail_events(bus, record.session, follow=False, outage_s=0)) as logs:
        async for logged in logs:
            fold.apply(logged.cursor, logged.event)
    gone = fold.finished is None and await lead_lost(bus, record.session)
    return TaskView(task_id, record, fold, gone)


def iso(moment: datetime) -> str:
    """An ISO 8601 timestamp in UTC, as tasks carry them."""
    return moment.isoformat().replace("+00:00", "Z")
