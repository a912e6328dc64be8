"""One pub/sub connection per process, carrying every wake-up its agents wait for.

Pub/sub is at-most-once, so it is only a hint: the streams are the truth. What this module must
get right is the moment a hint could be missed. A channel counts as watched only once Redis has
*confirmed* its SUBSCRIBE (readers wait for that before their first read), and after a reconnect
each channel's watch is woken as soon as its re-subscription is confirmed, so its reader looks at
its stream again. The connection is read with a short timeout (below the socket timeout redis-py 8
sets) by one task that owns it, so redis-py never reconnects behind our back: on any fault we drop
the connection and build a new one ourselves, with backoff, for as long as the bus is open.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable

import anyio
from anyio.abc import TaskStatus
from redis.asyncio import Redis
from redis.asyncio.client import PubSub

from baton.bus.errors import BusUnreachable, redact_url
from baton.bus.redis_adapter import FAULTS, subscribe, unsubscribe
from baton.bus.wake import CONFIRMED, WakeHub, Watch

log = logging.getLogger(__name__)

_READ_TIMEOUT_S = 1.0
_SUBSCRIBE_CHUNK = 500


class WakeDispatcher:
    """Owns the pub/sub connection; routes each message to the :class:`Watch` of its channel."""

    def __init__(
        self,
        client: Redis,
        hub: WakeHub,
        *,
        url: str,
        on_fault: Callable[[], None],
        confirm_timeout_s: float = 30.0,
    ) -> None:
        self._client = client
        self._hub = hub
        self._url = redact_url(url)  # only ever shown (logs, errors): never its password
        self._on_fault = on_fault
        self._confirm_timeout_s = confirm_timeout_s
        self._pubsub: PubSub | None = None
        self._has_channels = anyio.Event()
        self._healthy = True
        self._to_subscribe: list[str] = []

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Read wake-ups until cancelled, reconnecting on faults."""
        task_status.started()
        backoff = 0.05
        while True:
            if not self._hub:
                self._has_channels = anyio.Event()
                await self._has_channels.wait()
            try:
                pubsub = await self._ensure_connected()
                message = await pubsub.get_message(timeout=_READ_TIMEOUT_S)
                backoff = 0.05
            except FAULTS as exc:
                await self._drop(exc)
                await anyio.sleep(backoff * (0.5 + random.random()))
                backoff = min(backoff * 2, 2.0)
                continue
            if message is not None:
                self._dispatch(message)

    def _dispatch(self, message: dict[str, object]) -> None:
        kind = message.get("type")
        channel = message.get("channel")
        if not isinstance(channel, str):
            return
        if kind == "message":
            data = message.get("data")
            self._hub.wake(channel, data if isinstance(data, str) else None)
        elif kind == "subscribe":
            watch = self._hub.get(channel)
            pending = watch.confirmed if watch is not None else None
            if watch is not None and isinstance(pending, anyio.Event) and not pending.is_set():
                watch.confirmed = CONFIRMED
                pending.set()
                # Anything published before the subscription took hold was missed:
                # wake the reader so it looks at the stream itself.
                watch.wake()

    async def _ensure_connected(self) -> PubSub:
        if self._pubsub is not None:
            return self._pubsub
        pubsub = self._client.pubsub()
        channels = self._hub.channels()
        for watch in (self._hub.get(c) for c in channels):
            # Readers may already wait on an unset event: keep it; replace only spent ones.
            if watch is not None and (watch.confirmed is None or watch.confirmed.is_set()):
                watch.confirmed = anyio.Event()
        try:
            for start in range(0, len(channels), _SUBSCRIBE_CHUNK):
                await subscribe(pubsub, *channels[start : start + _SUBSCRIBE_CHUNK])
        except BaseException:
            with anyio.CancelScope(shield=True):
                await pubsub.aclose()  # type: ignore[no-untyped-call]
            raise
        self._pubsub = pubsub
        # A channel watched while we were subscribing above was not in our snapshot.
        missing = [c for c in self._hub.channels() if c not in set(channels)]
        if missing:
            await subscribe(pubsub, *missing)
        if not self._healthy:
            log.info("wake-up connection to %s restored (%d channels)", self._url, len(channels))
        self._healthy = True
        return pubsub

    async def _drop(self, exc: BaseException) -> None:
        if self._healthy:
            log.warning("wake-up connection to %s lost: %s; reconnecting", self._url, exc)
        self._healthy = False
        self._on_fault()
        pubsub, self._pubsub = self._pubsub, None
        if pubsub is not None:
            with anyio.CancelScope(shield=True), anyio.move_on_after(1.0):
                try:
                    await pubsub.aclose()  # type: ignore[no-untyped-call]
                except FAULTS:
                    pass

    async def watch(self, channel: str) -> Watch:
        """Subscribe (once) and wait until Redis confirmed it; raises ``BusUnreachable``."""
        watch = self._hub.get(channel)
        if watch is None:
            watch = self._hub.add(channel)
            watch.confirmed = anyio.Event()
            self._has_channels.set()
            self._to_subscribe.append(channel)
            if len(self._to_subscribe) == 1:
                await self._flush_subscriptions()
        confirmed = watch.confirmed
        if confirmed is not None and not confirmed.is_set():
            with anyio.move_on_after(self._confirm_timeout_s):
                await confirmed.wait()
            if not confirmed.is_set():
                raise BusUnreachable(self._url, f"no confirmation of SUBSCRIBE {channel}")
        return watch

    async def _flush_subscriptions(self) -> None:
        """One SUBSCRIBE for every channel watched in the same moment (10,000 agents starting
        together cost a handful of commands, not 10,000)."""
        await anyio.lowlevel.checkpoint()  # let the other watchers of this moment queue up
        channels, self._to_subscribe = self._to_subscribe, []
        pubsub = self._pubsub
        if pubsub is None:
            return  # the dispatcher subscribes everything in the hub when it connects
        try:
            for start in range(0, len(channels), _SUBSCRIBE_CHUNK):
                await subscribe(pubsub, *channels[start : start + _SUBSCRIBE_CHUNK])
        except FAULTS as exc:
            # The dispatcher notices too, and re-subscribes everything on reconnect.
            log.debug("subscribe of %d channels failed: %s", len(channels), exc)

    async def unwatch(self, channel: str) -> None:
        if self._hub.remove(channel) is None:
            return
        pubsub = self._pubsub
        if pubsub is not None:
            try:
                await unsubscribe(pubsub, channel)
            except FAULTS as exc:
                log.debug("unsubscribe %s failed: %s", channel, exc)

    async def aclose(self) -> None:
        pubsub, self._pubsub = self._pubsub, None
        self._hub.wake_all()
        if pubsub is not None:
            with anyio.CancelScope(shield=True), anyio.move_on_after(1.0):
                try:
                    await pubsub.aclose()  # type: ignore[no-untyped-call]
                except FAULTS:
                    pass
