"""What goes on the wire: AG-UI events as SSE frames, and baton's ``id:`` cursors on them.

The frame is the official encoder's (``data: <event JSON>`` and a blank line, LF only, as the
HTTP binding requires). baton adds an ``id:`` line, which the binding lets a consumer ignore: the
events a logged event becomes are written in one piece, and the last of them carries
``<session>:<cursor>``, the log's own cursor. A client that lost its stream sends it back as
``Last-Event-ID`` and gets exactly what came after (docs/ag-ui.md, *Reconnecting*). Events that
belong to the connection rather than to the log (``RUN_STARTED``, the state a run opens with,
the ``RUN_FINISHED`` that closes it) carry no id: they are made anew by every run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ag_ui.core import BaseEvent
from ag_ui.encoder import EventEncoder

from baton.bus.ids import name_problem
from baton.server.feeds import cursor_key

ENCODER = EventEncoder()
MEDIA_TYPE = ENCODER.get_content_type()
SEPARATOR = ":"
"""Between the session and the cursor in an ``id:``: in neither (``baton.bus.ids``, cursors)."""
FROM_START = "0"
"""``Last-Event-ID: 0``: everything, from the thread's first event."""


def frames(events: Sequence[BaseEvent], event_id: str | None = None) -> bytes:
    """``events`` as SSE frames; the last one carries ``event_id`` when given."""
    chunks = [ENCODER.encode(event) for event in events]
    if event_id is not None and chunks:
        chunks[-1] = f"id: {event_id}\n{chunks[-1]}"
    return "".join(chunks).encode()


def event_id(session: str, cursor: str) -> str:
    return f"{session}{SEPARATOR}{cursor}"


@dataclass(frozen=True, slots=True)
class Resumption:
    """Where a client's ``Last-Event-ID`` says it stopped: after ``cursor`` of ``session``
    (None: the thread's newest session); ``cursor`` None: before anything."""

    session: str | None
    cursor: str | None


def read_last_event_id(value: str) -> Resumption:
    """Parse ``<session>:<cursor>`` (baton's AG-UI ids), a bare ``<cursor>`` (its native stream's,
    for the thread's newest session) or ``0``; ``ValueError`` saying why for anything else."""
    value = value.strip()
    if value == FROM_START:
        return Resumption(None, None)
    session, separator, cursor = value.rpartition(SEPARATOR)
    if separator:
        problem = name_problem(session, "its session")
        if problem is not None:
            raise ValueError(f"Last-Event-ID {value[:120]!r}: {problem}")
    try:
        cursor_key(cursor)
    except ValueError as exc:
        raise ValueError(
            f"Last-Event-ID {value[:120]!r}: not an id this stream sent "
            "(<session>:<cursor>, or 0 for everything)"
        ) from exc
    return Resumption(session or None, cursor)


def after(cursor: str, start: str | None) -> bool:
    """Whether ``cursor`` comes after ``start`` (every cursor does when ``start`` is None)."""
    return start is None or cursor_key(cursor) > cursor_key(start)
