"""The sub-agent inbox loop: an explicit ``while`` over inbox batches (DESIGN §4).

Two loops nest here. The engine's :class:`~baton.engine.AgentLoop` runs the micro-loop of
one round (model → tools → model … until it answers). This module runs the macro-loop around it,
written out so every way out is visible::

    while step < max_steps:
        batch = what the last round read ahead, else the inbox; empty → wait for a wake-up;
            still empty at the idle timeout → idle
        shutdown in the batch → shutdown
        progress to the lead ("round N: received K messages: ...")
        run one engine turn on the batch, with the agent's memory, tools, tool choice and
            governance, watching the inbox meanwhile: a shutdown read stops the turn → shutdown
        model error, reply cut twice, every call blocked twice → error
        the session's budget spent → budget; the turn's hard limit of tool rounds → round_limit
        collect media URLs; checkpoint memory + processed ids (+ the exit, if the round ended
            the agent: resumed from there, it reports at once); ack the batch
        sent its result (terminal send_message) or answered without tools → finished
    → max_steps
    always: one final ``result`` to the lead with every media URL, AgentResult + AgentExited events

A ``shutdown`` reaches the agent mid-round too (:mod:`~baton.subagents.interrupt`): its model
request and tools are cancelled and it leaves with reason ``shutdown``, so a session that ends
leaves no sub-agent working on. Cancellation from outside ends it with reason ``cancelled`` (still
one final result, sent under a shield). :meth:`SubAgent.drain` and :meth:`SubAgent.give_back_now`
are different: a stopping worker gives the agent back unfinished, so it stops (at the next safe
point, or at once) *without* a final result and another worker resumes it from the checkpoint.
Giving back also cuts short the start (announcing the agent, restoring its state), which in a bus
outage would otherwise retry for as long as the outage lasts; every shielded step after it is
bounded.

One round — its batch turned into a turn, run while the inbox is watched, folded into the
checkpoint — is a :class:`~baton.subagents.round.Round`, which lives only while it runs. A remote
agent's profile (``kind = "a2a"``) runs this same loop, its rounds relayed to the remote by a
:class:`TurnRunner` its worker makes (:mod:`baton.subagents.a2a_remote`) instead of the engine's
:class:`~baton.engine.AgentLoop`.

What must outlive a worker — restoring from the checkpoint, checkpointing each round before its
messages are acked, recording the final report before delivering it, so that the lead gets exactly
one — is the :class:`~baton.subagents.bookkeeping.Bookkeeper`'s job, which each agent owns. This
module decides when to call it, and moves the agent's :class:`~baton.subagents.phases.AgentPhase`
by what it reports. Two more pieces each agent owns and keeps while parked: its
:class:`~baton.subagents.control.Control` (where it stands, and the scopes a stop cuts) and its
:class:`~baton.subagents.intake.Intake` (where its next batch comes from: what the last round read
ahead, else its inbox, up to its idle deadline).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Literal, TypeAlias, overload

import anyio

from baton.bus.base import DEFAULT_WAIT_S, Bus
from baton.bus.errors import BusClosed
from baton.bus.events import AgentProgress, Event, TextDelta
from baton.bus.inbox import InboxReader
from baton.bus.messages import ApproveMode, Envelope, SpawnRequest, TraceContext
from baton.bus.payloads import ProgressReport
from baton.bus.retry import persist
from baton.engine import Telemetry, ToolRegistry
from baton.engine.spend import BusSpend, Spend
from baton.engine.telemetry import trace_of
from baton.llm.types import ChatModel
from baton.media import MediaStore
from baton.subagents.bookkeeping import Bookkeeper, Restored
from baton.subagents.context import AgentContext, enter_agent
from baton.subagents.control import Control
from baton.subagents.errors import LostOwnership
from baton.subagents.images import ImageGenerator
from baton.subagents.intake import PARKED, Intake, Parked
from baton.subagents.phases import AgentPhase, Outcome
from baton.subagents.profiles import Profile
from baton.subagents.round import RemoteRound, Round, TurnMaker, TurnRunner
from baton.subagents.state import Checkpoint, ExitKind, FinalReport

__all__ = ["PARKED", "Parked", "RemoteRound", "RoundHook", "SubAgent", "TurnMaker", "TurnRunner"]

log = logging.getLogger(__name__)

RoundHook = Callable[["SubAgent", Sequence[Envelope]], None]


@dataclass(frozen=True, slots=True)
class Seat:
    """Who the agent is and whose work it does: its ``session`` and ``name``, the ``lead`` it
    reports to, the spawn request it runs (``spawn_id``), the claim it runs under (``owner``;
    empty when run without a worker: no ownership check), the session's approval policy
    (``approve``: ``ask`` asks over the bus, ``auto``/``deny`` decide at once, here, without a
    round trip) and the ``trace`` its rounds join. A worker takes them all from the spawn
    request (:meth:`of`)."""

    session: str
    name: str
    lead: str = "lead"
    spawn_id: str = ""
    owner: str = ""
    approve: ApproveMode = "ask"
    trace: TraceContext | None = None

    @classmethod
    def of(cls, request: SpawnRequest, owner: str) -> Seat:
        return cls(
            request.session,
            request.agent,
            lead=request.parent,
            spawn_id=request.id,
            owner=owner,
            approve=request.approve,  # the session's policy, wherever the agent runs
            trace=request.trace,  # its rounds join the lead's trace, in this process or not
        )


@dataclass(frozen=True, slots=True)
class AgentParts:
    """What an agent works with, the same for every agent of a profile on one worker: its
    ``tools`` (None: the profile's), the ``media_dir``, ``media`` store and ``images`` generator
    its tools use, its ``telemetry``, the session's budget (``spend``; None looks on the bus as
    the agent starts and uses the session's budget there if it has caps, which a session writes
    before its first spawn), ``on_round`` (called as each round starts: benchmarks time dispatch
    with it) and ``remote``, which makes each round's runner when the agent runs elsewhere
    (``kind = "a2a"``)."""

    tools: ToolRegistry | None = None
    media_dir: Path | None = None
    media: MediaStore | None = None
    images: ImageGenerator | None = None
    telemetry: Telemetry | None = None
    spend: Spend | None = None
    on_round: RoundHook | None = None
    remote: TurnMaker | None = None


NO_PARTS = AgentParts()


@dataclass(frozen=True, slots=True)
class _Ended:
    """The start found the agent's report decided by a previous owner: why it left, or None
    when the report could not be delivered (the request goes back, nothing is given back)."""

    reason: ExitKind | None


_Left: TypeAlias = ExitKind | Parked | None
"""What :meth:`SubAgent.run` and :meth:`SubAgent.resume` return."""


class SubAgent:
    """One sub-agent: its memory, its loop, its final report. Run it with :meth:`run`.

    Who it is comes as a :class:`Seat`, what it works with as :class:`AgentParts`: a worker
    makes the first from the spawn request and shares the second among a profile's agents.
    """

    def __init__(
        self,
        bus: Bus,
        profile: Profile,
        model: ChatModel,
        seat: Seat,
        parts: AgentParts = NO_PARTS,
    ) -> None:
        self.bus = bus
        self.profile = profile
        self.model = model
        self.session = seat.session
        self.name = seat.name
        self.lead = seat.lead
        self.media_dir = parts.media_dir or Path("media")
        self.media = parts.media
        self.images = parts.images
        self.remote = parts.remote
        """Makes each round's runner when the agent runs elsewhere (``kind = "a2a"``)."""
        self.tools = parts.tools or ToolRegistry(profile.tools)
        self.telemetry = parts.telemetry or Telemetry()
        self.on_round = parts.on_round
        self.spend = parts.spend
        self.approve: ApproveMode = seat.approve
        self._control = Control()
        """Where it stands, and what stops it (:mod:`baton.subagents.control`)."""
        self.inbox = InboxReader(bus, seat.session, seat.name)
        """Its inbox: ``done`` holds the checkpointed ids, ``pending`` the un-acked batch."""
        self._books = Bookkeeper(
            self.inbox, profile, lead=seat.lead, spawn_id=seat.spawn_id, owner=seat.owner
        )
        self._intake = Intake(self.inbox)
        """Where its next batch comes from (:mod:`baton.subagents.intake`)."""
        self._trace = seat.trace
        """The trace its rounds continue when their messages carry none (a person's): the spawn
        request's, else its first round's."""
        self.busy = False
        """Whether it is running a round now (its worker's ``baton.worker.agents`` gauge)."""

    # -- where it stands ------------------------------------------------------------------------

    @property
    def phase(self) -> AgentPhase:
        return self._control.phase

    @property
    def state(self) -> Checkpoint:
        """Its progress so far: memory, processed ids, media, step (checkpointed each round)."""
        return self._books.state

    @property
    def look_s(self) -> float:
        """How long it waits for a wake-up before it looks at its inbox anyway: a minute, and a
        resumed agent a lease, since its dead owner's un-acked messages come back only once
        that lease expired, with no wake-up. (A property, not an attribute: past 30 attributes
        an instance's dict stops sharing its keys with the others', about 1 KiB per agent.)"""
        return min(self.bus.options.lease_s, DEFAULT_WAIT_S) if self.resumed else DEFAULT_WAIT_S

    @property
    def idle_deadline(self) -> float:
        """While parked: when it leaves ``idle`` unless a message comes (anyio's clock)."""
        return self._intake.idle_deadline

    @property
    def wake_at(self) -> float:
        """While parked: when its host resumes it even if nothing wakes it (the next look at
        its inbox, at most a minute away, or its idle deadline)."""
        return self._intake.wake_at

    @property
    def resumed(self) -> bool:
        """True when this run took over an agent another worker left running (its checkpoint)."""
        return self._books.resumed

    @property
    def reason(self) -> ExitKind | None:
        """Why it exited, once its final report is out (or a previous owner's was); else None."""
        return self._control.reason

    @property
    def lost(self) -> bool:
        """True when another worker took the agent over; this copy stopped without a report."""
        return self._control.phase is AgentPhase.LOST

    @property
    def released(self) -> bool:
        """True when the agent stopped unfinished for another worker to resume."""
        return self._control.phase is AgentPhase.GIVEN_BACK

    # -- control from outside -------------------------------------------------------------------

    def drain(self) -> None:
        """Stop at the next safe point without a final result (the worker gives it back)."""
        if self._control.move(AgentPhase.DRAINING):
            self.inbox.interrupt()

    def give_back_now(self) -> None:
        """Stop now without a final result; the un-checkpointed round is redone elsewhere."""
        if self._control.move(AgentPhase.GIVING_BACK):
            self._control.stop_now()

    def give_back_parked(self) -> bool:
        """Stop an agent parked between rounds without resuming it, as a resumed one would stop
        (no more reads, no round, no report), leaving to its host what it would do on the bus:
        a stopping worker hands back the inboxes and requests of all its idle agents at once.
        False, with nothing changed, when it must be resumed to stop: its lease was lost, or a
        cancel asked while parked owes the lead a report."""
        if self._control.cancel_asked or self._intake.holds_ahead:
            return False
        return self._control.move(AgentPhase.GIVEN_BACK)

    def lose_lease(self) -> None:
        """Another worker took the agent over (our lease lapsed): stop now, report nothing."""
        if self._control.move(AgentPhase.LOST):
            self._control.stop_now()

    def cancel(self) -> None:
        """Stop now and report ``cancelled`` to the lead (once started: the report needs the
        restored state). A parked agent stops once resumed (its host resumes it)."""
        self._control.cancel()

    # -- the loop -------------------------------------------------------------------------------

    @overload
    async def run(
        self, *, announce: Event | None = None, park: Literal[False] = False
    ) -> ExitKind | None: ...

    @overload
    async def run(self, *, announce: Event | None = None, park: bool) -> _Left: ...

    async def run(self, *, announce: Event | None = None, park: bool = False) -> _Left:
        """Run until the agent leaves; returns why, or None when it was given back or taken over.

        ``announce`` is emitted first (a worker's ``AgentClaimed``), as part of the start.
        ``park``: where it would wait for its inbox, return :data:`PARKED` instead, its state
        kept here: its host parks it on the inbox (``Inboxes.park``) and calls :meth:`resume`
        once the inbox is woken, at :attr:`wake_at`, or when it is asked to stop.
        """
        self._intake.parks = park
        return await self._guarded(self._start_then_loop(announce))

    async def resume(self) -> _Left:
        """Go on after :meth:`run` (or this) returned :data:`PARKED`; returns as :meth:`run`."""
        return await self._guarded(self._segment())

    async def _guarded(self, step: Awaitable[Outcome | _Ended | Parked | None]) -> _Left:
        """Run ``step`` in the agent's logging context; report (or give back) what it ends in."""
        enter_agent(self.context())
        outcome: Outcome | _Ended | Parked | None
        try:
            outcome = await step
        except LostOwnership as exc:
            log.warning("%s", exc)
            self._control.move(AgentPhase.LOST)
            outcome = None
        except anyio.get_cancelled_exc_class():
            if not self._control.phase.without_report:
                with anyio.CancelScope(shield=True):
                    await self._finish(Outcome("cancelled"))
            raise
        except BusClosed:
            raise
        except Exception as exc:  # a bug must still end in a report, not a silent agent
            log.exception("sub-agent %s/%s failed", self.session, self.name)
            outcome = Outcome("error", f"{type(exc).__name__}: {exc}")
        if isinstance(outcome, _Ended):
            return outcome.reason
        if outcome is PARKED:
            return PARKED
        if outcome is None:
            self._control.move(AgentPhase.GIVEN_BACK)  # unless lost: then there is nothing to give
            await self._books.release()
            return None
        return outcome.reason if await self._finish(outcome) else None

    async def _start_then_loop(self, announce: Event | None) -> Outcome | _Ended | Parked | None:
        started = await self._start(announce)
        announce = None  # emitted: an idle agent's frame need not keep it
        if started is None:  # given back or taken over while starting
            return None
        if (final := started.final) is not None:  # a previous owner decided the report
            if started.delivered:  # and it is out already
                self._control.exited(final.reason)
                return _Ended(final.reason)
            return _Ended(final.reason if await self._deliver(final) else None)  # deliver, once
        return await self._segment()

    async def _segment(self) -> Outcome | Parked | None:
        """Rounds until the agent leaves, parks, or is stopped, under a cancel scope of its own
        (:meth:`Control.stretch`)."""
        outcome: Outcome | Parked | None = None
        with self._control.stretch() as scope:
            outcome = await self._loop()
        if scope.cancelled_caught:
            return None if self._control.phase.without_report else Outcome("cancelled")
        return outcome

    async def _loop(self) -> Outcome | Parked | None:
        """Rounds until the agent leaves (its outcome) or is stopped unfinished (None)."""
        limits = self.profile.limits
        if (ending := self.state.ending) is not None:  # resumed after the round that ended it
            return Outcome(ending, self.state.error)
        while self.state.step < limits.max_steps:
            batch = await self._intake.next_batch(
                idle_timeout_s=limits.idle_timeout_s, look_s=self.look_s, stopping=self._stopping
            )
            if batch is PARKED:
                return PARKED
            if batch is None:
                return None if self._stopping() else Outcome("idle")
            outcome = await self._round(batch)
            if outcome is not None:
                return outcome
            if self._stopping():
                return None
        return Outcome("max_steps")

    def _stopping(self) -> bool:
        """Whether it must not start another round nor wait for more messages."""
        return self._control.phase.stopping_unfinished

    async def _round(self, batch: Sequence[Envelope]) -> Outcome | None:
        """One :class:`~baton.subagents.round.Round` on the batch; how it ends the agent (None:
        it waits for the next batch). What the round read ahead is the next batch's start."""
        on = Round(self, batch, trace_of(batch, self._trace))
        try:
            return await on.run(self._books)
        finally:  # even when cancelled: what was read stays pending, acked or given back
            self._intake.keep(on.ahead)
            self._trace = self._trace or on.runner_trace

    # -- the bookkeeping ------------------------------------------------------------------------

    async def _start(self, announce: Event | None) -> Restored | None:
        """Emit ``announce`` and restore; None when a give-back or a lost lease cut it short
        (both retry through bus faults, so an outage could hold a stopping worker)."""
        with self._control.starting():
            if announce is not None:
                await persist(partial(self.bus.log.emit, announce), "announce")
            restored = await self._books.restore()
            if self.spend is None:
                self.spend = await _session_budget(self.bus, self.session)
            return restored
        return None

    async def _finish(self, outcome: Outcome) -> bool:
        """Report ``outcome`` (shielded and bounded); whether it was delivered. If not (taken
        over, or the bus stayed down), the spawn request must go back so another worker
        delivers the recorded report from the ``finishing`` state."""
        return self._control.settle(await self._books.finish(outcome), outcome.reason)

    async def _deliver(self, final: FinalReport) -> bool:
        """Deliver a report a previous owner decided; whether it was delivered."""
        return self._control.settle(await self._books.deliver(final), final.reason)

    # -- talking to the lead --------------------------------------------------------------------

    def context(self) -> AgentContext:
        """The agent as its tools see it (:mod:`baton.subagents.context`)."""
        return AgentContext(
            session=self.session,
            agent=self.name,
            lead=self.lead,
            media_dir=self.media_dir,
            report=self.report,
            record_result=self._books.record_result,
            media=self.media,
            images=self.images,
        )

    async def report(self, content: str) -> None:
        """A progress message to the lead and an ``agent.progress`` event for observers, written
        at the same time: neither waits for the other (on Redis their round trips overlap, where
        they were two in a row at the start of every round), and the round starts once both are
        down."""
        envelope = Envelope(
            session=self.session,
            sender=self.name,
            recipient=self.lead,
            type="progress",
            content=content,
            meta=ProgressReport(owner=self._books.owner).to_meta(),
        )
        event = AgentProgress(session=self.session, agent=self.name, content=content)
        async with anyio.create_task_group() as writes:  # the lead's message goes out first
            writes.start_soon(persist, partial(self.bus.log.emit, event), "progress event")
            await persist(partial(self.bus.inboxes.send, envelope), "progress")

    async def forward(self, event: Event) -> None:
        """Engine events go to the session log, except text deltas (progress says enough)."""
        if not isinstance(event, TextDelta):
            await persist(lambda: self.bus.log.emit(event), "engine event")


async def _session_budget(bus: Bus, session: str) -> Spend | None:
    """The session's budget on the bus when it has caps; None when it has none (then no call is
    counted: the budget events would only say "no cap")."""
    totals = await persist(partial(bus.budget.totals, session), "read the budget")
    return None if totals.limits.unlimited else BusSpend(bus, session)
