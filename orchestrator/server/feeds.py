"""One tail of the bus per watched session, shared by every SSE client of that session.

Why: a thousand browsers on one session must not mean a thousand tails of the event log (a
thousand ``XRANGE`` loops on Redis, a thousand JSON validations per event). A :class:`Feed` reads
the log once, encodes each event once as an SSE frame (``id`` = its cursor, ``event`` = its type,
``data`` = its JSON), and keeps the frames; each client only walks the list from its own position.
The list is bounded by the bus's event-log cap, and a feed is dropped when its last client leaves.
A feed rides out a bus outage (up to ``outage_s``) and carries on at its cursor; past that it
fails, which ends its streams (clients then resume by cursor).

A feed reads what is logged, then follows the log only once a client is answered with it
(:meth:`Feed.follow`): a request for a session that does not exist is answered 404 from that one
read, and leaves nothing behind it (no subscription made and dropped, no task waiting).

Resumption is exact because positions are cursors: a client that says ``Last-Event-ID: C`` starts
at the first frame whose cursor is greater than ``C`` (cursors are ordered integers on the memory
bus, ``ms-seq`` stream ids on Redis), so nothing is sent twice and nothing is skipped.
"""

from __future__ import annotations

import logging
import re
from bisect import bisect_right
from collections.abc import AsyncIterator

import anyio
from anyio.abc import TaskGroup

from baton.bus.base import Bus, LoggedEvent
from baton.bus.events import SessionFinished, dump_event
from baton.bus.tail import tail_events

log = logging.getLogger(__name__)

CURSOR = re.compile(r"^\d{1,20}(-\d{1,20})?$")


def cursor_key(cursor: str) -> tuple[int, ...]:
    """The sort key of a cursor; raises ``ValueError`` for one no bus would have produced."""
    if not CURSOR.match(cursor):
        raise ValueError(f"bad event cursor {cursor!r}: expected N or N-M")
    return tuple(int(part) for part in cursor.split("-"))


def encode_frame(cursor: str, kind: str, data: str) -> bytes:
    """One SSE event; ``data`` is one line of JSON (``dump_event`` never writes a newline)."""
    return f"id: {cursor}\nevent: {kind}\ndata: {data}\n\n".encode()


class Feed:
    """The frames of one session's log so far, and a way to wait for more."""

    def __init__(self, bus: Bus, session: str, *, outage_s: float | None = None) -> None:
        self.bus = bus
        self.session = session
        self.outage_s = outage_s
        self.frames: list[bytes] = []
        self.keys: list[tuple[int, ...]] = []
        self.finished_at: int | None = None
        """Index of the ``session.finished`` frame, once read: streams end after it."""
        self.caught_up = anyio.Event()
        """Set once everything logged before the feed started is in ``frames``."""
        self.failed = False
        self.closed = False
        self.subscribers = 0
        self.scope = anyio.CancelScope()
        self._changed = anyio.Event()
        self._wanted = anyio.Event()

    def start_index(self, after: str | None) -> int:
        """The index of the first frame after cursor ``after`` (0 when None)."""
        return 0 if after is None else bisect_right(self.keys, cursor_key(after))

    async def wait_beyond(self, index: int) -> None:
        """Return once there is a frame at ``index``, or the feed failed or closed."""
        while index >= len(self.frames) and not (self.failed or self.closed):
            await self._changed.wait()

    def follow(self) -> None:
        """A client is answered with this feed: follow the log past what was read."""
        self._wanted.set()

    def close(self) -> None:
        self.closed = True
        self._notify()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    async def run(self) -> None:
        """Tail the log until the session finishes (then keep the frames for late readers)."""
        with self.scope:
            try:
                after = await self._read(None, follow=False)
                self.caught_up.set()
                self._notify()
                if self.finished_at is None:
                    await self._wanted.wait()  # or the last client leaves: cancelled
                    await self._read(after, follow=True)
            except Exception as exc:  # a bus fault ends the streams; clients resume by cursor
                log.warning("event feed of session %s failed: %s", self.session, exc)
                self.failed = True
            finally:
                self.caught_up.set()
                self._notify()

    async def _read(self, after: str | None, *, follow: bool) -> str | None:
        events = tail_events(
            self.bus, self.session, after=after, follow=follow, outage_s=self.outage_s
        )
        try:
            async for logged in events:
                event = logged.event
                after = logged.cursor
                self.keys.append(cursor_key(logged.cursor))
                self.frames.append(encode_frame(logged.cursor, event.type, dump_event(event)))
                if isinstance(event, SessionFinished):
                    self.finished_at = len(self.frames) - 1
                if follow:
                    self._notify()
                    if self.finished_at is not None:
                        break
        finally:
            await _aclose(events)
        return after


async def _aclose(events: AsyncIterator[LoggedEvent]) -> None:
    """Close a bus tail even when cancelled (a Redis tail holds a watch until closed)."""
    aclose = getattr(events, "aclose", None)
    if aclose is not None:
        with anyio.CancelScope(shield=True):
            await aclose()


class Feeds:
    """The live feeds of a server, one per watched session, run in the server's task group."""

    def __init__(self, bus: Bus, group: TaskGroup, *, outage_s: float | None = None) -> None:
        self.bus = bus
        self.group = group
        self.outage_s = outage_s
        self._feeds: dict[str, Feed] = {}
        self._closed = False

    def acquire(self, session: str) -> Feed:
        """The session's feed (started if needed); pair every call with :meth:`release`."""
        feed = self._feeds.get(session)
        if feed is None or feed.failed:
            feed = self._feeds[session] = Feed(self.bus, session, outage_s=self.outage_s)
            if self._closed:
                feed.close()
                feed.caught_up.set()
            else:
                self.group.start_soon(feed.run, name=f"feed {session}")
        feed.subscribers += 1
        return feed

    def release(self, feed: Feed) -> None:
        """One client less; the last one out stops the tail and frees the frames."""
        feed.subscribers -= 1
        if feed.subscribers <= 0:
            feed.scope.cancel()
            if self._feeds.get(feed.session) is feed:
                del self._feeds[feed.session]

    def __len__(self) -> int:
        """How many sessions are being watched now."""
        return len(self._feeds)

    def close(self) -> None:
        """Server shutdown: every stream ends now (clients reconnect to another server)."""
        self._closed = True
        for feed in self._feeds.values():
            feed.close()
            feed.scope.cancel()
