"""AG-UI threads over baton sessions: which sessions a thread is, and what is kept of each.

``threadId`` is the session. A thread's first session has the thread's id; baton's sessions end
once the lead has answered, so a user message on a thread whose session has ended starts the
thread's next one, ``<thread>.t2`` (then ``.t3``, ...), whose lead is given the thread's earlier
requests and answers as a note ahead of the new message — the session-id scheme A2A contexts use
(:mod:`baton.server.a2a.contexts`), so nothing else about a thread is kept: every server on the bus
reads a thread alike, and it lives as long as its sessions (docs/bus.md, *Retention*).

What the endpoint keeps of each session is in the session's ``agui`` table on the bus
(docs/protocol.md, *Redis keys*): the ids of the client messages it took (a client sends its
whole history every run: its newest user message is new only when no run took it before), and
``delivered``, the cursor through which a run that ended cleanly delivered the log.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from baton.bus.base import Bus
from baton.bus.ids import NAME_MAX, name_problem
from baton.bus.parts.store import StoreTable
from baton.server.a2a.contexts import Turn, exchange_text, parse, request_of, task_id, tasks_of
from baton.server.approval_policy import session_approve
from baton.server.context import ServerContext
from baton.server.state import session_state
from baton.session import SessionConfig

TABLE: StoreTable = "agui"
DELIVERED = "delivered"
TAKEN = "m:"
MAX_EARLIER = 20
"""A thread's next session is given the exchange of at most this many sessions before it."""
LIVE = ("pending", "running")


THREAD_MAX = NAME_MAX - 10
"""The longest thread id: its later sessions' ids (``<thread>.t<n>``) must be session ids too."""


def thread_problem(thread: str) -> str | None:
    """Why ``thread`` cannot name a thread (then the request is refused), or None."""
    problem = name_problem(thread, "threadId", max_len=THREAD_MAX)
    if problem is not None:
        return f"{problem} (it names the thread's sessions)"
    first, number = parse(thread)
    if number > 1:
        return (
            f"threadId {thread!r} is the id of a later session of thread {first!r}: "
            "send the thread's own id"
        )
    return None


@dataclass(frozen=True, slots=True)
class Thread:
    """A thread's sessions, oldest first, and how its newest one stands."""

    id: str
    sessions: list[str]
    status: str
    """The newest session's lead, as its record says: ``running`` (its lead reads its inbox),
    ``pending`` (starting here: no record yet), ``closing``/``finishing``/``finished``, or
    ``ended`` (no record left)."""

    @property
    def current(self) -> str | None:
        return self.sessions[-1] if self.sessions else None

    @property
    def live(self) -> bool:
        return bool(self.sessions) and self.status in LIVE

    def next_session(self) -> str:
        """The id of the session a new message starts once the newest has ended."""
        return task_id(self.id, parse(self.sessions[-1])[1] + 1 if self.sessions else 1)


async def find_thread(ctx: ServerContext, thread: str) -> Thread:
    """The thread as the bus has it now (a session this server just started counts); whether
    its newest session lives is its lead's record, the one ``send_if_running`` reads too."""
    sessions = tasks_of(thread, await ctx.bus.log.sessions())
    hosted = [s for s in (thread,) if ctx.host.is_hosted(s) and s not in sessions]
    sessions = hosted + sessions
    if not sessions:
        return Thread(thread, [], "pending")
    current = sessions[-1]
    record = await ctx.bus.records.lead(current)  # one read: the log may be long
    status = record.get("status") or ("pending" if ctx.host.is_hosted(current) else "ended")
    return Thread(thread, sessions, status)


async def taken(bus: Bus, session: str, message_id: str) -> bool:
    """Whether a run already took the client message ``message_id`` into ``session``."""
    return await bus.store.get(session, TABLE, TAKEN + message_id) is not None


async def take(bus: Bus, session: str, *message_ids: str) -> None:
    await bus.store.put(session, TABLE, {TAKEN + message_id: session for message_id in message_ids})


async def delivered(bus: Bus, session: str) -> str | None:
    """The cursor through which the session's last clean run delivered its log, if any."""
    return await bus.store.get(session, TABLE, DELIVERED)


async def mark_delivered(bus: Bus, session: str, cursor: str) -> None:
    await bus.store.put(session, TABLE, {DELIVERED: cursor})


def session_config(ctx: ServerContext, session: str, task: str, context: str) -> SessionConfig:
    """A thread's session, as ``POST /sessions`` starts one (every profile; approvals asked of
    the client, as interrupts, unless the server's approval policy is ``deny``; the server's
    timeout, model and media)."""
    return SessionConfig(
        task=task,
        context=context,
        session_id=session,
        bus_url=ctx.bus.url,
        model=ctx.model,
        profiles=ctx.host.profiles,
        approve=session_approve(None, ctx.config.approve),
        timeout_s=min(ctx.config.session_timeout_s, ctx.config.max_session_timeout_s),
        media_dir=ctx.media_root,
        media=ctx.config.media,
        images=ctx.config.images,
    )


async def exchange_of(ctx: ServerContext, thread: str, sessions: Sequence[str]) -> str:
    """The note a thread's next session's lead reads: its earlier requests and answers."""
    turns = []
    for session in sessions[-MAX_EARLIER:]:
        state = await session_state(ctx.bus.log, session)
        turns.append(Turn(session, request_of(state.task), state.answer))
    text = exchange_text(turns)
    if not text:
        return ""
    return f"Earlier in this conversation (AG-UI thread {thread}), oldest first:\n{text}"
