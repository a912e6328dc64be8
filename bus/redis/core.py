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
the spawn claim script by itself), and the bus reports the loss once, as one line: a group counts
as lost only if this bus had met it before (:mod:`baton.bus.redis.groups`, ``RedisCore.groups``).

The clients themselves, one server's or a cluster's, are :mod:`baton.bus.redis.connections`'.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import AsyncExitStack
from typing import Any

import anyio
from anyio.abc import TaskStatus
from tenacity import (
    AsyncRetrying,
    retry_if_exception_type,
    stop_after_attempt,
    wait_exponential_jitter,
)

from baton.bus.errors import BusClosed, BusError, BusUnreachable, redact_url
from baton.bus.lifecycle import Phase, Service
from baton.bus.options import BusOptions
from baton.bus.redis.adapter import (
    FAULTS,
    CredentialsRefused,
    NoScript,
    RedisRefused,
    tls_refusal,
    unsettled,
)
from baton.bus.redis.batch import Command
from baton.bus.redis.cluster import ClusterRouter
from baton.bus.redis.connections import Connections
from baton.bus.redis.groups import ConsumerGroups
from baton.bus.redis.keys import Keys
from baton.bus.redis.scripts import ACK_AND_DELETE, APPEND_AND_WAKE, SCRIPTS
from baton.bus.redis.slots import Address
from baton.bus.retry import persist
from baton.bus.wake import WakeHub, Watch
from baton.errors import ConfigError

Entry = tuple[str, dict[str, str] | None]

log = logging.getLogger(__name__)


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
        self.epoch = 0
        self.hub = WakeHub()
        self._connections = Connections(
            url,
            self.hub,
            connections=command_connections,
            client_name=f"baton:{options.consumer}",
            on_fault=self._fault,
        )
        self.cluster: ClusterRouter | None = self._connections.cluster
        self._batcher = self._connections.batcher
        self._dispatcher = self._connections.dispatcher
        self.groups = ConsumerGroups(url, self.one)
        """The consumer groups this bus made or met: a lost one is reported once."""
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
        stack.push_async_callback(self._connections.aclose)
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

    # -- consumer groups: self.groups (baton.bus.redis.groups) -------------------------

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

    async def unwatch(self, *channels: str) -> None:
        """Stop watching the channels (many at once as cheaply as one)."""
        await self._dispatcher.unwatch(*channels)
