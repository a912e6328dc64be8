"""The Redis backend (``redis://``, ``rediss://``, ``unix://``), laid out as in DESIGN §2.

Connection economy: one blocking pool of two command connections plus one pub/sub connection,
however many agents the process hosts. Nothing here blocks on the server (no ``BLOCK`` reads):
waiting is done on pub/sub wake-ups, so no read can outlive the socket timeout and a slow agent
never holds a command connection.

Faults: redis-py's own retries are off; each operation is retried here with backoff (tenacity),
and every fault bumps an *epoch*. An inbox whose reader last looked at its own pending entries in
an older epoch looks again (``XREADGROUP ... 0``), because a reply lost to a fault leaves entries
delivered to us that ``>`` will never return. Retried writes can duplicate an entry; readers drop
duplicates by envelope id.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from functools import partial
from types import TracebackType
from typing import Any, Self, TypeVar

import anyio
from anyio.abc import TaskGroup
from redis.asyncio import BlockingConnectionPool, ConnectionPool, Redis
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.retry import Retry
from tenacity import (
    AsyncRetrying,
    retry_if_exception_type,
    stop_after_attempt,
    wait_exponential_jitter,
)

from bus.base import Bus, BusOptions, LoggedEvent, SpawnClaim
from bus.errors import BusError, BusUnreachable, ConfigError, InvalidEnvelope
from bus.events import Event, dump_event, parse_event
from bus.keys import INBOX_GROUP, SPAWN_GROUP, Keys
from bus.messages import (
    DeadLetter,
    Envelope,
    SpawnRequest,
    encode_envelope,
    parse_spawn_request,
)
from bus.redis_wake import WakeDispatcher
from bus.wake import WakeHub

T = TypeVar("T")
_FAULTS = (RedisConnectionError, RedisTimeoutError, OSError)
_DEAD_CAP = 10_000
_RELEASED_IDLE_MS = 10 * 365 * 24 * 3600 * 1000  # "idle for years": any claimant takes it now

# XADD one field and PUBLISH a wake-up in one step: the message is in the stream with its
# wake-up sent, or not there at all. ARGV[5] (optional) caps the stream with MAXLEN ~.
_APPEND_AND_WAKE = """
local id
if ARGV[5] ~= '' then
  id = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[5], '*', ARGV[1], ARGV[2])
else
  id = redis.call('XADD', KEYS[1], '*', ARGV[1], ARGV[2])
end
redis.call('PUBLISH', ARGV[3], ARGV[4] ~= '' and ARGV[4] or id)
return id
"""

Entry = tuple[str, dict[str, str] | None]


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
        client: Redis | None = None,
    ) -> None:
        super().__init__(options)
        self.url = url
        self.keys = Keys(prefix)
        self._attempts = attempts
        no_retry = Retry(NoBackoff(), 0)
        common: dict[str, Any] = {
            "decode_responses": True,
            "socket_connect_timeout": 2.0,
            "socket_timeout": 5.0,
            "retry": no_retry,
            # Named so an operator (and the connection-economy test) can see whose they are.
            "client_name": f"baton:{self.options.consumer}",
        }
        self._owns_client = client is None
        try:
            if client is None:
                pool = BlockingConnectionPool.from_url(
                    url, max_connections=command_connections, timeout=30, **common
                )
                client = Redis.from_pool(pool)  # from_pool: closing the client closes the pool
            pubsub_pool = ConnectionPool.from_url(url, max_connections=1, **common)
        except ValueError as exc:
            raise ConfigError(f"bad Redis URL {url!r}: {exc}") from exc
        self._client = client
        # redis-py's reply types are unions over bytes/str; with decode_responses=True they are
        # str. Commands go through this untyped alias and replies are typed where they land.
        self._r: Any = client
        self._pubsub_client = Redis.from_pool(pubsub_pool)
        self._append_script = client.register_script(_APPEND_AND_WAKE)
        self._hub = WakeHub()
        self._epoch = 0
        self._dispatcher = WakeDispatcher(
            self._pubsub_client, self._hub, url=url, on_fault=self._fault
        )
        self._groups_ready: set[str] = set()
        self._task_group: TaskGroup | None = None
        self._spawn_epoch = -1
        self._held_spawn: set[str] = set()

    # -- lifecycle -------------------------------------------------------------------------

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def start(self) -> None:
        self._check_open()
        if self._task_group is not None:
            return
        await self.ping()
        task_group = anyio.create_task_group()
        await task_group.__aenter__()
        self._task_group = task_group
        await task_group.start(self._dispatcher.run)

    async def aclose(self) -> None:
        if self._closed:
            return
        await super().aclose()
        task_group, self._task_group = self._task_group, None
        if task_group is not None:
            task_group.cancel_scope.cancel()
            await task_group.__aexit__(None, None, None)
        with anyio.CancelScope(shield=True):
            await self._dispatcher.aclose()
            await self._pubsub_client.aclose()
            if self._owns_client:
                await self._client.aclose()

    def _fault(self) -> None:
        self._epoch += 1

    async def _run(self, operation: Callable[[], Awaitable[T]]) -> T:
        """Run one Redis operation; retry faults with backoff, then map them to bus errors."""
        self._check_open()
        try:
            return await operation()
        except _FAULTS:
            self._fault()
        except ResponseError as exc:
            raise BusError(f"Redis refused the operation: {exc}") from exc
        try:
            async for attempt in AsyncRetrying(
                retry=retry_if_exception_type(_FAULTS),
                stop=stop_after_attempt(self._attempts),
                wait=wait_exponential_jitter(multiplier=0.05, max=1.0, jitter=0.05),
                before_sleep=lambda _state: self._fault(),
                reraise=True,
            ):
                with attempt:
                    self._check_open()
                    return await operation()
        except _FAULTS as exc:
            self._fault()
            raise BusUnreachable(self.url, str(exc) or type(exc).__name__) from exc
        except ResponseError as exc:
            raise BusError(f"Redis refused the operation: {exc}") from exc
        raise AssertionError("unreachable")  # pragma: no cover

    async def ping(self) -> None:
        await self._run(self._client.ping)

    async def _append(
        self, key: str, field: str, value: str, channel: str, payload: str = "", cap: int = 0
    ) -> str:
        args = [field, value, channel, payload, str(cap) if cap else ""]
        result = await self._run(lambda: self._append_script(keys=[key], args=args))
        return str(result)

    async def _ensure_group(self, key: str, group: str) -> None:
        if key in self._groups_ready:
            return
        try:
            await self._run(lambda: self._r.xgroup_create(key, group, id="0", mkstream=True))
        except BusError as exc:
            if "BUSYGROUP" not in str(exc):
                raise
        self._groups_ready.add(key)

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
        watch = await self._run(lambda: self._dispatcher.watch(self.keys.wake(session, agent)))
        watch.mark_read()
        await self._ensure_group(key, INBOX_GROUP)
        ledger = self._ledger(session, agent, consumer)
        me = consumer or self.consumer
        entries: list[Entry] = []
        if ledger.pending_epoch != self._epoch:
            ledger.pending_epoch = self._epoch
            entries.extend(await self._own_pending(key, INBOX_GROUP, me))
        entries.extend(await self._claim_and_read(key, INBOX_GROUP, me, count))
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
            await self._ack_entries(key, drop)
        return envelopes

    async def _own_pending(self, key: str, group: str, consumer: str) -> list[Entry]:
        """Entries delivered to us whose reply we may never have seen (``XREADGROUP ... 0``)."""
        found: list[Entry] = []
        after = "0"
        while True:
            reply = await self._run(
                partial(self._r.xreadgroup, group, consumer, {key: after}, count=500)
            )
            batch: list[Entry] = reply[0][1] if reply else []
            if not batch:
                return found
            found.extend(batch)
            after = batch[-1][0]

    async def _claim_and_read(self, key: str, group: str, consumer: str, count: int) -> list[Entry]:
        """Expired leases (XAUTOCLAIM, looped to the cursor's end) and then new entries."""
        lease_ms = int(self.options.lease_s * 1000)

        async def first_round() -> list[Any]:
            async with self._r.pipeline(transaction=False) as pipe:
                pipe.xautoclaim(key, group, consumer, lease_ms, "0-0", count=count)
                pipe.xreadgroup(group, consumer, {key: ">"}, count=count)
                return list(await pipe.execute())

        claimed_reply, read_reply = await self._run(first_round)
        cursor, claimed, deleted = claimed_reply[0], list(claimed_reply[1]), claimed_reply[2]
        gone = list(deleted)
        while cursor != "0-0" and len(claimed) < count:
            reply = await self._run(
                partial(self._r.xautoclaim, key, group, consumer, lease_ms, cursor, count=count)
            )
            cursor = reply[0]
            claimed.extend(reply[1])
            gone.extend(reply[2])
        if gone:
            await self._run(lambda: self._r.xack(key, group, *gone))
        fresh: list[Entry] = read_reply[0][1] if read_reply else []
        return claimed + fresh

    async def _ack_entries(self, key: str, entry_ids: Sequence[str]) -> None:
        """XACK and XDEL together: an acked entry leaves the stream, an un-acked one never does."""

        async def ack_and_delete() -> None:
            async with self._r.pipeline(transaction=True) as pipe:
                pipe.xack(key, INBOX_GROUP, *entry_ids)
                pipe.xdel(key, *entry_ids)
                await pipe.execute()

        await self._run(ack_and_delete)

    async def wait(self, session: str, agent: str, timeout: float = 60.0) -> bool:
        watch = await self._run(lambda: self._dispatcher.watch(self.keys.wake(session, agent)))
        woken = await watch.wait(timeout)
        self._check_open()
        return woken

    async def ack(
        self, session: str, agent: str, ids: Sequence[str], *, consumer: str | None = None
    ) -> None:
        receipts = self._ledger(session, agent, consumer).take(ids)
        if receipts:
            await self._ack_entries(self.keys.inbox(session, agent), receipts)

    async def release(self, session: str, agent: str) -> None:
        self._forget_ledgers(session, agent)
        await self._dispatcher.unwatch(self.keys.wake(session, agent))

    # -- event log -------------------------------------------------------------------------

    async def emit(self, event: Event) -> str:
        key = self.keys.events(event.session)
        cursor = await self._append(
            key, "event", dump_event(event), key, cap=self.options.event_log_cap
        )
        await self._run(lambda: self._r.zadd(self.keys.sessions, {event.session: time.time()}))
        return cursor

    async def events(
        self, session: str, *, after: str | None = None, follow: bool = True
    ) -> AsyncIterator[LoggedEvent]:
        key = self.keys.events(session)
        watch = await self._run(lambda: self._dispatcher.watch(key)) if follow else None
        cursor = after or "0-0"
        while True:
            mark = watch.generation if watch is not None else 0
            try:
                batch = await self._run(
                    partial(self._r.xrange, key, min=f"({cursor}", max="+", count=500)
                )
            except BusError as exc:
                raise ConfigError(f"bad event cursor {cursor!r} for session {session}") from exc
            for entry_id, fields in batch:
                cursor = entry_id
                try:
                    event = parse_event(fields.get("event", ""))
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
        result = await self._run(lambda: self._r.zrevrange(self.keys.sessions, 0, -1))
        return [str(s) for s in result]

    # -- spawn queue -----------------------------------------------------------------------

    async def submit_spawn(self, request: SpawnRequest) -> str:
        key = self.keys.spawn
        return await self._append(key, "req", request.model_dump_json(), key)

    async def claim_spawn(self, *, timeout: float = 0.0) -> SpawnClaim | None:
        key = self.keys.spawn
        watch = await self._run(lambda: self._dispatcher.watch(key))
        await self._ensure_group(key, SPAWN_GROUP)
        with anyio.move_on_after(timeout):
            while True:
                mark = watch.generation
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
        entries: list[Entry] = []
        if self._spawn_epoch != self._epoch:
            self._spawn_epoch = self._epoch
            mine = await self._own_pending(key, SPAWN_GROUP, self.consumer)
            entries = [e for e in mine if e[0] not in self._held_spawn]
        if not entries:
            entries = await self._claim_and_read(key, SPAWN_GROUP, self.consumer, 1)
        for entry_id, fields in entries:
            raw = (fields or {}).get("req")
            try:
                if raw is None:
                    raise InvalidEnvelope("spawn entry has no 'req' field")
                request = parse_spawn_request(raw)
            except InvalidEnvelope as exc:
                await self._dead_letter(exc, source=key, session=None, raw=raw or str(fields))
                await self.ack_spawn([entry_id])
                continue
            self._held_spawn.add(entry_id)
            return SpawnClaim(entry_id, request)
        return None

    async def renew_spawn(self, receipts: Sequence[str]) -> None:
        if receipts:
            await self._run(
                lambda: self._r.xclaim(
                    self.keys.spawn, SPAWN_GROUP, self.consumer, 0, list(receipts), justid=True
                )
            )

    async def ack_spawn(self, receipts: Sequence[str]) -> None:
        if not receipts:
            return
        key = self.keys.spawn

        async def ack_and_delete() -> None:
            async with self._r.pipeline(transaction=True) as pipe:
                pipe.xack(key, SPAWN_GROUP, *receipts)
                pipe.xdel(key, *receipts)
                await pipe.execute()

        await self._run(ack_and_delete)
        self._held_spawn.difference_update(receipts)

    async def release_spawn(self, receipts: Sequence[str]) -> None:
        if not receipts:
            return
        key = self.keys.spawn

        async def release() -> None:
            async with self._r.pipeline(transaction=False) as pipe:
                pipe.xclaim(
                    key,
                    SPAWN_GROUP,
                    self.consumer,
                    0,
                    list(receipts),
                    idle=_RELEASED_IDLE_MS,
                    justid=True,
                )
                pipe.publish(key, "released")
                await pipe.execute()

        await self._run(release)
        self._held_spawn.difference_update(receipts)

    # -- agent state, dead letters ---------------------------------------------------------

    async def set_agent_state(self, session: str, agent: str, fields: Mapping[str, str]) -> None:
        if fields:
            mapping = dict(fields)
            await self._run(lambda: self._r.hset(self.keys.agent(session, agent), mapping=mapping))

    async def get_agent_state(self, session: str, agent: str) -> dict[str, str]:
        result = await self._run(lambda: self._r.hgetall(self.keys.agent(session, agent)))
        return {str(k): str(v) for k, v in result.items()}

    async def _store_dead_letter(self, letter: DeadLetter) -> None:
        fields = {
            "id": letter.id,
            "reason": letter.reason,
            "source": letter.source,
            "session": letter.session or "",
            "raw": letter.raw,
        }
        await self._run(
            lambda: self._r.xadd(self.keys.dead, fields, maxlen=_DEAD_CAP, approximate=True)
        )

    async def dead_letters(self, count: int = 100) -> list[DeadLetter]:
        rows = await self._run(lambda: self._r.xrevrange(self.keys.dead, count=count))
        return [
            DeadLetter(
                id=f.get("id", entry_id),
                reason=f.get("reason", ""),
                source=f.get("source", ""),
                session=f.get("session") or None,
                raw=f.get("raw", ""),
            )
            for entry_id, f in reversed(rows)
        ]
