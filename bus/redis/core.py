"""What every part of the Redis bus shares: its connections, retries, scripts and wake-ups.

Connection economy: two command connections plus one pub/sub connection, however many agents the
process hosts. Commands issued at the same moment share a pipeline round trip
(:mod:`baton.bus.redis.batch`). Nothing blocks on the server (no ``BLOCK`` reads): waiting is
done on pub/sub wake-ups (:mod:`baton.bus.redis.wake`), so no read can outlive the socket timeout
and a slow agent never holds a command connection.

Faults: redis-py's own retries are off; each operation is retried here with backoff (tenacity),
and every fault bumps an *epoch*. A reader that last looked at its own pending entries in an
older epoch looks again (``XREADGROUP ... 0``), because a reply lost to a fault leaves entries
delivered to us that ``>`` will never return. Retried writes can duplicate an entry; readers drop
duplicates by envelope id. No pickle anywhere: every value is JSON text.

Data loss: a Redis that comes back empty (``FLUSHALL``, a restart without persistence) leaves
streams without their consumer groups. Every reader makes its group again (inboxes on ``NOGROUP``,
the spawn claim script by itself), and the core reports the loss once, as one line
(:meth:`RedisCore.report_lost`): a group counts as lost only if this bus had met it before.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import AsyncExitStack
from typing import Any

import anyio
from anyio.abc import TaskStatus
from redis.asyncio import Redis
from tenacity import (
    AsyncRetrying,
    retry_if_exception_type,
    stop_after_attempt,
    wait_exponential_jitter,
)

from baton.base_errors import ConfigError
from baton.bus.errors import BusClosed, BusError, BusUnreachable, redact_url
from baton.bus.lifecycle import Phase, Service
from baton.bus.options import BusOptions
from baton.bus.redis.adapter import (
    FAULTS,
    BusyGroup,
    CommandPool,
    CredentialsRefused,
    NoScript,
    RedisRefused,
    pubsub_client,
    tls_refusal,
    unsettled,
)
from baton.bus.redis.batch import Command, CommandBatcher
from baton.bus.redis.cluster import ClusterRouter, is_cluster_url
from baton.bus.redis.keys import Keys
from baton.bus.redis.scripts import ACK_AND_DELETE, APPEND_AND_WAKE, SCRIPTS
from baton.bus.redis.shards import ShardedWake
from baton.bus.redis.slots import Address
from baton.bus.redis.wake import WakeDispatcher
from baton.bus.retry import persist
from baton.bus.wake import WakeHub, Watch

Entry = tuple[str, dict[str, str] | None]

log = logging.getLogger(__name__)

LOSS_QUIET_S = 60.0
"""After reporting that Redis lost baton's data, further findings within this long are part of
the same loss (each stream is found gone by its own reader) and are not reported again."""


def flat_fields(fields: Mapping[str, str]) -> list[str]:
    """``{k1: v1, k2: v2}`` → ``[k1, v1, k2, v2]``, as ``HSET``, ``XADD`` and the scripts take
    them (the inverse of :func:`entry_fields`)."""
    return [item for pair in fields.items() for item in pair]


def entry_fields(flat: list[str] | None) -> dict[str, str] | None:
    """``[k1, v1, k2, v2]`` → ``{k1: v1, k2: v2}``; None stays None (an entry deleted meanwhile)."""
    if flat is None:
        return None
    return dict(zip(flat[::2], flat[1::2], strict=True))


def stream_entries(raw: list[Any] | None) -> list[Entry]:
    """Entries of an XRANGE-shaped reply: ``[[id, [k, v, ...]], ...]``."""
    return [(entry[0], entry_fields(entry[1])) for entry in raw or ()]


def read_entries(raw: list[Any] | None) -> list[Entry]:
    """Entries of a one-stream XREADGROUP reply: ``[[key, [[id, [k, v, ...]], ...]]]`` or nil."""
    return stream_entries(raw[0][1]) if raw else []


class RedisCore(Service):
    """The connections and background tasks of one Redis bus, and the operations its parts
    (inboxes, event logs, spawn queues, records...) are built from: the one client they share,
    so another Redis topology needs another core, not other parts.

    Opened (entered) by the task that starts the bus; :meth:`stop` may be called from any task
    and only signals: it fails queued commands and waiters and cancels the background tasks, and
    the owner's exit then unwinds the rest.
    """

    def __init__(
        self,
        url: str,
        options: BusOptions,
        *,
        prefix: str,
        command_connections: int,
        attempts: int,
    ) -> None:
        super().__init__()
        self.url = url
        self.options = options
        self.keys = Keys(prefix)
        self._attempts = attempts
        self._fast = False
        """Set by :meth:`fail_fast` until an operation succeeds again."""
        client_name = f"baton:{options.consumer}"
        self.cluster: ClusterRouter | None = None
        self._pool: CommandPool | None = None
        self._batcher: CommandBatcher | ClusterRouter
        self._pubsub_client: Redis | None = None
        self._dispatcher: WakeDispatcher | ShardedWake
        self.epoch = 0
        self.hub = WakeHub()
        if is_cluster_url(url):
            self.cluster = ClusterRouter(
                url, connections=command_connections, client_name=client_name
            )
            self._batcher = self.cluster
            self._dispatcher = ShardedWake(
                self.cluster, self.hub, client_name=client_name, on_fault=self._fault
            )
        else:
            self._pool = CommandPool(url, connections=command_connections, client_name=client_name)
            self._batcher = CommandBatcher(self._pool, connections=command_connections)
            self._pubsub_client = pubsub_client(url, client_name=client_name)
            self._dispatcher = WakeDispatcher(
                self._pubsub_client, self.hub, url=url, on_fault=self._fault
            )
        self._groups_ready: set[str] = set()
        self._loss_reported_at = float("-inf")
        self._background_scopes: list[anyio.CancelScope] = []
        self._stopped = False

    @property
    def consumer(self) -> str:
        return self.options.consumer

    # -- lifecycle -------------------------------------------------------------------------

    async def _open(self, stack: AsyncExitStack) -> None:
        """Connect, then run the batcher's flushers and the wake-up dispatcher until the bus
        closes.

        A server that cannot be reached raises ``BusUnreachable`` (exit 3: try again later); one
        that answers but turns the URL down (a database it does not have, wrong or missing
        credentials, no permission to PING, a TLS certificate the CA file did not issue) raises
        ``ConfigError`` (exit 2: no retry will help)."""
        stack.push_async_callback(self._close_connections)
        try:
            await self._connect()
        except (CredentialsRefused, RedisRefused) as exc:
            reply = exc.reply if isinstance(exc, RedisRefused) else str(exc)
            raise ConfigError(
                f"the Redis server at {redact_url(self.url)} refused the bus URL: {reply} "
                "(check the database number and the credentials in --bus / BATON_BUS)"
            ) from exc
        except FAULTS as exc:
            refused = tls_refusal(exc)
            if refused is not None:
                raise ConfigError(
                    f"the Redis server at {redact_url(self.url)} failed TLS verification: "
                    f"{refused} (check the CA file: redis_ca_file / BATON_REDIS_CA_FILE, and the "
                    "host name in the URL)"
                ) from exc
            raise BusUnreachable(self.url, str(exc) or type(exc).__name__) from exc
        group = await stack.enter_async_context(anyio.create_task_group())
        stack.callback(self._cancel_background)  # unwound first: the group then exits at once
        await group.start(self._background, self._batcher.run)
        await group.start(self._background, self._dispatcher.run)

    async def _connect(self) -> None:
        """The first contact, then a ``PING``.

        Nothing that answers at all — the one server, or any node a cluster URL names — fails
        at once: the URL is wrong or the server is down, and waiting would only hide it. Once
        something has answered (a cluster's map was read; a server replied ``LOADING``), a fault
        is a failover or a restart under way, and the ``PING`` is retried with backoff for up to
        ``options.outage_s``, the slot map read again (from any node) before each try: a session
        started while a master of its cluster fails over waits for the replica to take over."""
        if self.cluster is not None:
            await self.cluster.refresh()  # every node the URL names, until one answers
        else:
            try:
                await self._batcher.call(("PING",))
                return
            except RedisRefused as exc:
                if unsettled(exc) is None:
                    raise
        await persist(self._ping_until_settled, "starting the bus", outage_s=self.options.outage_s)

    async def _ping_until_settled(self) -> list[Any]:
        async def ping() -> list[Any]:
            try:
                return await self._batcher.call(("PING",))
            except RedisRefused as exc:
                if (fault := unsettled(exc)) is not None:
                    raise fault from exc
                raise

        return await self._retried(ping)

    async def _background(
        self, run: Callable[..., Awaitable[None]], *, task_status: TaskStatus[None]
    ) -> None:
        """Run a background task under its own cancel scope: cancelling the task group's own
        scope would also cancel the body of the owner's ``async with``."""
        with anyio.CancelScope() as scope:
            self._background_scopes.append(scope)
            await run(task_status=task_status)

    def _cancel_background(self) -> None:
        for scope in self._background_scopes:
            scope.cancel()

    def stop(self) -> None:
        """Refuse new work, fail every queued command and wake every waiter, and stop the
        background tasks. Safe from any task; idempotent."""
        self._stopped = True
        self._batcher.fail_all(BusClosed(f"the bus {redact_url(self.url)} is closed"))
        self.hub.wake_all()
        self._cancel_background()

    async def _close_connections(self) -> None:
        with anyio.CancelScope(shield=True):
            await self._batcher.aclose()
            await self._dispatcher.aclose()
            if self._pubsub_client is not None:
                await self._pubsub_client.aclose()
            if self._pool is not None:
                await self._pool.aclose()

    @property
    def stopped(self) -> bool:
        return self._stopped

    def check_open(self) -> None:
        if self._stopped:
            raise BusClosed(f"the bus {redact_url(self.url)} is closed; open a new one")

    # -- commands --------------------------------------------------------------------------

    def _fault(self) -> None:
        self.epoch += 1
        if self.cluster is not None:
            self.cluster.fault()

    def fail_fast(self) -> None:
        """Each operation tries once (no backoff) until one succeeds again: the bus's owner has
        judged it gone and is only winding down, so every last write need not ride out 1.7 s of
        retries of its own (issue 23: a session past its outage bound took 9 s to end)."""
        self._fast = True

    async def call(self, *commands: Command) -> list[Any]:
        """One operation (its commands share a round trip with whatever else is queued now);
        faults are retried with backoff, then raised as ``BusUnreachable``; an error reply is
        raised as its typed ``RedisRefused``."""
        self.check_open()
        if self.phase is Phase.NEW:
            raise BusError("the Redis bus is not started: use `async with` or `await start()`")
        try:  # the first try inline, without tenacity: it is the hot path
            replies = await self._attempt(commands)
        except FAULTS as exc:
            self._fault()
            if self._fast:
                raise BusUnreachable(self.url, str(exc) or type(exc).__name__) from exc
        else:
            self._fast = False
            return replies
        return await self._retried(lambda: self._attempt(commands))

    async def _retried(self, run: Callable[[], Awaitable[list[Any]]]) -> list[Any]:
        """``run`` with backoff after each fault; ``BusUnreachable`` once the attempts are
        spent."""
        try:
            async for attempt in AsyncRetrying(
                retry=retry_if_exception_type(FAULTS),
                stop=stop_after_attempt(1 if self._fast else self._attempts),
                wait=wait_exponential_jitter(multiplier=0.05, max=1.0, jitter=0.05),
                before_sleep=lambda _state: self._fault(),
                reraise=True,
            ):
                with attempt:
                    self.check_open()
                    replies = await run()
                    self._fast = False
                    return replies
        except FAULTS as exc:
            self._fault()
            raise BusUnreachable(self.url, str(exc) or type(exc).__name__) from exc
        raise AssertionError("unreachable")  # pragma: no cover

    async def _attempt(self, commands: tuple[Command, ...]) -> list[Any]:
        try:
            return await self._batcher.call(*commands)
        except NoScript:  # a restarted server forgot our scripts: teach it (each node), go again
            await self._batcher.everywhere(*(script.load() for script in SCRIPTS))
            return await self._batcher.call(*commands)

    async def scan(self, pattern: str, count: int) -> AsyncIterator[list[str]]:
        """The keys matching ``pattern``, a batch per ``SCAN`` step; on a cluster, each
        master's keys in turn (every master holds its own slots' keys)."""
        nodes: list[Address | None] = [None]  # one node: wherever the call goes
        if self.cluster is not None:
            nodes = list(self.cluster.masters())
        for node in nodes:
            cursor = "0"
            while True:
                command = ("SCAN", cursor, "MATCH", pattern, "COUNT", count)
                step = self.call(command) if node is None else self._on(node, command)
                cursor, batch = (await step)[0]
                yield [str(key) for key in batch]
                if str(cursor) == "0":
                    break

    async def _on(self, node: Address, command: Command) -> list[Any]:
        """One command on one cluster node, retried like any other."""
        cluster = self.cluster
        assert cluster is not None
        self.check_open()
        return await self._retried(lambda: cluster.at(node, command))

    async def one(self, *command: str | int | float | bytes) -> Any:
        """One command's reply."""
        return (await self.call(command))[0]

    async def append(
        self,
        key: str,
        field: str,
        value: str,
        channel: str,
        payload: str = "",
        cap: int = 0,
        *,
        more: Sequence[str] = (),
    ) -> str:
        """XADD one field (and the field/value pairs of ``more``, e.g. a signature) and PUBLISH a
        wake-up (``payload``, else the entry id), atomically; ``cap`` trims the stream with
        ``MAXLEN ~``. Returns the entry id."""
        cap_arg = str(cap) if cap else ""
        script = APPEND_AND_WAKE.call(key, field, value, channel, payload, cap_arg, *more)
        return str(await self.one(*script))

    async def ack(self, key: str, group: str, entry_ids: Sequence[str]) -> None:
        """XACK and XDEL in one script: a done entry leaves the stream."""
        await self.one(*ACK_AND_DELETE.call(key, group, *entry_ids))

    # -- consumer groups -------------------------------------------------------------------

    def group_ready(self, key: str) -> bool:
        return key in self._groups_ready

    async def ensure_group(self, key: str, group: str) -> None:
        """Create the stream's consumer group unless this bus made or met it already."""
        if key in self._groups_ready:
            return
        try:
            await self.one("XGROUP", "CREATE", key, group, "0", "MKSTREAM")
        except BusyGroup:
            pass
        self._groups_ready.add(key)

    def forget_group(self, key: str) -> None:
        """The group is gone (NOGROUP): the next ``ensure_group`` creates it again. If this bus
        had met it before, Redis lost it: reported (:meth:`report_lost`)."""
        if key in self._groups_ready:
            self._groups_ready.discard(key)
            self.report_lost([key])

    def groups_deleted(self, keys: Sequence[str]) -> None:
        """Streams deleted on purpose: forgotten, and not reported as lost if made again."""
        self._groups_ready.difference_update(keys)

    def groups_made(self, looked: Sequence[str], created: Sequence[str]) -> None:
        """A script made sure ``looked`` have their groups, creating those of ``created``:
        the created ones this bus had met before were lost, and are reported."""
        lost = [key for key in created if key in self._groups_ready]
        self._groups_ready.update(looked)
        if lost:
            self.report_lost(lost)

    def report_lost(self, keys: Sequence[str]) -> None:
        """Redis no longer has streams and groups this bus used (a ``FLUSHALL``, or a restart
        without persistence); they were made again. One WARNING line per episode — the first
        finding — and DEBUG for more within ``LOSS_QUIET_S``: every reader finds the loss on its
        own, and a thousand agents must not log a thousand lines (nor any a traceback)."""
        now = time.monotonic()
        shown = ", ".join(keys[:3]) + (f" and {len(keys) - 3} more" if len(keys) > 3 else "")
        if now - self._loss_reported_at < LOSS_QUIET_S:
            log.debug("Redis lost %s as well; made again", shown)
            return
        self._loss_reported_at = now
        log.warning(
            "Redis at %s came back without baton's data (FLUSHALL, or a restart without "
            "persistence): made %s again; whatever was queued there before is gone",
            redact_url(self.url),
            shown,
        )

    async def own_pending(self, key: str, group: str, consumer: str) -> list[Entry]:
        """Entries delivered to us whose reply we may never have seen (``XREADGROUP ... 0``)."""
        found: list[Entry] = []
        after = "0"
        while True:
            batch = read_entries(
                await self.one(
                    "XREADGROUP", "GROUP", group, consumer, "COUNT", 500, "STREAMS", key, after
                )
            )
            if not batch:
                return found
            found.extend(batch)
            after = batch[-1][0]

    # -- wake-ups --------------------------------------------------------------------------

    async def watch(self, channel: str) -> Watch:
        """The channel's watch, once Redis confirmed the subscription."""
        watch = self.hub.get(channel)
        if watch is not None and watch.confirmed is not None and watch.confirmed.is_set():
            return watch  # the common case, without another await
        try:
            return await self._dispatcher.watch(channel)
        except BusUnreachable:
            self.check_open()
            raise

    async def probe(self, timeout_s: float) -> None:
        """One wake-up round trip on a fresh channel (SUBSCRIBE, PUBLISH, the message back
        through the dispatcher), within ``timeout_s``; ``BusUnreachable`` saying which step
        did not finish. Exercises what every waiting agent relies on, for three commands."""
        channel = self.keys.probe(uuid.uuid4().hex)
        step = "the subscription was not confirmed"
        try:
            with anyio.move_on_after(timeout_s):
                watch = await self.watch(channel)
                mark = watch.generation
                step = "the wake-up was not published"
                await self.one("PUBLISH", channel, "probe")
                step = "the wake-up did not come back"
                await watch.wait(timeout_s, since=mark)
                if watch.generation != mark:
                    return
        finally:
            await self.unwatch(channel)
        self.check_open()
        raise BusUnreachable(self.url, f"no wake-up round trip within {timeout_s:g} s: {step}")

    async def unwatch(self, *channels: str) -> None:
        """Stop watching the channels (many at once as cheaply as one)."""
        await self._dispatcher.unwatch(*channels)
