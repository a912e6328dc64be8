"""The Redis backend (``redis://``, ``rediss://``, ``unix://``), laid out as in DESIGN §2.

Connection economy: two command connections plus one pub/sub connection, however many agents the
process hosts. Commands issued at the same moment share a pipeline round trip
(:mod:`baton.bus.redis_batch`). Nothing blocks on the server (no ``BLOCK`` reads): waiting is
done on pub/sub wake-ups, so no read can outlive the socket timeout and a slow agent never holds a
command connection.

Faults: redis-py's own retries are off; each operation is retried here with backoff (tenacity),
and every fault bumps an *epoch*. An inbox whose reader last looked at its own pending entries in
an older epoch looks again (``XREADGROUP ... 0``), because a reply lost to a fault leaves entries
delivered to us that ``>`` will never return. Retried writes can duplicate an entry; readers drop
duplicates by envelope id. No pickle anywhere: every value is JSON text.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any

import anyio
from anyio.abc import TaskGroup, TaskStatus
from redis.asyncio import ConnectionPool, Redis
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.retry import Retry
from tenacity import (
    AsyncRetrying,
    retry_if_exception_type,
    stop_after_attempt,
    wait_exponential_jitter,
)

from baton.bus.base import Bus, BusOptions, InboxLedger, LoggedEvent, SpawnClaim
from baton.bus.errors import BusClosed, BusError, BusUnreachable, ConfigError, InvalidEnvelope
from baton.bus.events import Event, dump_event, parse_event
from baton.bus.keys import INBOX_GROUP, SPAWN_GROUP, Keys
from baton.bus.messages import (
    DeadLetter,
    Envelope,
    SpawnRequest,
    encode_envelope,
    parse_spawn_request,
)
from baton.bus.redis_batch import Command, CommandBatcher
from baton.bus.redis_wake import WakeDispatcher
from baton.bus.wake import RELEASED, WakeHub, Watch

_FAULTS = (RedisConnectionError, RedisTimeoutError, OSError)
_DEAD_CAP = 10_000
_RELEASED_IDLE_MS = 10 * 365 * 24 * 3600 * 1000  # "idle for years": any claimant takes it now

# XADD one field and PUBLISH a wake-up in one step: the entry is in the stream with its wake-up
# sent, or not there at all. ARGV[5] (optional) caps the stream with MAXLEN ~.
_APPEND_AND_WAKE_LUA = b"""
local id
if ARGV[5] ~= '' then
  id = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[5], '*', ARGV[1], ARGV[2])
else
  id = redis.call('XADD', KEYS[1], '*', ARGV[1], ARGV[2])
end
redis.call('PUBLISH', ARGV[3], ARGV[4] ~= '' and ARGV[4] or id)
return id
"""

# XACK and XDEL together: an acked entry leaves the stream, an un-acked one never does, so
# inboxes need no MAXLEN trimming that could drop un-acked work.
_ACK_AND_DELETE_LUA = b"""
redis.call('XACK', KEYS[1], ARGV[1], unpack(ARGV, 2))
return redis.call('XDEL', KEYS[1], unpack(ARGV, 2))
"""

# Renew the lease of entries only where we still hold them: XCLAIM alone would take an entry
# back from the worker that took it over after our lease lapsed. Returns the ids still ours.
_RENEW_IF_MINE_LUA = b"""
local held = {}
for i = 3, #ARGV do
  local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[i], ARGV[i], 1)
  if p[1] and p[1][2] == ARGV[2] then
    redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, ARGV[i], 'JUSTID')
    held[#held + 1] = ARGV[i]
  end
end
return held
"""


class _Script:
    """A Lua script called by its SHA1 (EVALSHA): the body crosses the wire only when the server
    lacks it (after a restart), once, through ``SCRIPT LOAD``."""

    def __init__(self, body: bytes) -> None:
        self.body = body
        self.sha = hashlib.sha1(body).hexdigest()

    def call(self, key: str, *args: str | int) -> tuple[str | int, ...]:
        return ("EVALSHA", self.sha, 1, key, *args)


_APPEND_AND_WAKE = _Script(_APPEND_AND_WAKE_LUA)
_ACK_AND_DELETE = _Script(_ACK_AND_DELETE_LUA)
_RENEW_IF_MINE = _Script(_RENEW_IF_MINE_LUA)
_SCRIPTS = (_APPEND_AND_WAKE, _ACK_AND_DELETE, _RENEW_IF_MINE)

Entry = tuple[str, dict[str, str] | None]


def _fields(flat: list[str] | None) -> dict[str, str] | None:
    """``[k1, v1, k2, v2]`` → ``{k1: v1, k2: v2}``; None stays None (an entry deleted meanwhile)."""
    if flat is None:
        return None
    return dict(zip(flat[::2], flat[1::2], strict=True))


def _stream_entries(raw: list[Any] | None) -> list[Entry]:
    """Entries of an XRANGE-shaped reply: ``[[id, [k, v, ...]], ...]``."""
    return [(entry[0], _fields(entry[1])) for entry in raw or ()]


def _read_entries(raw: list[Any] | None) -> list[Entry]:
    """Entries of a one-stream XREADGROUP reply: ``[[key, [[id, [k, v, ...]], ...]]]`` or nil."""
    return _stream_entries(raw[0][1]) if raw else []


class RedisBus(Bus):
    """Inboxes as streams with a consumer group, wake-ups over one shared pub/sub connection."""

    def __init__(
        self,
        url: str,
        options: BusOptions | None = None,
        *,
        prefix: str = "baton",
        command_connections: int = 2,
        attempts: int = 6,
    ) -> None:
        super().__init__(options)
        self.url = url
        self.keys = Keys(prefix)
        self._attempts = attempts
        common: dict[str, Any] = {
            "decode_responses": True,
            "protocol": 2,  # the raw replies parsed below are RESP2-shaped
            "socket_connect_timeout": 2.0,
            "socket_timeout": 5.0,
            "retry": Retry(NoBackoff(), 0),  # we retry, knowing which replies may be lost
            # Named so an operator (and the connection-economy test) can see whose they are.
            "client_name": f"baton:{self.options.consumer}",
        }
        try:
            # Only the batcher's flushers use this pool, one connection each: it can never run
            # dry, so the cheaper non-blocking pool will do.
            # No socket timeout on these: redis-py would wrap every write in a wait_for task.
            # The batcher puts one deadline on each whole round trip instead.
            pool = ConnectionPool.from_url(
                url, max_connections=command_connections, **{**common, "socket_timeout": None}
            )
            pubsub_pool = ConnectionPool.from_url(url, max_connections=1, **common)
        except ValueError as exc:
            raise ConfigError(f"bad Redis URL {url!r}: {exc}") from exc
        self._client = Redis.from_pool(pool)  # from_pool: closing the client closes the pool
        self._pubsub_client = Redis.from_pool(pubsub_pool)
        self._batcher = CommandBatcher(pool, connections=command_connections)
        self._epoch = 0
        self._hub = WakeHub()
        self._dispatcher = WakeDispatcher(
            self._pubsub_client, self._hub, url=url, on_fault=self._fault
        )
        self._groups_ready: set[str] = set()
        self._task_group: TaskGroup | None = None
        self._background_scopes: list[anyio.CancelScope] = []
        self._spawn_epoch = -1
        self._held_spawn: set[str] = set()
        self._spawn_expiry_checked_at = float("-inf")
        self._spawn_releases_seen = 0
        self._tails: dict[str, int] = {}

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        """Connect and start the background tasks. Prefer ``async with``: a bus started by hand
        must be closed with ``aclose()`` from the same task that started it."""
        self._check_open()
        if self._task_group is not None:
            return
        try:
            await self._client.ping()
        except _FAULTS as exc:
            raise BusUnreachable(self.url, str(exc) or type(exc).__name__) from exc
        task_group = anyio.create_task_group()
        await task_group.__aenter__()
        self._task_group = task_group
        await task_group.start(self._background, self._batcher.run)
        await task_group.start(self._background, self._dispatcher.run)

    async def _background(
        self, run: Callable[..., Awaitable[None]], *, task_status: TaskStatus[None]
    ) -> None:
        """Run a background task under its own cancel scope: cancelling the task group's own
        scope would also cancel the body of the owner's ``async with``."""
        with anyio.CancelScope() as scope:
            self._background_scopes.append(scope)
            await run(task_status=task_status)

    async def aclose(self) -> None:
        """Close: refuse new work, release every waiter, stop the background tasks.

        Safe from any task (e.g. one reacting to a signal); the owner's ``async with`` then
        finishes the shutdown where it began.
        """
        if self._closed:
            return
        await super().aclose()
        self._batcher.fail_all(BusClosed(f"the bus {self.url} is closed"))
        self._hub.wake_all()
        for scope in self._background_scopes:
            scope.cancel()
        if not self._in_context:
            await self._finish()

    async def _finish(self) -> None:
        task_group, self._task_group = self._task_group, None
        if task_group is not None:
            await task_group.__aexit__(None, None, None)
        with anyio.CancelScope(shield=True):
            await self._batcher.aclose()
            await self._dispatcher.aclose()
            await self._pubsub_client.aclose()
            await self._client.aclose()

    def _fault(self) -> None:
        self._epoch += 1

    async def _call(self, *commands: Command) -> list[Any]:
        """One operation (its commands share a round trip with whatever else is queued now);
        faults are retried with backoff, then mapped to bus errors."""
        self._check_open()
        if self._task_group is None:
            raise BusError("the Redis bus is not started: use `async with` or `await start()`")
        try:
            try:
                return await self._attempt(commands)
            except _FAULTS:
                self._fault()
            async for attempt in AsyncRetrying(
                retry=retry_if_exception_type(_FAULTS),
                stop=stop_after_attempt(self._attempts),
                wait=wait_exponential_jitter(multiplier=0.05, max=1.0, jitter=0.05),
                before_sleep=lambda _state: self._fault(),
                reraise=True,
            ):
                with attempt:
                    self._check_open()
                    return await self._attempt(commands)
        except _FAULTS as exc:
            self._fault()
            raise BusUnreachable(self.url, str(exc) or type(exc).__name__) from exc
        except ResponseError as exc:
            raise BusError(f"Redis refused the operation: {exc}") from exc
        raise AssertionError("unreachable")  # pragma: no cover

    async def _attempt(self, commands: tuple[Command, ...]) -> list[Any]:
        try:
            return await self._batcher.call(*commands)
        except NoScriptError:  # a restarted server forgot our scripts: teach it, go again
            await self._batcher.call(*(("SCRIPT", "LOAD", script.body) for script in _SCRIPTS))
            return await self._batcher.call(*commands)

    async def _one(self, *command: str | int | float | bytes) -> Any:
        return (await self._call(command))[0]

    async def ping(self) -> None:
        await self._one("PING")

    async def _append(
        self, key: str, field: str, value: str, channel: str, payload: str = "", cap: int = 0
    ) -> str:
        cap_arg = str(cap) if cap else ""
        return str(
            await self._one(*_APPEND_AND_WAKE.call(key, field, value, channel, payload, cap_arg))
        )

    async def _ensure_group(self, key: str, group: str) -> None:
        if key in self._groups_ready:
            return
        try:
            await self._one("XGROUP", "CREATE", key, group, "0", "MKSTREAM")
        except BusError as exc:
            if "BUSYGROUP" not in str(exc):
                raise
        self._groups_ready.add(key)

    async def _watch(self, channel: str) -> Watch:
        watch = self._hub.get(channel)
        if watch is not None and watch.confirmed is not None and watch.confirmed.is_set():
            return watch  # the common case, without another await
        try:
            return await self._dispatcher.watch(channel)
        except BusUnreachable:
            self._check_open()
            raise

    # -- inboxes ---------------------------------------------------------------------------

    async def send(self, envelope: Envelope) -> str:
        raw = encode_envelope(envelope, max_bytes=self.options.max_message_bytes)
        s, r = envelope.session, envelope.recipient
        await self._append(self.keys.inbox(s, r), "msg", raw, self.keys.wake(s, r), envelope.id)
        return envelope.id

    async def send_raw(self, session: str, recipient: str, raw: str | bytes) -> None:
        text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
        keys = self.keys
        await self._append(
            keys.inbox(session, recipient), "msg", text, keys.wake(session, recipient)
        )

    async def read_inbox(
        self, session: str, agent: str, *, count: int = 100, consumer: str | None = None
    ) -> list[Envelope]:
        self._check_open()
        key = self.keys.inbox(session, agent)
        watch = await self._watch(self.keys.wake(session, agent))
        watch.mark_read()
        if key not in self._groups_ready:
            await self._ensure_group(key, INBOX_GROUP)
        ledger = self._ledger(session, agent, consumer)
        if watch.releases != ledger.releases_seen:  # someone handed messages back: look now
            ledger.releases_seen = watch.releases
            ledger.claims_checked_at = float("-inf")
        me = consumer or self.consumer
        try:
            entries: list[Entry] = []
            if ledger.pending_epoch != self._epoch:
                ledger.pending_epoch = self._epoch
                entries.extend(await self._own_pending(key, INBOX_GROUP, me))
            entries.extend(await self._claim_and_read(key, INBOX_GROUP, me, count, ledger))
        except BusError as exc:
            ledger.pending_epoch = -1
            if "NOGROUP" not in str(exc):
                raise
            # The stream was deleted (or a server came back empty): start it again, once.
            self._groups_ready.discard(key)
            await self._ensure_group(key, INBOX_GROUP)
            entries = await self._claim_and_read(key, INBOX_GROUP, me, count, ledger)
        except BaseException:
            ledger.pending_epoch = -1  # the reply may be lost: look at our own pending next time
            raise
        return await self._hand_out(session, agent, key, ledger, entries)

    async def _own_pending(self, key: str, group: str, consumer: str) -> list[Entry]:
        """Entries delivered to us whose reply we may never have seen (``XREADGROUP ... 0``)."""
        found: list[Entry] = []
        after = "0"
        while True:
            batch = _read_entries(
                await self._one(
                    "XREADGROUP", "GROUP", group, consumer, "COUNT", 500, "STREAMS", key, after
                )
            )
            if not batch:
                return found
            found.extend(batch)
            after = batch[-1][0]

    async def _claim_and_read(
        self, key: str, group: str, consumer: str, count: int, ledger: InboxLedger | None = None
    ) -> list[Entry]:
        """Expired leases (XAUTOCLAIM, looped to the cursor's end) and then new entries.

        Expired leases are looked for at most every quarter lease per inbox: a dead consumer's
        entries are picked up a little later, and the hot send → read → ack loop saves a command.
        """
        lease_ms = int(self.options.lease_s * 1000)
        now = time.monotonic()
        check_claims = ledger is None or now - ledger.claims_checked_at >= self.options.lease_s / 4

        read: Command = (
            "XREADGROUP",
            "GROUP",
            group,
            consumer,
            "COUNT",
            count,
            "STREAMS",
            key,
            ">",
        )
        if check_claims:
            claim: Command = ("XAUTOCLAIM", key, group, consumer, lease_ms, "0-0", "COUNT", count)
            replies = await self._call(claim, read)
        else:
            replies = await self._call(read)
        fresh = _read_entries(replies[-1])
        if not check_claims:
            return fresh
        if ledger is not None:
            ledger.claims_checked_at = now
        cursor, claimed, gone = replies[0][0], _stream_entries(replies[0][1]), list(replies[0][2])
        while cursor != "0-0" and len(claimed) < count:
            reply = await self._one(
                "XAUTOCLAIM", key, group, consumer, lease_ms, cursor, "COUNT", count
            )
            cursor = reply[0]
            claimed.extend(_stream_entries(reply[1]))
            gone.extend(reply[2])
        if gone:  # pending but deleted from the stream: nothing left to deliver
            await self._ack_entries(key, group, gone)
        return claimed + fresh

    async def _hand_out(
        self, session: str, agent: str, key: str, ledger: InboxLedger, entries: list[Entry]
    ) -> list[Envelope]:
        usable: list[tuple[str, str]] = []
        drop: list[str] = []
        for entry_id, fields in entries:
            if fields is None:  # delivered, then deleted from the stream: nothing to hand out
                drop.append(entry_id)
            elif "msg" not in fields:
                reason = f"stream entry has no 'msg' field (fields: {sorted(fields)[:5]})"
                await self._dead_letter(
                    InvalidEnvelope(reason), source=key, session=session, raw=str(fields)
                )
                drop.append(entry_id)
            else:
                usable.append((entry_id, fields["msg"]))
        envelopes, rejected = await self._screen(session, agent, ledger, usable, source=key)
        drop.extend(rejected)
        if drop:
            await self._ack_entries(key, INBOX_GROUP, drop)
        return envelopes

    async def _ack_entries(self, key: str, group: str, entry_ids: Sequence[str]) -> None:
        await self._one(*_ACK_AND_DELETE.call(key, group, *entry_ids))

    async def wait(self, session: str, agent: str, timeout: float = 60.0) -> bool:
        watch = await self._watch(self.keys.wake(session, agent))
        woken: bool = await watch.wait(timeout)
        self._check_open()
        return woken

    async def ack(
        self, session: str, agent: str, ids: Sequence[str], *, consumer: str | None = None
    ) -> None:
        receipts = self._ledger(session, agent, consumer).take(ids)
        if receipts:
            await self._ack_entries(self.keys.inbox(session, agent), INBOX_GROUP, receipts)

    async def release_inbox(self, session: str, agent: str, *, consumer: str | None = None) -> None:
        key, me = self.keys.inbox(session, agent), consumer or self.consumer
        while True:
            pending = await self._one("XPENDING", key, INBOX_GROUP, "-", "+", 500, me)
            ids = [row[0] for row in pending or ()]
            if not ids:
                break
            idle = ("IDLE", _RELEASED_IDLE_MS, "JUSTID")
            # Claimed to a consumer name nobody reads with, "idle for years": the next reader's
            # XAUTOCLAIM takes them at once.
            await self._one("XCLAIM", key, INBOX_GROUP, f"{me}:released", 0, *ids, *idle)
        self._forget_ledgers(session, agent)
        await self._one("PUBLISH", self.keys.wake(session, agent), RELEASED)

    async def release(self, session: str, agent: str) -> None:
        self._forget_ledgers(session, agent)
        await self._dispatcher.unwatch(self.keys.wake(session, agent))

    # -- event log -------------------------------------------------------------------------

    async def emit(self, event: Event) -> str:
        key = self.keys.events(event.session)
        cap = str(self.options.event_log_cap)
        append = _APPEND_AND_WAKE.call(key, "event", dump_event(event), key, "", cap)
        touch: Command = ("ZADD", self.keys.sessions, time.time(), event.session)
        return str((await self._call(append, touch))[0])

    async def events(
        self, session: str, *, after: str | None = None, follow: bool = True
    ) -> AsyncIterator[LoggedEvent]:
        key = self.keys.events(session)
        if not follow:
            async for logged in self._tail(session, key, after, None):
                yield logged
            return
        # Tails of one session share its wake-up channel; the last one to end unsubscribes,
        # so a server that watched thousands of sessions does not stay subscribed to them all.
        self._tails[key] = self._tails.get(key, 0) + 1
        try:
            watch = await self._watch(key)
            async for logged in self._tail(session, key, after, watch):
                yield logged
        finally:
            self._tails[key] -= 1
            if not self._tails[key]:
                del self._tails[key]
                if not self._closed:
                    await self._dispatcher.unwatch(key)

    async def _tail(
        self, session: str, key: str, after: str | None, watch: Watch | None
    ) -> AsyncIterator[LoggedEvent]:
        cursor = after or "0-0"
        while True:
            mark = watch.generation if watch is not None else 0
            try:
                batch = _stream_entries(
                    await self._one("XRANGE", key, f"({cursor}", "+", "COUNT", 500)
                )
            except BusError as exc:
                raise ConfigError(f"bad event cursor {cursor!r} for session {session}") from exc
            for entry_id, fields in batch:
                cursor = entry_id
                try:
                    event = parse_event((fields or {}).get("event", ""))
                except ValueError as exc:
                    await self._dead_letter(
                        InvalidEnvelope(f"malformed event: {exc}"),
                        source=key,
                        session=None,
                        raw=str(fields),
                    )
                    continue
                yield LoggedEvent(entry_id, event)
            if batch:
                continue
            if watch is None:
                return
            # The wake-up is a hint; look again every few seconds even without one.
            await watch.wait(5.0, since=mark)
            self._check_open()

    async def sessions(self) -> list[str]:
        result = await self._one("ZREVRANGE", self.keys.sessions, 0, -1)
        return [str(s) for s in result]

    # -- spawn queue -----------------------------------------------------------------------

    async def submit_spawn(self, request: SpawnRequest) -> str:
        key = self.keys.spawn
        return await self._append(key, "req", request.model_dump_json(), key)

    async def claim_spawn(self, *, timeout: float = 0.0) -> SpawnClaim | None:
        key = self.keys.spawn
        watch = await self._watch(key)
        await self._ensure_group(key, SPAWN_GROUP)
        with anyio.move_on_after(timeout):
            while True:
                mark = watch.generation
                if watch.releases != self._spawn_releases_seen:  # someone handed work back
                    self._spawn_releases_seen = watch.releases
                    self._spawn_expiry_checked_at = float("-inf")
                claim = await self._claim_one_spawn(key)
                if claim is not None:
                    return claim
                if timeout <= 0:
                    return None
                # Expired leases free up without a wake-up: look again at least once a lease.
                await watch.wait(min(timeout, self.options.lease_s), since=mark)
                self._check_open()
        return None

    async def _claim_one_spawn(self, key: str) -> SpawnClaim | None:
        """The next valid request; malformed ones met on the way go to the dead letters."""
        while True:
            claim, rejected = await self._claim_spawn_round(key)
            if claim is not None or not rejected:
                return claim

    async def _claim_spawn_round(self, key: str) -> tuple[SpawnClaim | None, bool]:
        rejected = False
        entries: list[Entry] = []
        if self._spawn_epoch != self._epoch:
            self._spawn_epoch = self._epoch
            mine = await self._own_pending(key, SPAWN_GROUP, self.consumer)
            entries = [e for e in mine if e[0] not in self._held_spawn]
        if not entries:
            entries = await self._take_spawn(key)
        for entry_id, fields in entries:
            raw = (fields or {}).get("req")
            try:
                if raw is None:
                    raise InvalidEnvelope("spawn entry has no 'req' field")
                request = parse_spawn_request(raw)
            except InvalidEnvelope as exc:
                await self._dead_letter(exc, source=key, session=None, raw=raw or str(fields))
                await self._ack_entries(key, SPAWN_GROUP, [entry_id])
                rejected = True
                continue
            self._held_spawn.add(entry_id)
            return SpawnClaim(entry_id, request), rejected
        return None, rejected

    async def _take_spawn(self, key: str) -> list[Entry]:
        """One request whose claimant's lease expired, else one nobody has claimed yet.

        The spawn queue's pending list holds a claim for every agent running anywhere, so a
        cursor walk of it per claim (XAUTOCLAIM) would make starting n agents cost n². Instead
        Redis finds an expired one itself (XPENDING ... IDLE), at most every quarter lease
        while none turns up, and XCLAIM with the same minimum idle time takes it only if it is
        still expired.
        """
        lease_ms = int(self.options.lease_s * 1000)
        now = time.monotonic()
        while now - self._spawn_expiry_checked_at >= self.options.lease_s / 4:
            idle = await self._one("XPENDING", key, SPAWN_GROUP, "IDLE", lease_ms, "-", "+", 1)
            if not idle:
                self._spawn_expiry_checked_at = now
                break
            reply = await self._one("XCLAIM", key, SPAWN_GROUP, self.consumer, lease_ms, idle[0][0])
            taken = [e for e in _stream_entries(reply) if e[1] is not None]
            if taken:
                return taken
        read: Command = ("XREADGROUP", "GROUP", SPAWN_GROUP, self.consumer, "COUNT", 1)
        return _read_entries(await self._one(*read, "STREAMS", key, ">"))

    async def renew_spawn(self, receipts: Sequence[str]) -> list[str]:
        if not receipts:
            return []
        command = _RENEW_IF_MINE.call(self.keys.spawn, SPAWN_GROUP, self.consumer, *receipts)
        held = [str(r) for r in await self._one(*command)]
        self._held_spawn.difference_update(set(receipts) - set(held))
        return held

    async def ack_spawn(self, receipts: Sequence[str]) -> None:
        if receipts:
            await self._ack_entries(self.keys.spawn, SPAWN_GROUP, receipts)
            self._held_spawn.difference_update(receipts)

    async def release_spawn(self, receipts: Sequence[str]) -> None:
        if not receipts:
            return
        key = self.keys.spawn
        idle = ("IDLE", _RELEASED_IDLE_MS, "JUSTID")
        await self._call(
            ("XCLAIM", key, SPAWN_GROUP, self.consumer, 0, *receipts, *idle),
            ("PUBLISH", key, RELEASED),
        )
        self._held_spawn.difference_update(receipts)
        self._spawn_expiry_checked_at = float("-inf")

    # -- agent state, dead letters ---------------------------------------------------------

    async def set_agent_state(self, session: str, agent: str, fields: Mapping[str, str]) -> None:
        if fields:
            flat = [item for pair in fields.items() for item in pair]
            await self._one("HSET", self.keys.agent(session, agent), *flat)

    async def get_agent_state(self, session: str, agent: str) -> dict[str, str]:
        return _fields(await self._one("HGETALL", self.keys.agent(session, agent))) or {}

    async def _store_dead_letter(self, letter: DeadLetter) -> None:
        fields = {
            "id": letter.id,
            "reason": letter.reason,
            "source": letter.source,
            "session": letter.session or "",
            "raw": letter.raw,
        }
        flat = [item for pair in fields.items() for item in pair]
        await self._one("XADD", self.keys.dead, "MAXLEN", "~", _DEAD_CAP, "*", *flat)

    async def dead_letters(self, count: int = 100) -> list[DeadLetter]:
        rows = _stream_entries(
            await self._one("XREVRANGE", self.keys.dead, "+", "-", "COUNT", count)
        )
        return [
            DeadLetter(
                id=f.get("id", entry_id),
                reason=f.get("reason", ""),
                source=f.get("source", ""),
                session=f.get("session") or None,
                raw=f.get("raw", ""),
            )
            for entry_id, f in ((i, f or {}) for i, f in reversed(rows))
        ]
