"""Sessions: a lead, its sub-agents, the bus and the event stream, under one task group.

Run a whole session in your own anyio (asyncio) application — nothing needs starting first: the
in-process bus, an in-process worker for the sub-agents and the offline model are the defaults::

    from baton.api import Session, SessionConfig

    async with Session(SessionConfig(task="paint a fox and write a haiku about it")) as session:
        async for event in session.events():       # starts the session; ends after it finished
            if event.type == "text.delta" and event.agent == "lead":
                print(event.text, end="", flush=True)   # token by token
        result = await session.run()                # SessionResult(status, answer, media_urls)

``await session.run()`` alone runs it to the end too. While it runs, from any task:
``await session.post("also a cat")`` (a follow-up the lead answers in this session),
``await session.answer(call_id, approved=True)`` (an approval the lead or a sub-agent asked for),
``await session.answer(question_id, Path("notes.txt"))`` (a file it asked for; every open
question is in ``await session.questions()``),
``session.cancel()`` (shutdown to every sub-agent, then ``SessionFinished(status="cancelled")``).

With ``bus_url="redis://..."`` the session runs on Redis; with ``local_workers=False`` external
``baton worker`` processes of its ``pool`` host the sub-agents. A session's own worker hosts only
that session's sub-agents (its spawn requests are routed to it alone: ``docs/protocol.md``).
Every event also goes to the session's event log (lead text coalesced every ``text_flush_s``),
where ``baton watch`` and others read it.

Bus outages: every part of a session rides out a bus that went away (a Redis restart or
failover) and carries on where it was once it is back, for up to ``bus_outage_s`` (120 s by
default). The session's tail of its own event log doubles as its pulse on the bus: it touches the
bus every few seconds whatever the lead is doing, so once the bus has been gone longer than that,
the tail fails the session (status ``failed``, ``Session.error`` a
:class:`~baton.bus.errors.BusOutage`: "bus unreachable for N s") and the lead, whose own bus calls
wait for as long as it takes, is cancelled; ``baton run`` then exits 3.

Durable lead: while it runs, the lead holds a lease on the bus and checkpoints itself at every step
(its conversation, its sub-agents, what it took from its inbox); a session whose lead process died
(``kill -9``) is continued by ``Session.resume(session_id, bus_url="redis://...")`` (or
``baton resume``) with the results that arrived meanwhile, and ends with one final answer
(``docs/protocol.md``, *The lead's checkpoint and resuming a session*)::

    async with Session.resume("s-123", bus_url="redis://localhost:6379/0") as session:
        result = await session.run()

A session that finished, one whose lead is alive, and any on a ``memory://`` bus are refused
(:class:`~baton.lead.keeper.ResumeRefused`, a ``ConfigError``).

Lifecycle: leaving the ``async with`` block cancels a session still running (gracefully: the
sub-agents are told to shut down; a session that has not ended after a bounded wait is then
cancelled outright, with a warning) and stops everything the session started; cancelling the task
that runs it does the same and re-raises the cancellation.

The package, a module per job: :mod:`~baton.session.config` (what a session is told and what it
ends with), :mod:`~baton.session.setup` (the resumable setup: what the lead's record keeps, how a
resume reads it back), :mod:`~baton.session.build` (the composition root: the lead, its router,
its spawn watch and its own worker from the config), :mod:`~baton.session.lifecycle` (running
the parts built, and ending them), :mod:`~baton.session.beginning` (its start on the bus),
:mod:`~baton.session.tail` (the other agents' events to its viewers),
:mod:`~baton.session.ending` (its end on the bus), :mod:`~baton.session.answers` (what
``Session.answer`` accepts), :mod:`~baton.session.compose` (the profiles and models a session
gives its lead and workers), :mod:`~baton.session.spawn_watch` (its watch over the spawn requests
no worker claims) and :mod:`~baton.session.view` (a session folded from its events: the one fold
every view of a session shares, the terminal's and the HTTP API's).

The names resolve lazily (PEP 562): the views that only fold events (``baton watch``, the server's
state) import :mod:`baton.session.view` without the lead, the engine and the model client that
:mod:`~baton.session.lifecycle` brings.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from baton.llm._lazy import lazy_attributes

if TYPE_CHECKING:
    from baton.bus.messages import ApproveMode
    from baton.session.config import SessionConfig, SessionResult, new_session_id
    from baton.session.lifecycle import Session, open_session

_HOMES = {
    "baton.bus.messages": ("ApproveMode",),
    "baton.session.config": ("SessionConfig", "SessionResult", "new_session_id"),
    "baton.session.lifecycle": ("Session", "open_session"),
}

__all__ = [
    "ApproveMode",
    "Session",
    "SessionConfig",
    "SessionResult",
    "new_session_id",
    "open_session",
]


__getattr__ = lazy_attributes(__name__, _HOMES)
