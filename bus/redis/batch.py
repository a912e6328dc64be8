"""Automatic pipelining over raw connections: commands issued at the same moment by many agents
share one round trip.

A thousand agents each doing send → read → ack would otherwise queue for the two command
connections one request at a time. Every operation is a short list of commands; whoever finds a
connection free runs what is queued as one pipeline, and each operation gets its own replies. While
one batch is on the wire the next fills up, so throughput grows with concurrency instead of being
capped by round trips. The commands are packed and the replies read directly on redis-py's
connections (RESP2, no response callbacks; through :mod:`baton.bus.redis.adapter`, the one module
that touches redis-py below its client API): redis-py's ``Pipeline`` costs about as much again as
the round trip itself here, in task switches and bookkeeping.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import anyio
from anyio.abc import TaskStatus

from baton.bus.redis.adapter import CommandPool, RawConnection

Command = Sequence[str | int | float | bytes]


def pack(commands: Sequence[Command], errors: str = "strict") -> bytes:
    """RESP-encode commands (arrays of bulk strings). redis-py's packer re-encodes every argument
    through its encoder on each call; this is the protocol itself, with pre-encoded ``bytes``
    (e.g. a Lua script) passed through untouched.

    ``errors="surrogateescape"`` writes text read from Redis that was not UTF-8 back as the bytes
    it was read from (replies are decoded that way, see :mod:`baton.bus.redis.adapter`).
    """
    strict = errors == "strict"
    out: list[bytes] = []
    append = out.append
    for command in commands:
        append(b"*%d\r\n" % len(command))
        for arg in command:
            if isinstance(arg, str):
                data = arg.encode() if strict else arg.encode("utf-8", errors)
            elif isinstance(arg, bytes):
                data = arg
            elif isinstance(arg, int):
                data = b"%d" % arg
            else:
                data = repr(float(arg)).encode()
            append(b"$%d\r\n" % len(data))
            append(data)
            append(b"\r\n")
    return b"".join(out)


class _Op:
    __slots__ = ("commands", "done", "error", "replies")

    def __init__(self, commands: Sequence[Command]) -> None:
        self.commands = commands
        self.done = anyio.Event()
        self.replies: list[Any] = []
        self.error: BaseException | None = None


def _pack_each(batch: list[_Op]) -> tuple[list[_Op], bytes]:
    """Pack a batch op by op after packing it whole failed: an op whose arguments cannot be
    encoded gets its own error, the others go ahead. Text that was read from Redis and was not
    UTF-8 (lone surrogates) goes back as its original bytes."""
    ready: list[_Op] = []
    parts: list[bytes] = []
    for op in batch:
        try:
            parts.append(pack(op.commands, errors="surrogateescape"))
        except (TypeError, ValueError) as exc:  # UnicodeEncodeError is a ValueError
            op.error = exc
            op.done.set()
            continue
        ready.append(op)
    return ready, b"".join(parts)


class CommandBatcher:
    """Runs queued operations in pipelines, at most ``connections`` batches in flight."""

    def __init__(
        self,
        pool: CommandPool,
        *,
        connections: int = 2,
        max_batch: int = 1000,
        round_trip_timeout: float = 5.0,
    ) -> None:
        self._pool = pool
        self._round_trip_timeout = round_trip_timeout
        self._connections = connections
        self._max_batch = max_batch
        self._queue: list[_Op] = []
        self._ready = anyio.Event()
        self._in_flight = 0
        self._idle: list[RawConnection] = []  # held for good; never more than `connections`

    async def call(self, *commands: Command) -> list[Any]:
        """Run the commands (in one round trip with whatever else is queued) and return their raw
        replies in order.

        Raises what the connection raised (faults), or the first error reply among its own
        commands as a ``RedisRefused`` (typed by its code). If the caller is cancelled while
        queued, its commands may still run; a caller that reads must treat that like a lost reply.
        """
        op = await self._run(commands)
        if op.error is not None:
            raise op.error
        return op.replies

    async def everywhere(self, *commands: Command) -> None:
        """Run commands that every node must see (one node here: the same as :meth:`call`)."""
        await self.call(*commands)

    async def call_replies(self, *commands: Command) -> list[Any]:
        """Like :meth:`call`, but an error reply is returned in its place (a ``RedisRefused``)
        instead of raised: a cluster router must see each command's own answer (``MOVED``,
        ``ASK``) to send it on. A fault (and an argument that cannot be packed) still raises."""
        op = await self._run(commands)
        if op.error is not None and not op.replies:
            raise op.error
        return op.replies

    async def _run(self, commands: Sequence[Command]) -> _Op:
        op = _Op(commands)
        if not self._queue and self._in_flight < self._connections:
            # Nothing waiting and a connection free: run it right here, sparing two task
            # switches. Shielded so a cancelled caller cannot tear a pipeline half-read (it
            # waits at most one round trip, bounded by the socket timeout).
            await self._flush([op], shield=True)
            await anyio.lowlevel.checkpoint_if_cancelled()
        else:
            self._queue.append(op)
            self._ready.set()
            await op.done.wait()
        return op

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Flush the backlog that builds up while every connection is busy, until cancelled."""
        async with anyio.create_task_group() as tg:
            for _ in range(self._connections):
                tg.start_soon(self._flush_forever)
            task_status.started()

    async def _flush_forever(self) -> None:
        while True:
            if not self._queue or self._in_flight >= self._connections:
                self._ready = anyio.Event()
                await self._ready.wait()
                continue
            batch = self._queue[: self._max_batch]
            del self._queue[: self._max_batch]
            await self._flush(batch)

    async def _flush(self, batch: list[_Op], *, shield: bool = False) -> None:
        self._in_flight += 1
        try:
            await self._round_trip(batch, shield)
        except Exception as exc:
            for op in batch:
                if not op.done.is_set():
                    op.error = exc
                    op.done.set()
        except BaseException:
            for op in batch:  # cancelled with the bus: release the waiters, then re-raise
                if not op.done.is_set():
                    op.error = anyio.ClosedResourceError()
                    op.done.set()
            raise
        finally:
            self._in_flight -= 1
            if self._queue:
                self._ready.set()

    async def _round_trip(self, batch: list[_Op], shield: bool) -> None:
        try:
            packed = pack([command for op in batch for command in op.commands])
        except (TypeError, ValueError):  # an argument that cannot be sent: that op fails alone
            batch, packed = _pack_each(batch)
            if not batch:
                return
        # Connections are taken from the pool once and kept: the pool's per-checkout health
        # check costs a syscall per round trip, and we never leave unread replies behind (a
        # fault disconnects, and redis-py reconnects on the next send).
        connection = self._idle.pop() if self._idle else await self._pool.connect()
        try:
            # One deadline for the whole batch instead of one timer per reply; a timeout is a
            # fault like any other (TimeoutError is an OSError).
            with anyio.fail_after(self._round_trip_timeout, shield=shield):
                await connection.send(packed)
                for op in batch:
                    op.replies, op.error = await connection.read_replies(len(op.commands))
                    op.done.set()
        except TimeoutError as exc:
            await connection.drop()
            raise TimeoutError(f"no reply within {self._round_trip_timeout} s") from exc
        except BaseException:
            await connection.drop()  # a half-read connection is useless
            raise
        finally:
            self._idle.append(connection)

    async def aclose(self) -> None:
        """Give the held connections back to the pool (which the owner then closes)."""
        idle, self._idle = self._idle, []
        for connection in idle:
            await self._pool.release(connection)

    def fail_all(self, error: BaseException) -> None:
        """Wake every queued caller with ``error`` (the bus is closing)."""
        queue, self._queue = self._queue, []
        for op in queue:
            op.error = error
            op.done.set()
