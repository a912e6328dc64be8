"""Following a session's log for one MCP call: progress lines out, questions to a person handled
as the call can, until the session ends (or, on 2026-07-28, until it needs the host's input).

The log is read whole first and only then followed, so the questions still open are known from
the whole story (one asked and already answered is never asked again); progress lines go out for
the events after ``emit_after`` (a retried call does not repeat what its first round said).

What happens to a question is the :class:`Asker`'s business (:mod:`.askers`): asked in an
elicitation while the call waits, declined because nobody can be asked, or — ``pause`` — handed
back to the caller, who returns it as the call's input request. A question that closes while it
is being asked (someone answered it on the page, or it expired) is dropped by its asker.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Protocol

import anyio
from anyio.abc import TaskGroup

from baton.bus.base import Bus
from baton.bus.errors import BusError
from baton.bus.tail import tail_events
from baton.engine.questions import OpenQuestion
from baton.server.feeds import cursor_key
from baton.server.mcp.fold import LogFold

Report = Callable[[str], Awaitable[None]]


class Asker(Protocol):
    """What one call does with a question to a person (see :mod:`.askers`)."""

    def ask(self, question: OpenQuestion, group: TaskGroup) -> None:
        """Take up ``question`` (in ``group``: it may wait for the host)."""

    def drop(self, question_id: str) -> None:
        """``question_id`` closed: stop asking it."""


@dataclass(slots=True)
class Followed:
    """Where following stopped: the fold of the log so far, and the questions the call hands
    back for its host (``pause``; empty when the session ended)."""

    fold: LogFold
    paused: list[OpenQuestion] = field(default_factory=list)


def _later(cursor: str, after: str | None) -> bool:
    return after is None or cursor_key(cursor) > cursor_key(after)


async def follow_session(
    bus: Bus,
    session: str,
    *,
    report: Report,
    asker: Asker | None,
    emit_after: str | None = None,
    pause: bool = False,
    skip: Collection[str] = (),
    outage_s: float | None = None,
) -> Followed:
    """Follow ``session`` until it ends or (``pause``) a question not in ``skip`` is open; see
    the module docstring. ``asker`` None leaves questions alone (a task's host answers them
    through ``tasks/update``).

    A bus gone longer than ``outage_s`` raises the tail's ``BusOutage`` (a :class:`BusError`)
    as itself, never wrapped in an ``ExceptionGroup`` by the task group the askers run in: each
    caller turns it into its own error (a tool error, a JSON-RPC error, a watcher that stops),
    and nothing else of the server is touched."""
    fold = LogFold(session)
    asked: set[str] = set(skip)
    paused: list[OpenQuestion] = []
    failure: BusError | None = None
    async with anyio.create_task_group() as group:
        try:
            async with aclosing(tail_events(bus, session, follow=False, outage_s=outage_s)) as logs:
                async for logged in logs:
                    line = fold.apply(logged.cursor, logged.event)
                    if line and _later(logged.cursor, emit_after):
                        await report(line)
            if fold.finished is None:
                paused = _settle(fold, asked, asker, group, pause)
            if fold.finished is None and not paused:
                live = tail_events(bus, session, after=fold.cursor, outage_s=outage_s)
                async with aclosing(live) as logs:
                    async for logged in logs:
                        line = fold.apply(logged.cursor, logged.event)
                        if line:
                            await report(line)
                        if fold.finished is not None:
                            break
                        paused = _settle(fold, asked, asker, group, pause)
                        if paused:
                            break
        except BusError as exc:  # raised below, outside the group, as itself (not in a group)
            failure = exc
        finally:
            group.cancel_scope.cancel()  # whatever is still being asked: the following ended
    if failure is not None:
        raise failure
    return Followed(fold, paused)


def _settle(
    fold: LogFold, asked: set[str], asker: Asker | None, group: TaskGroup, pause: bool
) -> list[OpenQuestion]:
    """Take up the questions opened since the last look, drop the ones that closed; returns the
    new ones instead when pausing."""
    open_now = fold.open_questions()
    ids = {question.id for question in open_now}
    for question_id in [q for q in asked if q not in ids]:
        asked.discard(question_id)
        if asker is not None:
            asker.drop(question_id)
    new = [question for question in open_now if question.id not in asked]
    if pause and new:
        return new
    for question in new:
        asked.add(question.id)
        if asker is not None:
            asker.ask(question, group)
    return []
