"""One pub/sub connection per process, carrying every wake-up its agents wait for.

Pub/sub is at-most-once, so it is only a hint: the streams are the truth. What this module must
get right is the moment a hint could be missed. A channel counts as watched only once Redis has
*confirmed* its SUBSCRIBE (readers wait for that before their first read), and after a reconnect
each channel's watch is woken as soon as its re-subscription is confirmed, so its reader looks at
its stream again. The connection is read with a short timeout (below the socket timeout redis-py 8
sets) by one task that owns it, so redis-py never reconnects behind our back: on any fault we drop
the connection and build a new one ourselves, with backoff, for as long as the bus is open.

Which channels are subscribed is decided by the hub alone (what is watched now), and only the
dispatcher's own tasks talk to Redis about it. ``watch`` and ``unwatch`` note the change and
return without sending anything, so a caller cancelled at any moment (an HTTP client that goes
away, a request answered 404 while its tail was starting) cannot leave a change half made: when
each caller sent its own SUBSCRIBE, one cancelled before it did left its channel queued, and no
later channel of the process was ever subscribed again (issue 22); one cancelled during its
UNSUBSCRIBE left the channel subscribed for good.
"""

from __future__ import annotations

import logging
import random
from collections import deque
from collections.abc import Callable
from typing import Protocol

import anyio
from anyio.abc import TaskStatus
from redis.asyncio import Redis
from redis.asyncio.client import PubSub
from redis.exceptions import ResponseError

from baton.bus.errors import BusUnreachable, redact_url
from baton.bus.redis.adapter import FAULTS, RedisRefused, refusal, subscribe, unsubscribe
from baton.bus.redis.slots import slot_of
from baton.bus.wake import CONFIRMED, WakeHub, Watch

log = logging.getLogger(__name__)

_READ_TIMEOUT_S = 1.0
_SUBSCRIBE_CHUNK = 500
_UNWATCH_WAIT_S = 1.0
"""How long ``unwatch`` waits for its UNSUBSCRIBE to be sent (it is sent regardless)."""


class Shard(Protocol):
    """The channels one node's dispatcher serves on a cluster (its slots' share of the hub),
    and what it reports back (:class:`~baton.bus.redis.shards.ShardedWake`)."""

    def any(self) -> bool: ...

    def channels(self) -> list[str]: ...

    def unsubscribed(self, channel: str) -> None:
        """The node dropped a channel we did not ask to drop: its slot moved elsewhere."""


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
        shard: Shard | None = None,
    ) -> None:
        self._client = client
        self._hub = hub
        self._shard = shard
        self._url = redact_url(url)  # only ever shown (logs, errors): never its password
        self._on_fault = on_fault
        self._confirm_timeout_s = confirm_timeout_s
        self._pubsub: PubSub | None = None
        self._has_channels = anyio.Event()
        self._healthy = True
        self._changes: dict[str, bool] = {}
        """Channel → subscribe (True) or unsubscribe (False), not sent yet; the latest wins."""
        self._changes_noted = anyio.Event()
        self._noted = 0  # changes noted so far
        self._sent = 0  # of which sent (or made moot by a new connection)
        self._sent_event = anyio.Event()
        self._asked: deque[set[str]] = deque()
        """The SUBSCRIBE commands sent on this connection whose replies have not all come, in
        order: Redis answers each with a confirmation per channel or one error reply, and an
        error reply names no channel, so this is how a refusal finds the channels it refuses."""

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Read wake-ups and send subscription changes until cancelled, reconnecting on faults."""
        async with anyio.create_task_group() as group:
            group.start_soon(self._send_changes, name="wake-up subscriptions")
            task_status.started()
            await self._read()

    async def _read(self) -> None:
        backoff = 0.05
        while True:
            if not self._any_channels():
                self._has_channels = anyio.Event()
                await self._has_channels.wait()
            try:
                pubsub = await self._ensure_connected()
                message = await pubsub.get_message(timeout=_READ_TIMEOUT_S)
                backoff = 0.05
            except ResponseError as exc:  # a SUBSCRIBE refused (NOPERM): the connection is fine
                self._refuse(exc)
                continue
            except FAULTS as exc:
                await self._drop(exc)
                await anyio.sleep(backoff * (0.5 + random.random()))
                backoff = min(backoff * 2, 2.0)
                continue
            if message is not None:
                self._dispatch(message)

    def _any_channels(self) -> bool:
        return self._shard.any() if self._shard is not None else bool(self._hub)

    def _channels(self) -> list[str]:
        return self._shard.channels() if self._shard is not None else self._hub.channels()

    def _dispatch(self, message: dict[str, object]) -> None:
        kind = message.get("type")
        channel = message.get("channel")
        if not isinstance(channel, str):
            return
        if kind == "message" or kind == "smessage":
            data = message.get("data")
            self._hub.wake(channel, data if isinstance(data, str) else None)
        elif kind == "sunsubscribe" and self._shard is not None:
            self._shard.unsubscribed(channel)
        elif kind == "subscribe" or kind == "ssubscribe":
            self._answered(channel)
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
        channels = self._channels()
        # Every change noted so far is in the snapshot: a new connection has nothing else to do.
        self._changes = {}
        self._mark_sent(self._noted)
        for watch in (self._hub.get(c) for c in channels):
            # Readers may already wait on an unset event: keep it; replace only spent ones.
            if watch is not None and (watch.confirmed is None or watch.confirmed.is_set()):
                watch.confirmed = anyio.Event()
        self._asked.clear()
        try:
            for start in range(0, len(channels), _SUBSCRIBE_CHUNK):
                await self._subscribe(pubsub, channels[start : start + _SUBSCRIBE_CHUNK])
        except BaseException:
            with anyio.CancelScope(shield=True):
                await pubsub.aclose()  # type: ignore[no-untyped-call, unused-ignore]
            raise
        self._pubsub = pubsub
        # What changed while we subscribed above (a channel watched, or one dropped, since the
        # snapshot) waited for the connection: send it now.
        if self._changes:
            self._changes_noted.set()
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
                    await pubsub.aclose()  # type: ignore[no-untyped-call, unused-ignore]
                except FAULTS:
                    pass

    async def watch(self, channel: str) -> Watch:
        """Subscribe (once) and wait until Redis confirmed it; raises ``BusUnreachable``.

        Cancelling the wait leaves the channel watched (its subscription is on its way); the
        caller's ``unwatch`` ends it as usual."""
        watch = self._hub.get(channel)
        if watch is None:
            watch = self._hub.add(channel)
            watch.confirmed = anyio.Event()
            self._has_channels.set()
            self._note(channel, subscribe=True)
        confirmed = watch.confirmed
        if confirmed is not None and not confirmed.is_set():
            with anyio.move_on_after(self._confirm_timeout_s):
                await confirmed.wait()
            if not confirmed.is_set():
                raise BusUnreachable(self._url, f"no confirmation of SUBSCRIBE {channel}")
        if watch.refused is not None:
            raise watch.refused
        return watch

    async def unwatch(self, *channels: str) -> None:
        """Stop watching the channels, and wait (briefly) until their UNSUBSCRIBE was sent: one
        wait for all of them, since the dispatcher sends every change of a moment in one command.
        It sends them whether or not this waits: cancelling the wait loses nothing."""
        mark = 0
        for channel in channels:
            if self._hub.remove(channel) is not None:
                mark = self._note(channel, subscribe=False)
        if not mark:
            return
        with anyio.move_on_after(_UNWATCH_WAIT_S):
            while self._sent < mark and self._pubsub is not None:
                await self._sent_event.wait()

    def adopt(self, channel: str) -> None:
        """Subscribe a channel already watched (in the hub) that moved here from another
        shard; its watch is confirmed (and its reader woken) once this node confirms."""
        watch = self._hub.get(channel)
        if watch is None:
            return
        if watch.confirmed is None or watch.confirmed.is_set():
            watch.confirmed = anyio.Event()
        self._has_channels.set()
        self._note(channel, subscribe=True)

    def release(self, channel: str) -> None:
        """Unsubscribe a channel that moved to another shard, leaving its watch in the hub."""
        self._note(channel, subscribe=False)

    async def _subscribe(self, pubsub: PubSub, channels: list[str]) -> None:
        for group in self._by_slot(channels):
            self._asked.append(set(group))
            await subscribe(pubsub, *group, sharded=self._shard is not None)

    def _by_slot(self, channels: list[str]) -> list[list[str]]:
        """One command's worth of channels each: all of them on one node, but a shard
        channel command takes the channels of one slot only (``CROSSSLOT`` otherwise)."""
        if self._shard is None:
            return [channels]
        groups: dict[int, list[str]] = {}
        for channel in channels:
            groups.setdefault(slot_of(channel), []).append(channel)
        return list(groups.values())

    def _answered(self, channel: str) -> None:
        """One channel of the oldest SUBSCRIBE still waiting was confirmed."""
        for asked in self._asked:
            if channel in asked:
                asked.discard(channel)
                break
        while self._asked and not self._asked[0]:
            self._asked.popleft()

    def _refuse(self, error: ResponseError) -> None:
        """Redis refused the oldest SUBSCRIBE still waiting (NOPERM: the user may not watch
        those channels). Their watchers get the refusal, naming the channels, instead of
        waiting out the confirmation; the channels are no longer watched, so a reconnect does
        not ask again, and a later watch of one asks anew and gets the same answer."""
        channels = sorted(self._asked.popleft()) if self._asked else []
        typed = refusal(error)
        named = " ".join(channels) or "(a channel)"
        hint = (
            " (the Redis user needs +subscribe and the prefix's channels: docs/securing-redis.md)"
        )
        refused = RedisRefused(typed.code, f"SUBSCRIBE {named}: {typed.reply}" + (
            hint if typed.code == "NOPERM" else ""
        ))  # fmt: skip
        log.error("wake-up subscription refused by %s: %s", self._url, refused)
        for channel in channels:
            watch = self._hub.remove(channel)
            if watch is None:
                continue
            watch.refused = refused
            if isinstance(watch.confirmed, anyio.Event):
                watch.confirmed.set()

    def _note(self, channel: str, *, subscribe: bool) -> int:
        self._changes[channel] = subscribe
        self._changes_noted.set()
        self._noted += 1
        return self._noted

    def _mark_sent(self, upto: int) -> None:
        self._sent = max(self._sent, upto)
        self._sent_event.set()
        self._sent_event = anyio.Event()

    async def _send_changes(self) -> None:
        """Send the noted changes, every change of the same moment in one command each way
        (10,000 agents starting together cost a handful of SUBSCRIBEs, not 10,000). While there
        is no connection they wait: connecting subscribes every watched channel, then sends
        what changed meanwhile."""
        backoff = 0.05
        while True:
            await self._changes_noted.wait()
            await anyio.lowlevel.checkpoint()  # let the other watchers of this moment queue up
            self._changes_noted = anyio.Event()
            pubsub = self._pubsub
            if pubsub is None or not self._changes:
                continue
            changes, self._changes = self._changes, {}
            upto = self._noted
            added = [channel for channel, on in changes.items() if on]
            dropped = [channel for channel, on in changes.items() if not on]
            try:
                sharded = self._shard is not None
                for start in range(0, len(dropped), _SUBSCRIBE_CHUNK):
                    for group in self._by_slot(dropped[start : start + _SUBSCRIBE_CHUNK]):
                        await unsubscribe(pubsub, *group, sharded=sharded)
                for start in range(0, len(added), _SUBSCRIBE_CHUNK):
                    await self._subscribe(pubsub, added[start : start + _SUBSCRIBE_CHUNK])
                backoff = 0.05
                self._mark_sent(upto)
            except FAULTS as exc:
                # The reader notices too and reconnects; the changes are sent again (a second
                # SUBSCRIBE or UNSUBSCRIBE of a channel does no harm), later ones winning.
                log.debug("sending %d subscription changes failed: %s", len(changes), exc)
                self._changes = {**changes, **self._changes}
                await anyio.sleep(backoff * (0.5 + random.random()))
                backoff = min(backoff * 2, 2.0)
                self._changes_noted.set()

    async def aclose(self) -> None:
        pubsub, self._pubsub = self._pubsub, None
        self._hub.wake_all()
        if pubsub is not None:
            with anyio.CancelScope(shield=True), anyio.move_on_after(1.0):
                try:
                    await pubsub.aclose()  # type: ignore[no-untyped-call, unused-ignore]
                except FAULTS:
                    pass
