"""Where the lead's events go: token by token to in-process viewers, coalesced to the bus.

A model streams a token every few milliseconds. Viewers in the same process (the CLI's live view,
an embedding application) want every one at once; the session's event log, which every other
observer tails over the network and which is capped in length, wants far fewer writes. So
:class:`EventRouter` hands each lead ``TextDelta`` to the viewers immediately and buffers it for
the bus, writing the buffer as one ``TextDelta`` every ``flush_s`` (50 ms by default), before any
other event (so the log keeps its order) and when asked (round end, session end).

:class:`EventFanout` is the viewers' side: one bounded memory object stream per subscriber. A
viewer that stops reading slows the session down (back-pressure) rather than losing events; one
that closes its stream is dropped.

Every bus write goes through the one retry policy (:func:`~baton.bus.retry.persist`), so a Redis
blip stalls the lead's events instead of failing the session; once ``give_up()`` says so (the
session is being cancelled) a write that still fails is dropped with a warning (the viewers
already had the event), and the flusher never takes the session's task group down. A write still
failing after ``outage_s`` is dropped too, and reported to ``on_outage`` (the session then fails:
the bus has been gone longer than it rides out).
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Callable
from functools import partial

import anyio
from anyio.abc import TaskStatus
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from baton.bus.base import Bus
from baton.bus.errors import BusError, BusOutage, BusUnreachable
from baton.bus.events import Event, TextDelta
from baton.bus.retry import persist

log = logging.getLogger(__name__)

DEFAULT_FLUSH_S = 0.05
VIEWER_BUFFER = 4096


class EventStream:
    """One viewer's events: ``async for event in stream``; ends after the session's last event.

    Closing it (``with stream:``, ``aclose()``, or just dropping it) unsubscribes the viewer.
    """

    def __init__(self, receive: MemoryObjectReceiveStream[Event]) -> None:
        self._receive = receive

    def __aiter__(self) -> EventStream:
        return self

    async def __anext__(self) -> Event:
        try:
            return await self._receive.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            self.close()
            raise StopAsyncIteration from None

    def close(self) -> None:
        self._receive.close()

    async def aclose(self) -> None:
        self.close()

    def __enter__(self) -> EventStream:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __del__(self) -> None:
        self._receive.close()


class EventFanout:
    """Broadcasts events to every subscriber's stream; ``close()`` ends every stream."""

    def __init__(self, buffer: int = VIEWER_BUFFER) -> None:
        self._buffer = buffer
        self._sends: list[MemoryObjectSendStream[Event]] = []
        self._streams: weakref.WeakSet[EventStream] = weakref.WeakSet()
        self._closed = False

    def subscribe(self) -> EventStream:
        """A new stream of every event published from now on (empty and ended once closed)."""
        send, receive = anyio.create_memory_object_stream[Event](self._buffer)
        if self._closed:
            send.close()
        else:
            self._sends.append(send)
        stream = EventStream(receive)
        self._streams.add(stream)
        return stream

    async def publish(self, event: Event) -> None:
        for send in list(self._sends):
            try:
                await send.send(event)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                self._sends.remove(send)
                send.close()

    def close(self) -> None:
        self._closed = True
        sends, self._sends = self._sends, []
        for send in sends:
            send.close()

    def close_viewers(self) -> None:
        """Close every viewer's stream now (its owner is going away), rather than leaving an
        abandoned one to the garbage collector, whose order of finalisers is not ours to pick."""
        for stream in list(self._streams):
            stream.close()


class EventRouter:
    """The lead's event sink: see the module docstring. Run :meth:`run_flusher` in a task group."""

    def __init__(
        self,
        bus: Bus,
        fanout: EventFanout,
        *,
        flush_s: float = DEFAULT_FLUSH_S,
        give_up: Callable[[], bool] | None = None,
        outage_s: float | None = None,
        on_outage: Callable[[BusOutage], None] | None = None,
    ) -> None:
        self.bus = bus
        self.give_up = give_up
        self.outage_s = outage_s
        self.on_outage = on_outage
        self.fanout = fanout
        self.flush_s = flush_s
        self._lock = anyio.Lock()
        self._pieces: list[str] = []
        self._head: TextDelta | None = None
        self._since = 0.0
        self._pending = anyio.Event()
        self.bus_deltas = 0
        """How many ``TextDelta`` events went to the bus (for tests and benchmarks)."""

    async def __call__(self, event: Event) -> None:
        await self.emit(event)

    async def emit(self, event: Event, *, publish: bool = True) -> str | None:
        """Route one event; returns its bus cursor (None for a buffered text delta)."""
        if isinstance(event, TextDelta):
            if publish:
                await self.fanout.publish(event)
            await self._buffer(event)
            return None
        async with self._lock:
            await self._flush_locked()
            cursor = await self._write(event)
        if publish:
            await self.fanout.publish(event)
        return cursor

    async def _buffer(self, event: TextDelta) -> None:
        async with self._lock:
            if self._head is not None and self._head.agent != event.agent:
                await self._flush_locked()
            if self._head is None:
                self._head, self._since = event, anyio.current_time()
                self._pending.set()
            self._pieces.append(event.text)
            due = anyio.current_time() - self._since >= self.flush_s
            if due:
                await self._flush_locked()

    async def flush(self) -> None:
        """Write the buffered text to the bus now."""
        async with self._lock:
            await self._flush_locked()

    async def _flush_locked(self) -> None:
        head, pieces = self._head, self._pieces
        if head is None:
            return
        self._head, self._pieces = None, []
        self._pending = anyio.Event()
        self.bus_deltas += 1
        await self._write(head.model_copy(update={"text": "".join(pieces)}))

    async def _write(self, event: Event) -> str | None:
        """Log one event, through bus blips; None if dropped because ``give_up()`` said so or
        the bus stayed away past ``outage_s``."""
        try:
            return await persist(
                partial(self.bus.log.emit, event),
                f"log {event.type}",
                give_up=self.give_up,
                outage_s=self.outage_s,
            )
        except BusUnreachable as exc:
            if isinstance(exc, BusOutage) and self.on_outage is not None:
                self.on_outage(exc)
            log.warning(
                "session %s: dropped %s from the event log: %s", event.session, event.type, exc
            )
            return None

    async def run_flusher(
        self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Flush a buffer that has waited ``flush_s``, however quiet the model went meanwhile."""
        task_status.started()
        while True:
            await self._pending.wait()
            await anyio.sleep(self.flush_s)
            try:
                await self.flush()
            except (
                BusError
            ) as exc:  # e.g. the bus closed under it: the text is dropped, not the session
                log.warning("dropped buffered text from the event log: %s", exc)
