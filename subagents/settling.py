"""A worker's own bookkeeping on the bus for the claims it is done with: acked, given back,
refused, set aside.

Each is a few bus operations that must happen even while the worker stops (shielded), must not
hold a stop beyond its deadline (bounded, and cut with the worker's other shields), and must never
become its host's problem: a refusal or a timeout is logged, and the request, left as it is, is
claimed again once its lease lapses (its next owner finishes only what is recorded).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from functools import partial

from baton.bus.base import Bus, SpawnClaim
from baton.bus.errors import BusError, InvalidEnvelope
from baton.bus.events import AgentExited, AgentResult
from baton.bus.messages import SpawnRequest
from baton.bus.refusals import SpawnRefusal, refusal_result
from baton.bus.retry import persist
from baton.bus.signing import key_mismatch
from baton.subagents.bookkeeping import watched_inboxes
from baton.subagents.stopping import Shields

log = logging.getLogger("baton.subagents.worker")
"""The worker's log: this is the worker's doing, and operators filter on that name."""

GIVE_BACK_S = 10.0
"""Bound on each piece of a worker's own bookkeeping (giving a spawn request back, acking it,
refusing it): the bus may be down, and a request left un-acked is simply claimed again later."""

Whose = tuple[str, str]
"""A session and an agent, as log lines name them."""


class ClaimSettler:
    """Settles the claims of the worker named ``worker`` on ``bus``, under its ``shields``;
    ``profiles`` are those it knows (a refusal lists them)."""

    __slots__ = ("_bus", "_profiles", "_shields", "_worker")

    def __init__(
        self, bus: Bus, shields: Shields, worker: str, profiles: Mapping[str, object]
    ) -> None:
        self._bus = bus
        self._shields = shields
        self._worker = worker
        self._profiles = profiles

    async def settle(
        self, whose: Whose | None, what: str, *steps: Callable[[], Awaitable[object]]
    ) -> bool:
        """The worker's own bookkeeping on the bus: each step retried through blips, all of them
        shielded (a stopping worker still does it) and together bounded by ``GIVE_BACK_S`` and by
        the stop's deadline (the bus may be down; a request left as it is is claimed again later).
        False once logged that a bound was hit."""
        of = f" of {whose[0]}/{whose[1]}" if whose is not None else ""
        with self._shields.shield(GIVE_BACK_S) as bound:
            try:
                for step in steps:
                    await persist(step, what)
            except BusError as exc:
                # A refusal (NOGROUP from a Redis that came back empty, READONLY, a closed bus)
                # is this agent's problem, never its host's: its lease lapses and another worker
                # claims it again, as after a timeout.
                log.warning("%s%s failed: %s; it will be claimed again", what, of, exc)
                return False
        if not bound.cancelled_caught:
            return True
        within = f"within {GIVE_BACK_S:.0f} s"
        if self._shields.is_cut:
            within = "before the stop's deadline"
        log.warning("%s%s not done %s; it will be claimed again", what, of, within)
        return False

    async def ack(self, whose: Whose, what: str, receipt: str) -> bool:
        """Done with for good here (the agent exited, or it is a duplicate of one hosted)."""
        return await self.settle(whose, what, partial(self._bus.claims.ack, [receipt]))

    async def give_back(self, receipts: list[str]) -> None:
        """Released, so another worker claims each at once, not a lease later."""
        await self.settle(None, "release spawn", partial(self._bus.claims.release, receipts))

    async def give_back_unfinished(self, whose: Whose, receipt: str) -> None:
        """An agent stopped unfinished here: its un-acked messages go back too, so the next owner
        need not wait a lease."""
        await self.settle(whose, "release inbox", partial(self._bus.inboxes.hand_back, *whose))
        await self.give_back([receipt])

    async def give_back_idle(self, inboxes: Sequence[Whose], receipts: list[str]) -> bool:
        """What each given-back idle agent and its host would do, as a few operations for all:
        stop watching their inboxes, hand back what they hold for us, release their requests (so
        another worker resumes each at once, not a lease later)."""
        watched = [inbox for s, a in inboxes for inbox in watched_inboxes(s, a)]
        return await self.settle(
            None,
            f"give back of {len(inboxes)} idle agents",
            partial(self._bus.inboxes.forget_all, watched),
            partial(self._bus.inboxes.hand_back_all, inboxes),
            partial(self._bus.claims.release, receipts),
        )

    async def refuse(self, claim: SpawnClaim, problem: str) -> None:
        """A request this worker cannot serve still gets one final result (an error), then is
        acked; if no result can be made of it, it is dead-lettered and acked instead."""
        request = claim.request
        known = ", ".join(sorted(self._profiles)) or "none"
        content = f"Cannot start {request.agent}: {problem} (this worker knows: {known})."
        log.error("%s", content)
        s, a = request.session, request.agent
        try:
            envelope = refusal_result(
                request_id=request.id, session=s, agent=a, parent=request.parent, content=content
            )
        except ValueError as exc:  # a pydantic ValidationError: nothing to send the lead
            await self.set_aside(claim, f"{content} No result could be sent: {why(exc)}")
            return
        # If this times out, the same refusal (same id) goes out again on the next claim.
        await self.settle(
            (request.session, request.agent),
            "refusal",
            partial(self._bus.inboxes.send, envelope),
            partial(self._bus.log.emit, AgentResult(session=s, agent=a, content=content)),
            partial(self._bus.log.emit, AgentExited(session=s, agent=a, reason="error")),
            partial(self._bus.claims.ack, [claim.receipt]),
        )

    def key_mismatch(self, request: SpawnRequest) -> str | None:
        """Why this worker cannot serve a request whose session signs with another key (or
        signs where it does not, or the other way round): it could read none of the agent's
        messages, and the lead none of its reports. None when the keys agree, or the request
        does not say (a producer that predates the key id)."""
        theirs = request.key_id
        if theirs is None:
            return None
        we = f"this worker ({self._worker})"
        return key_mismatch(theirs, self._bus.key_id, they=f"session {request.session}", we=we)

    async def refuse_unreadable(self, claim: SpawnClaim, problem: str) -> None:
        """Refuse a request whose lead cannot read this worker's envelopes (a signing-key
        mismatch): named here at once, logged in the session's events (which are not signed),
        and recorded in the agent's hash for the session, which delivers the refusal result to
        its lead with its own key (:mod:`baton.bus.refusals`); then acked."""
        request = claim.request
        s, a = request.session, request.agent
        content = f"Cannot start {a}: {problem}."
        log.error("worker %s: %s", self._worker, content)
        refusal = SpawnRefusal(spawn=request.id, worker=self._worker, content=content)
        await self.settle(
            (request.session, request.agent),
            "refusal",
            partial(self._bus.records.set_agent, s, a, refusal.to_field()),
            partial(self._bus.log.emit, AgentResult(session=s, agent=a, content=content)),
            partial(self._bus.log.emit, AgentExited(session=s, agent=a, reason="error")),
            partial(self._bus.claims.ack, [claim.receipt]),
        )

    async def set_aside(self, claim: SpawnClaim, reason: str) -> None:
        """Set a request aside for good: it is never run, and the dead letters say why. Never
        raises: it is the last thing a failed claim does."""
        request = claim.request
        raw = request.model_dump_json()
        _, _, stream = claim.receipt.partition("@")
        dead = partial(self._bus.quarantine, InvalidEnvelope(reason, raw),
                       source=stream or "spawn", session=request.session, raw=raw)  # fmt: skip
        try:
            whose = (request.session, request.agent)
            ack = partial(self._bus.claims.ack, [claim.receipt])
            await self.settle(whose, "dead letter", dead, ack)
        except Exception:
            log.exception("could not set %s/%s aside", request.session, request.agent)


def why(exc: BaseException) -> str:
    """An exception in one line, short enough for a result's content."""
    text = " ".join(f"{type(exc).__name__}: {exc}".split())
    return text if len(text) <= 500 else f"{text[:497]}..."
