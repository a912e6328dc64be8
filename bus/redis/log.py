"""Session event logs on Redis: one capped stream per session, whose name is also the wake-up
channel its tails listen on; plus the sorted set of sessions by last activity.

Tails of one session share one subscription, and the last tail to end drops it, so a server that
watched thousands of sessions does not stay subscribed to them all.

The sessions' index (``baton:sessions``) is one key for every session, so on a Redis Cluster it
lives on one node, and a write to it beside each event would make every emit a round trip to two
nodes and that node the hot spot of the whole cluster. So a process touches a session's entry at
most once per :data:`INDEX_TOUCH_S`: the index orders sessions by last activity to within that,
and an emit after the first goes to the session's own node only (one node, one round trip).
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

from pydantic import ValidationError

from baton.bus.errors import InvalidEnvelope
from baton.bus.events import Event, dump_event, parse_event
from baton.bus.messages import describe_error
from baton.bus.parts.dead import DeadLetters, set_aside
from baton.bus.parts.log import EventLog, LoggedEvent
from baton.bus.redis.adapter import RedisRefused
from baton.bus.redis.batch import Command
from baton.bus.redis.core import RedisCore, stream_entries
from baton.bus.redis.scripts import APPEND_AND_WAKE, APPEND_ONCE
from baton.bus.utf8 import not_utf8, printable, utf8_problem
from baton.bus.wake import Watch
from baton.errors import ConfigError

log = logging.getLogger(__name__)

# A tail looks at its stream again this often even without a wake-up (pub/sub is only a hint).
_TAIL_RECHECK_S = 5.0


INDEX_TOUCH_S = 30.0
"""A process writes a session's last activity into the sessions' index at most this often."""


_BAD_STREAM_ID = ("invalid stream id", "invalid start id")
"""How Redis words an XRANGE bound that is not a stream ID ("Invalid stream ID specified as stream
command argument"), or one past the last possible ID ("invalid start ID for the interval"): the
only refusals that mean the caller's cursor is wrong. They come as plain ``ERR`` replies."""


def is_bad_stream_id(refused: RedisRefused) -> bool:
    """True when Redis refused a command because a stream ID it was given is malformed."""
    text = str(refused).lower()
    return refused.code == "ERR" and any(words in text for words in _BAD_STREAM_ID)


class RedisEventLog(EventLog):
    """Session event logs on Redis: capped streams, tailed over pub/sub wake-ups."""

    def __init__(self, core: RedisCore, letters: DeadLetters) -> None:
        self._core = core
        self._letters = letters
        self._tails: dict[str, int] = {}  # stream key → how many tails follow it
        self._touched: dict[str, float] = {}  # session → when this process last indexed it,
        # oldest first: what is older than INDEX_TOUCH_S is forgotten from the front
        self.clock = time.monotonic
        """What the index's touch interval is measured with (a test moves it on)."""

    async def emit(self, event: Event) -> str:
        core = self._core
        key = core.keys.events(event.session)
        cap = str(core.options.event_log_cap)
        append = APPEND_AND_WAKE.call(key, "event", dump_event(event), key, "", cap)
        return str((await self._append(event.session, append))[0])

    async def emit_once(
        self, session: str, agent: str, events: Sequence[Event], *, mark: str
    ) -> bool:
        core = self._core
        key = core.keys.events(session)
        cap = str(core.options.event_log_cap)
        payloads = [dump_event(event) for event in events]
        keys = (key, core.keys.agent(session, agent))
        append = APPEND_ONCE.call_keys(keys, "logged", mark, cap, *payloads)
        return bool((await self._append(session, append))[0])

    async def _append(self, session: str, append: Command) -> list[Any]:
        """``append`` to ``session``'s log, with the index's touch when one is due (a failed
        round trip leaves the touch due)."""
        touch = self._touch(session)
        try:
            return await self._core.call(append, *touch)
        except BaseException:
            if touch:
                self._touched.pop(session, None)
            raise

    def _touch(self, session: str) -> tuple[Command, ...]:
        """The index write to send beside an append to ``session``'s log: none when this process
        wrote it less than :data:`INDEX_TOUCH_S` ago (see the module docstring)."""
        now = self.clock()
        touched = self._touched
        last = touched.get(session)
        if last is not None and now - last < INDEX_TOUCH_S:
            return ()
        # Forget what is due again (it would be touched anyway), from the oldest: each touch
        # pays only for the entries it drops, however many sessions are active.
        while touched:
            oldest, at = next(iter(touched.items()))
            if now - at < INDEX_TOUCH_S:
                break
            del touched[oldest]
        touched.pop(session, None)
        touched[session] = now  # newest last
        return (("ZADD", self._core.keys.sessions, time.time(), session),)

    async def tail(
        self, session: str, *, after: str | None = None, follow: bool = True
    ) -> AsyncIterator[LoggedEvent]:
        key = self._core.keys.events(session)
        if not follow:
            async for logged in self._entries(session, key, after, None):
                yield logged
            return
        self._tails[key] = self._tails.get(key, 0) + 1
        try:
            watch = await self._core.watch(key)
            async for logged in self._entries(session, key, after, watch):
                yield logged
        finally:
            self._tails[key] -= 1
            if not self._tails[key]:
                del self._tails[key]
                if not self._core.stopped:
                    await self._core.unwatch(key)

    async def _entries(
        self, session: str, key: str, after: str | None, watch: Watch | None
    ) -> AsyncIterator[LoggedEvent]:
        core = self._core
        cursor = after or "0-0"
        while True:
            mark = watch.generation if watch is not None else 0
            try:
                batch = stream_entries(
                    await core.one("XRANGE", key, f"({cursor}", "+", "COUNT", 500)
                )
            except RedisRefused as exc:
                if not is_bad_stream_id(exc):
                    raise  # out of memory, read-only replica, a key of the wrong type: the bus's
                raise ConfigError(f"bad event cursor {cursor!r} for session {session}") from exc
            for entry_id, fields in batch:
                cursor = entry_id
                try:
                    event = logged_event(fields)
                except InvalidEnvelope as exc:
                    await self._set_aside(key, entry_id, exc)
                    continue
                yield LoggedEvent(entry_id, event)
            if batch:
                continue
            if watch is None:
                return
            await watch.wait(_TAIL_RECHECK_S, since=mark)
            core.check_open()

    async def _set_aside(self, key: str, entry_id: str, error: InvalidEnvelope) -> None:
        """Move a malformed entry out of the log into the dead letters, exactly once.

        The log is read again and again (every tail, ``baton watch``, ``baton sessions``, each
        SSE client, from the start), by many processes at once. The entry is deleted first, and
        only the reader whose XDEL removed it dead-letters it: the others, and every later read,
        no longer meet it. (A reader that dies between the two commands loses the copy of an
        entry nobody could read anyway; the reverse order would report it once per reader.)
        """
        if await self._core.one("XDEL", key, entry_id):
            await set_aside(self._letters, error, source=key, session=None, raw=error.raw or "")
        else:
            log.debug("bad event %s of %s was set aside by another reader", entry_id, key)

    async def sessions(self) -> list[str]:
        key = self._core.keys.sessions
        result = await self._core.one("ZREVRANGE", key, 0, -1)
        names: list[str] = []
        for name in result:
            problem = utf8_problem(name)
            if problem is None:
                names.append(name)
            else:  # written by hand: no session of baton's has it, and it cannot be printed
                await self._set_aside_session(key, name, problem)
        gone = await forget_gone_sessions(self._core, names)  # expired, or cleaned
        return [name for name in names if name not in gone]

    async def _set_aside_session(self, key: str, name: str, problem: str) -> None:
        """Take a session name that is not UTF-8 out of the list, dead-lettered once: only the
        reader whose ZREM removed it reports it (as :meth:`_set_aside` does for log entries),
        so listing the sessions does not warn about it again and again."""
        if await self._core.one("ZREM", key, name):
            error = InvalidEnvelope(f"session name is not UTF-8 ({problem})", printable(name))
            await set_aside(self._letters, error, source=key, session=None, raw=error.raw or "")


async def forget_gone_sessions(core: RedisCore, names: Sequence[str]) -> set[str]:
    """Of ``names`` (in the sessions' index), those whose event log is gone (it expired, or
    ``baton clean`` removed it), taken out of the index: a session is listed only while it has
    a log, and the index does not grow with every session that ever ran."""
    if not names:
        return set()
    keys = core.keys
    exists = await core.call(*(("EXISTS", keys.events(name)) for name in names))
    gone = [name for name, found in zip(names, exists, strict=True) if not int(found)]
    if gone:
        await core.one("ZREM", keys.sessions, *gone)
    return set(gone)


def logged_event(fields: dict[str, str] | None) -> Event:
    """The event of one log entry; ``InvalidEnvelope`` with a one-line reason when malformed."""
    text = (fields or {}).get("event")
    if text is None:
        reason = f"event-log entry has no 'event' field (fields: {sorted(fields or {})[:5]})"
        raise InvalidEnvelope(printable(reason), printable(str(fields)))
    try:
        return parse_event(text)
    except ValueError as exc:
        if utf8_problem(text) is not None:
            raise not_utf8(text, "event") from None
        why = describe_error(exc) if isinstance(exc, ValidationError) else str(exc)
        raise InvalidEnvelope(f"malformed event: {why}", text) from exc
