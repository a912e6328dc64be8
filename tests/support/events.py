"""Reading a session's event log the way a viewer does: the whole log, or a bounded wait on its
tail for one event (never a sleep)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar, overload

import anyio

from baton.bus.base import Bus
from baton.bus.events import Event

E = TypeVar("E")


async def logged_events(bus: Bus, session: str) -> list[Event]:
    """The whole event log of a session, as it stands."""
    return [logged.event async for logged in bus.log.tail(session, follow=False)]


@overload
async def wait_for_event(
    bus: Bus,
    session: str,
    match: Callable[[Event], bool],
    *,
    timeout: float = ...,
    after: str | None = ...,
) -> Event: ...


@overload
async def wait_for_event(
    bus: Bus, session: str, match: type[E], *, timeout: float = ..., after: str | None = ...
) -> E: ...


async def wait_for_event(
    bus: Bus,
    session: str,
    match: type[E] | Callable[[Event], bool],
    *,
    timeout: float = 20.0,
    after: str | None = None,
) -> E | Event:
    """The first event of the session log (from ``after``) that is of type ``match`` or for which
    ``match(event)`` is true; fails after ``timeout`` seconds or if the log ends."""
    with anyio.fail_after(timeout):
        async for logged in bus.log.tail(session, after=after):
            if isinstance(match, type):
                if isinstance(logged.event, match):
                    return logged.event
            elif match(logged.event):
                return logged.event
    raise AssertionError("the event log ended")
