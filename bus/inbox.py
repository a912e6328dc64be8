"""The one inbox reader: read → dedupe → screen → ack → cancellable wait, through bus faults.

Every agent reads its inbox the same way (the lead between turns, a sub-agent between rounds, an
approval wait inside a round), so the loop is written once, here::

    until the caller's ``stop()`` says so:
        read (retried through bus blips)
            an id already done (a redelivery)            -> acked now, not handed out
            an id handed out and not yet acked           -> skipped (acked with its twin)
            a payload that misfits its type (payloads)   -> dead letter + error event, acked
        ``take(fresh)`` says it has what it waited for   -> "taken"
        past the deadline                                -> "timed_out"
        wait for a wake-up, at most one slice (retried; ``interrupt()`` ends it) and read again

Every bus call goes through :func:`~baton.bus.retry.persist`, so a Redis restart stalls an agent
instead of failing it. ``stop()`` and the deadline are also asked between retries, so an agent
told to stop during an outage does stop (``collect`` then reports ``interrupted``/``timed_out``
rather than raising). Acking is the caller's: an agent acks once what it read is safe (the
sub-agent after its checkpoint, the lead once the messages are in its context).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable, Iterable, Sequence
from functools import partial
from typing import Literal, TypeVar

import anyio

from baton.bus.base import Bus
from baton.bus.errors import BusUnreachable, InvalidEnvelope
from baton.bus.messages import Envelope
from baton.bus.parts.inboxes import DEFAULT_WAIT_S
from baton.bus.payloads import check_payload
from baton.bus.retry import persist

log = logging.getLogger(__name__)

T = TypeVar("T")
Ending = Literal["taken", "timed_out", "interrupted", "parked"]
Take = Callable[[list[Envelope]], Awaitable[bool]]
"""Given each read's fresh envelopes (possibly none); returns True once the caller has enough."""


def _never() -> bool:
    return False


def _giving_up(stop: Callable[[], bool], deadline: float) -> bool:
    """Whether a retrying call of :meth:`InboxReader.collect` should give up instead."""
    return stop() or anyio.current_time() >= deadline


class InboxReader:
    """One agent's inbox as its owner reads it.

    ``done`` holds the ids handled for good (the sub-agent seeds it from its checkpoint): a
    redelivery of one is acked at once and never handed out again. ``pending`` holds the ids
    handed out and not acked yet, in arrival order.
    """

    # A worker hosts thousands of idle agents, each with a reader: no per-instance __dict__.
    __slots__ = ("_retry_scope", "_wait_scope", "agent", "bus", "done", "pending", "session")

    def __init__(self, bus: Bus, session: str, agent: str) -> None:
        self.bus = bus
        self.session = session
        self.agent = agent
        self.done: set[str] = set()
        self.pending: dict[str, None] = {}
        self._wait_scope: anyio.CancelScope | None = None
        self._retry_scope: anyio.CancelScope | None = None

    def remember(self, ids: Iterable[str]) -> None:
        """Count ``ids`` as handled already (restored from a checkpoint)."""
        self.done.update(ids)

    def interrupt(self) -> None:
        """End the wait of :meth:`collect` now, or its read if that is retrying through a bus
        fault (the caller's ``stop()`` then says why)."""
        for scope in (self._wait_scope, self._retry_scope):
            if scope is not None:
                scope.cancel()

    # -- one step at a time ---------------------------------------------------------------------

    async def read(self, *, give_up: Callable[[], bool] | None = None) -> list[Envelope]:
        """What arrived that is new, without blocking; duplicates and misfits are dealt with."""
        return await self._sort(await self._fetch(give_up), give_up)

    async def _fetch(self, give_up: Callable[[], bool] | None) -> list[Envelope]:
        return await self._persist(
            lambda: self.bus.inboxes.read(self.session, self.agent), "read", give_up
        )

    async def _sort(
        self, batch: list[Envelope], give_up: Callable[[], bool] | None
    ) -> list[Envelope]:
        """Ack redeliveries of done ids, skip twins of pending ones, dead-letter misfits.

        The bus counts a batch as handed out once the fetch returned it and never hands it to
        this consumer again, so each fresh envelope is recorded in ``pending`` before the first
        await, and the bookkeeping after it (dead letters, the settling ack) is best-effort once
        ``give_up()`` says so: a failure there never costs the caller what the fetch returned.
        """
        fresh: list[Envelope] = []
        settled: list[str] = []  # redeliveries of what is done, and the dead-lettered
        misfits: list[tuple[Envelope, InvalidEnvelope]] = []
        for envelope in batch:
            if envelope.id in self.done:
                settled.append(envelope.id)
            elif envelope.id in self.pending:
                continue  # a twin of one handed out already (this batch's twins too)
            elif (error := _misfit(envelope)) is not None:
                misfits.append((envelope, error))
            else:
                self.pending[envelope.id] = None
                fresh.append(envelope)
        for envelope, error in misfits:
            if await self._dead_letter(envelope, error, give_up):
                settled.append(envelope.id)
        if settled:
            await self._settle(settled, give_up)
        return fresh

    async def _settle(self, ids: list[str], give_up: Callable[[], bool] | None) -> None:
        """Ack what is never handed out; if the bus stays away, a redelivery meets ``done``."""
        try:
            await self.ack(ids, give_up=give_up)
        except BusUnreachable as exc:
            log.warning("%s/%s: left %d settled message(s) un-acked: %s",
                        self.session, self.agent, len(ids), exc)  # fmt: skip

    async def ack(self, ids: Sequence[str], *, give_up: Callable[[], bool] | None = None) -> None:
        """Done with ``ids`` for good: never handed out again, gone from the inbox."""
        if not ids:
            return
        ids = list(ids)
        self.done.update(ids)
        await self._persist(
            lambda: self.bus.inboxes.ack(self.session, self.agent, ids), "ack", give_up
        )
        for envelope_id in ids:
            self.pending.pop(envelope_id, None)

    async def ack_pending(self) -> None:
        """Ack everything handed out and not acked yet (an agent leaving for good)."""
        await self.ack(list(self.pending))

    async def refuse(
        self, envelope: Envelope, reason: str, *, give_up: Callable[[], bool] | None = None
    ) -> None:
        """Set aside an envelope handed out that its reader will not act on (the lead's check of
        who may report to it): dead-lettered with ``reason`` and acked, as a misfit is. If the
        bus stays away until ``give_up()``, it stays un-acked and is screened again on its next
        delivery."""
        error = InvalidEnvelope(reason, envelope.to_json())
        if await self._dead_letter(envelope, error, give_up):
            await self._settle([envelope.id], give_up)

    # -- the loop -------------------------------------------------------------------------------

    async def collect(
        self,
        take: Take,
        *,
        deadline: float = math.inf,
        slice_s: float | None = DEFAULT_WAIT_S,
        stop: Callable[[], bool] = _never,
        park: bool = False,
    ) -> Ending:
        """Read, hand fresh envelopes to ``take`` and wait, until ``take`` has enough.

        ``deadline`` is on the ``anyio.current_time()`` clock; ``slice_s`` bounds one wait
        (None: wait up to the deadline), so a wake-up lost on the way is made up for by
        reading again. ``stop`` is asked before each read and wait, and between retries.
        ``park``: where it would wait, return ``"parked"`` instead; the caller parks on the
        inbox (``Inboxes.park``, which keeps this read's mark) and calls again once woken or
        at its next slice.
        """

        while not stop():
            try:
                batch = await self._read_within(deadline, stop)
            except BusUnreachable as exc:
                return self._gave_up(exc, stop)
            if batch is None:  # a retrying read cut short by interrupt() or the deadline
                return self._gave_up(None, stop)
            if await take(batch):
                return "taken"
            if stop():
                break
            remaining = deadline - anyio.current_time()
            if remaining <= 0:
                return "timed_out"
            if park:
                return "parked"
            wait_s = remaining if slice_s is None else min(remaining, slice_s)
            # Written inline, and retried only once it failed: idle agents wait right here by
            # the thousand, and each frame on their await stack is memory every one of them holds.
            # One scope bounds the wait and lets interrupt() end it: the bus's wait gets no
            # timeout of its own (math.inf), so an idle agent holds one cancel scope, not two.
            with anyio.CancelScope(deadline=anyio.current_time() + wait_s) as scope:
                self._wait_scope = scope
                try:
                    await self.bus.inboxes.wait(self.session, self.agent, math.inf)
                except BusUnreachable:
                    wait = partial(self.bus.inboxes.wait, self.session, self.agent, wait_s)
                    try:
                        await self._persist(wait, "wait", partial(_giving_up, stop, deadline))
                    except BusUnreachable as exc:
                        return self._gave_up(exc, stop)
                finally:
                    self._wait_scope = None
            if scope.cancelled_caught and anyio.current_time() < scope.deadline:  # interrupt()
                break
        return "interrupted"

    async def _read_within(
        self, deadline: float, stop: Callable[[], bool]
    ) -> list[Envelope] | None:
        """:meth:`read`, whose fetch once it has failed may be cut short (None) by
        :meth:`interrupt` or the deadline: one attempt can block for long in an outage (a
        SUBSCRIBE waiting to be confirmed), and a fetch cancelled mid-flight is safe (the bus
        re-reads its own pending). What a fetch returned is always sorted in full.
        """
        batch: list[Envelope] | None = None
        with anyio.CancelScope() as scope:

            def failed() -> bool:  # asked by persist after each failed attempt
                scope.deadline = deadline
                self._retry_scope = scope
                return _giving_up(stop, deadline)

            try:
                batch = await self._fetch(failed)
            finally:
                self._retry_scope = None
        if batch is None:
            return None
        return await self._sort(batch, partial(_giving_up, stop, deadline))

    def _gave_up(self, exc: BusUnreachable | None, stop: Callable[[], bool]) -> Ending:
        """A read or wait failed through a bus fault and ``give_up()`` agreed: say how it ended."""
        ending: Ending = "interrupted" if stop() else "timed_out"
        why = "asked to stop" if ending == "interrupted" else "deadline passed"
        log.warning("%s/%s: stopped retrying the bus (%s); last error: %s",
                    self.session, self.agent, why, exc or "none yet")  # fmt: skip
        return ending

    # -- helpers --------------------------------------------------------------------------------

    async def _persist(
        self,
        operation: Callable[[], Awaitable[T]],
        what: str,
        give_up: Callable[[], bool] | None,
    ) -> T:
        return await persist(operation, f"{what} {self.agent}", give_up=give_up)

    async def _dead_letter(
        self, envelope: Envelope, error: InvalidEnvelope, give_up: Callable[[], bool] | None
    ) -> bool:
        """Move a misfit to the dead letters; False (it stays un-acked in the inbox, for the next
        owner to screen again) if the bus stayed away until ``give_up()``."""
        raw = error.raw if error.raw is not None else envelope.to_json()
        source = f"inbox:{self.session}/{self.agent}"
        try:
            await self._persist(
                # The bus's own dead-letter path: the same stream, log line and error event as
                # an envelope that failed to parse.
                lambda: self.bus.quarantine(error, source=source, session=self.session, raw=raw),
                "dead letter",
                give_up,
            )
        except BusUnreachable as exc:
            log.warning("%s/%s: could not dead-letter %s, left it un-acked: %s",
                        self.session, self.agent, envelope.id, exc)  # fmt: skip
            return False
        return True


def _misfit(envelope: Envelope) -> InvalidEnvelope | None:
    """Why the envelope's typed payload does not fit its type, or None if it fits."""
    try:
        check_payload(envelope)
    except InvalidEnvelope as exc:
        return exc
    return None
