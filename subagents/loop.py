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

A remote agent's profile (``kind = "a2a"``) runs this same loop, its rounds relayed to the remote
by a :class:`TurnRunner` its worker makes (:mod:`baton.subagents.a2a_remote`) instead of the
engine's :class:`~baton.engine.AgentLoop`.

What must outlive a worker — restoring from the checkpoint, checkpointing each round before its
messages are acked, recording the final report before delivering it, so that the lead gets exactly
one — is the :class:`~baton.subagents.bookkeeping.Bookkeeper`'s job, which each agent owns. This
module decides when to call it, and moves the agent's :class:`~baton.subagents.phases.AgentPhase`
by what it reports.
"""

from __future__ import annotations

import enum
import logging
import math
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Literal, Protocol, TypeAlias, cast, overload

import anyio

from baton.bus.base import DEFAULT_WAIT_S, Bus
from baton.bus.errors import BusClosed
from baton.bus.events import AgentProgress, Event, TextDelta
from baton.bus.inbox import InboxReader
from baton.bus.interrupt import RoundWatch
from baton.bus.messages import ApproveMode, Envelope, SpawnRequest, TraceContext
from baton.bus.payloads import ProgressReport
from baton.bus.retry import persist
from baton.engine import (
    AgentLoop,
    AgentTurn,
    InteractionChannel,
    LoopLimits,
    StopReason,
    Telemetry,
    ToolRegistry,
    TurnResult,
)
from baton.engine.bus_channel import BusInteractionChannel
from baton.engine.channels import policy_channel
from baton.engine.spend import BusSpend, Spend
from baton.engine.telemetry import trace_of
from baton.llm.types import ChatModel, Message
from baton.media import MediaStore, directory_of
from baton.subagents.bookkeeping import Bookkeeper, Delivery, Restored
from baton.subagents.context import AgentContext, enter_agent
from baton.subagents.errors import LostOwnership
from baton.subagents.images import ImageGenerator
from baton.subagents.phases import NEXT, AgentPhase, Outcome
from baton.subagents.profiles import Profile
from baton.subagents.state import Checkpoint, ExitKind, FinalReport, format_inbox
from baton.subagents.stopping import shielded

__all__ = ["RemoteRound", "RoundHook", "SubAgent", "TurnMaker", "TurnRunner"]

log = logging.getLogger(__name__)

RoundHook = Callable[["SubAgent", Sequence[Envelope]], None]


class TurnRunner(Protocol):
    """What runs one round on a batch: the engine's :class:`AgentLoop`, or a remote agent's
    relay. ``run_turn`` appends to ``memory`` (checkpointed after the round) and ends when
    ``turn`` is cancelled (a shutdown, a stopping worker)."""

    @property
    def trace(self) -> TraceContext | None: ...

    def new_turn(self) -> AgentTurn: ...

    async def run_turn(self, memory: list[Message], *, turn: AgentTurn) -> TurnResult: ...


@dataclass(frozen=True, slots=True)
class RemoteRound:
    """What a round relayed to a remote agent needs of the agent it runs for."""

    session: str
    agent: str
    batch: Sequence[Envelope]
    trace: TraceContext | None
    limits: LoopLimits
    telemetry: Telemetry
    report: Callable[[str], Awaitable[None]]
    """A progress message to the lead (and its ``agent.progress`` event)."""
    emit: Callable[[Event], Awaitable[None]]
    """An event to the session's log (approvals are found there by ``baton approve``)."""
    channel: InteractionChannel
    media: MediaStore


TurnMaker = Callable[[RemoteRound], TurnRunner]
"""Makes the round's runner for a remote agent (its worker's; None: the engine's)."""


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


class Parked(enum.Enum):
    """What :meth:`SubAgent.run` returns when the agent parked (see there)."""

    PARKED = "parked"


PARKED = Parked.PARKED


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
        self._phase = AgentPhase.RUNNING
        self._reason: ExitKind | None = None
        self.inbox = InboxReader(bus, seat.session, seat.name)
        """Its inbox: ``done`` holds the checkpointed ids, ``pending`` the un-acked batch."""
        self._books = Bookkeeper(
            self.inbox, profile, lead=seat.lead, spawn_id=seat.spawn_id, owner=seat.owner
        )
        self._scope: anyio.CancelScope | None = None
        """The running stretch's (see :meth:`_segment`); None while parked or not started."""
        self._cancel_asked = False
        """Whether :meth:`cancel` was called (a stretch that starts after it is cancelled)."""
        self._parks = False
        """Whether it parks where it would wait (see :meth:`run`)."""
        self._idle_deadline: float | None = None
        """When it leaves idle unless a message comes; set while it waits for one."""
        self.wake_at = math.inf
        """While parked: when its host resumes it even if nothing wakes it (the next look at
        its inbox, at most a minute away, or its idle deadline)."""
        self._starting: anyio.CancelScope | None = None
        """Only while it starts (see :meth:`_start`): a give-back ends the start too."""
        self._ahead: list[Envelope] = []
        """Messages the last round's :class:`RoundWatch` read: the start of the next batch."""
        self._shut_down = False
        """Whether a ``shutdown`` read mid-round stopped the last round."""
        self._trace = seat.trace
        """The trace its rounds continue when their messages carry none (a person's): the spawn
        request's, else its first round's."""
        self.busy = False
        """Whether it is running a round now (its worker's ``baton.worker.agents`` gauge)."""

    # -- where it stands ------------------------------------------------------------------------

    @property
    def phase(self) -> AgentPhase:
        return self._phase

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
        return math.inf if self._idle_deadline is None else self._idle_deadline

    @property
    def resumed(self) -> bool:
        """True when this run took over an agent another worker left running (its checkpoint)."""
        return self._books.resumed

    @property
    def reason(self) -> ExitKind | None:
        """Why it exited, once its final report is out (or a previous owner's was); else None."""
        return self._reason

    @property
    def lost(self) -> bool:
        """True when another worker took the agent over; this copy stopped without a report."""
        return self._phase is AgentPhase.LOST

    @property
    def released(self) -> bool:
        """True when the agent stopped unfinished for another worker to resume."""
        return self._phase is AgentPhase.GIVEN_BACK

    def _move(self, phase: AgentPhase) -> bool:
        """Go to ``phase`` if :data:`~baton.subagents.phases.NEXT` allows it; whether it did."""
        if phase not in NEXT[self._phase]:
            return False
        self._phase = phase
        return True

    # -- control from outside -------------------------------------------------------------------

    def drain(self) -> None:
        """Stop at the next safe point without a final result (the worker gives it back)."""
        if self._move(AgentPhase.DRAINING):
            self.inbox.interrupt()

    def give_back_now(self) -> None:
        """Stop now without a final result; the un-checkpointed round is redone elsewhere."""
        if self._move(AgentPhase.GIVING_BACK):
            self._stop_now()

    def give_back_parked(self) -> bool:
        """Stop an agent parked between rounds without resuming it, as a resumed one would stop
        (no more reads, no round, no report), leaving to its host what it would do on the bus:
        a stopping worker hands back the inboxes and requests of all its idle agents at once.
        False, with nothing changed, when it must be resumed to stop: its lease was lost, or a
        cancel asked while parked owes the lead a report."""
        if self._cancel_asked or self._ahead:
            return False
        return self._move(AgentPhase.GIVEN_BACK)

    def lose_lease(self) -> None:
        """Another worker took the agent over (our lease lapsed): stop now, report nothing."""
        if self._move(AgentPhase.LOST):
            self._stop_now()

    def cancel(self) -> None:
        """Stop now and report ``cancelled`` to the lead (once started: the report needs the
        restored state). A parked agent stops once resumed (its host resumes it)."""
        self._cancel_asked = True
        if self._scope is not None:
            self._scope.cancel()

    def _stop_now(self) -> None:
        if self._scope is not None:
            self._scope.cancel()
        if self._starting is not None:
            self._starting.cancel()

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
        self._parks = park
        return await self._guarded(self._start_then_loop(announce))

    async def resume(self) -> _Left:
        """Go on after :meth:`run` (or this) returned :data:`PARKED`; returns as :meth:`run`."""
        return await self._guarded(self._segment())

    async def _guarded(self, step: Awaitable[Outcome | _Ended | Parked | None]) -> _Left:
        """Run ``step`` in the agent's logging context; report (or give back) what it ends in."""
        enter_agent(self._context())
        outcome: Outcome | _Ended | Parked | None
        try:
            outcome = await step
        except LostOwnership as exc:
            log.warning("%s", exc)
            self._move(AgentPhase.LOST)
            outcome = None
        except anyio.get_cancelled_exc_class():
            if not self._phase.without_report:
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
            self._move(AgentPhase.GIVEN_BACK)  # unless lost: then there is nothing to give
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
                self._exited(final.reason)
                return _Ended(final.reason)
            return _Ended(final.reason if await self._deliver(final) else None)  # deliver, once
        return await self._segment()

    async def _segment(self) -> Outcome | Parked | None:
        """Rounds until the agent leaves, parks, or is stopped, under a cancel scope of its own
        (a scope serves one ``with``: each stretch between parks gets one)."""
        scope = self._scope = anyio.CancelScope()
        if self._phase.without_report or self._cancel_asked:  # asked while it was parked
            scope.cancel()
        outcome: Outcome | Parked | None = None
        try:
            with scope:
                outcome = await self._loop()
        finally:
            self._scope = None
        if scope.cancelled_caught:
            return None if self._phase.without_report else Outcome("cancelled")
        return outcome

    async def _loop(self) -> Outcome | Parked | None:
        """Rounds until the agent leaves (its outcome) or is stopped unfinished (None)."""
        limits = self.profile.limits
        if (ending := self.state.ending) is not None:  # resumed after the round that ended it
            return Outcome(ending, self.state.error)
        while self.state.step < limits.max_steps:
            batch = await self._next_batch()
            if batch is PARKED:
                return PARKED
            if batch is None:
                return None if self._phase.stopping_unfinished else Outcome("idle")
            self.telemetry.woke(self.profile.name, batch)
            if any(envelope.type == "shutdown" for envelope in batch):
                return Outcome("shutdown")
            if self.on_round is not None:
                self.on_round(self, batch)
            await self._report(self._describe_round(batch))
            outcome = await self._round(batch)
            if outcome is not None:
                return outcome
            if self._phase.stopping_unfinished:
                return None
        return Outcome("max_steps")

    async def _next_batch(self) -> list[Envelope] | Parked | None:
        """New messages, waiting up to the idle timeout; None when idle or draining; PARKED
        where it would wait, when it parks (the idle deadline then holds across resumes)."""
        if self._idle_deadline is None:
            self._idle_deadline = anyio.current_time() + self.profile.limits.idle_timeout_s
        deadline = self._idle_deadline
        # Wake-ups are hints: look again at least once a minute (docs/protocol.md), and a
        # resumed agent at least once a lease, since its un-acked messages come back only once
        # the dead owner's lease expires, with no wake-up.
        slice_s = self.look_s
        batch, self._ahead = self._ahead, []  # read during the last round, still un-acked
        if batch:
            self._idle_deadline = None
            # Already read and handed out, so they are the next round as they are: a read first
            # could fail until the idle deadline, and the agent would leave "idle" and ack them
            # unprocessed on its way out. What arrives meanwhile is the round after.
            return None if self._phase.stopping_unfinished else batch

        async def take(fresh: list[Envelope]) -> bool:
            batch.extend(fresh)  # ids already in the checkpoint were acked by the reader
            return bool(batch)

        ending = await self.inbox.collect(
            take,
            deadline=deadline,
            slice_s=slice_s,
            stop=lambda: self._phase.stopping_unfinished,
            park=self._parks,
        )
        if ending == "parked":
            self.wake_at = min(deadline, anyio.current_time() + slice_s)
            return PARKED
        self._idle_deadline = None
        return batch if ending == "taken" else None

    async def _round(self, batch: Sequence[Envelope]) -> Outcome | None:
        """One engine turn on the batch; checkpoint and ack unless the model failed. Returns how
        the round ends the agent (also checkpointed: see :attr:`Checkpoint.ending`), or None
        when it waits for the next batch."""
        memory = cast(list[Message], self.state.memory)
        if not memory:
            memory.append({"role": "system", "content": self.profile.system_prompt})
        memory.append({"role": "user", "content": format_inbox(batch)})
        trace = trace_of(batch, self._trace)
        engine: TurnRunner
        if self.remote is not None:
            engine = self.remote(self._remote_round(batch, trace))
        else:
            engine = AgentLoop(
                self.model,
                self.tools,
                session=self.session,
                agent=self.name,
                limits=self.profile.limits.loop,
                events=self._forward,
                telemetry=self.telemetry,
                tool_choice=self.profile.tool_choice,
                spend=self.spend,
                channel=self._channel(),
                trace=trace,
            )
        result = await self._run_turn(engine, memory)
        self._trace = self._trace or engine.trace
        self.state.last_text = result.text or self.state.last_text
        self.state.tool_errors = list(result.tool_errors)
        self.state.reply_to = batch[-1].id
        if self._shut_down and result.stop is StopReason.CANCELLED:
            outcome: Outcome | None = Outcome("shutdown")  # read mid-round; acked with the rest
        else:
            outcome = _outcome_of(result)
        if result.stop is StopReason.TRUNCATED and outcome is not None:
            if outcome.reason == "finished":  # media made; only the words about them ran away
                self.state.last_text = _made_then_cut(result.media_urls)
        if result.stop is StopReason.ERROR:
            return outcome  # not checkpointed: the batch goes back unacked with the report
        if outcome is not None:
            self.state.ending, self.state.error = outcome.reason, outcome.error
        await self._books.complete_round([envelope.id for envelope in batch])
        return outcome

    def _channel(self) -> InteractionChannel:
        """The session's policy decides approvals at once; under ``ask`` they are asked over the
        bus, as questions for files and images always are, so ``baton approve``/``baton
        upload``, the HTTP API or a Session in another process can answer them."""
        asks = BusInteractionChannel(
            self.bus, self.session, self.name, file_root=directory_of(self.media, self.media_dir)
        )
        return policy_channel(self.approve, asks) or asks

    def _remote_round(self, batch: Sequence[Envelope], trace: TraceContext | None) -> RemoteRound:
        return RemoteRound(
            session=self.session,
            agent=self.name,
            batch=batch,
            trace=trace,
            limits=self.profile.limits.loop,
            telemetry=self.telemetry,
            report=self._report,
            emit=self._forward,
            channel=self._channel(),
            media=self._context().media_store(),
        )

    async def _run_turn(self, engine: TurnRunner, memory: list[Message]) -> TurnResult:
        """Run the turn in a shielded child task, so that a cancellation from outside becomes
        the turn's ``cancel()``: the turn then ends cleanly and its media are still counted.
        Meanwhile a :class:`RoundWatch` reads the inbox when woken, and a ``shutdown`` there
        cancels the turn the same way."""
        turn = engine.new_turn()  # made first, so a cancel before the turn starts still counts
        watch = RoundWatch(self.inbox)
        box: list[TurnResult] = []
        done = anyio.Event()
        self.busy = True

        async def run() -> None:
            try:
                with shielded():  # a stopping worker's deadline still cuts it
                    result = await engine.run_turn(memory, turn=turn)
                    media = [*self.state.media, *result.media_urls]
                    self.state.media = list(dict.fromkeys(media))
                    box.append(result)
            finally:
                watch.end()
                done.set()

        try:
            async with anyio.create_task_group() as group:
                group.start_soon(run)
                group.start_soon(watch.watch, turn.cancel)
                try:
                    await done.wait()
                except anyio.get_cancelled_exc_class():
                    turn.cancel()
                    raise
        finally:  # kept even when cancelled: what was read stays pending, acked or given back
            self.busy = False
            self._ahead.extend(watch.ahead)
            self._shut_down = watch.shutdown
        return box[0]

    # -- the bookkeeping ------------------------------------------------------------------------

    async def _start(self, announce: Event | None) -> Restored | None:
        """Emit ``announce`` and restore; None when a give-back or a lost lease cut it short
        (both retry through bus faults, so an outage could hold a stopping worker)."""
        with anyio.CancelScope() as self._starting:
            try:
                if self._phase.without_report:  # given back before it started
                    self._starting.cancel()
                if announce is not None:
                    await persist(partial(self.bus.log.emit, announce), "announce")
                restored = await self._books.restore()
                if self.spend is None:
                    self.spend = await self._session_budget()
                return restored
            finally:
                self._starting = None
        return None

    async def _finish(self, outcome: Outcome) -> bool:
        """Report ``outcome`` (shielded and bounded); whether it was delivered. If not (taken
        over, or the bus stayed down), the spawn request must go back so another worker
        delivers the recorded report from the ``finishing`` state."""
        return self._settle(await self._books.finish(outcome), outcome.reason)

    async def _deliver(self, final: FinalReport) -> bool:
        """Deliver a report a previous owner decided; whether it was delivered."""
        return self._settle(await self._books.deliver(final), final.reason)

    def _settle(self, delivery: Delivery, reason: ExitKind) -> bool:
        """Move to where the final bookkeeping left the agent; whether the report is out."""
        if delivery is Delivery.DELIVERED:
            self._exited(reason)
            return True
        self._move(AgentPhase.LOST if delivery is Delivery.LOST else AgentPhase.GIVEN_BACK)
        return False

    def _exited(self, reason: ExitKind) -> None:
        """The final report is out (sent now, or by a previous owner): whatever was asked
        meanwhile, the agent has exited."""
        self._reason = reason
        self._move(AgentPhase.EXITED)

    async def _session_budget(self) -> Spend | None:
        """The session's budget on the bus when it has caps; None when it has none (then no
        call is counted: the budget events would only say "no cap")."""
        totals = await persist(partial(self.bus.budget.totals, self.session), "read the budget")
        return None if totals.limits.unlimited else BusSpend(self.bus, self.session)

    # -- talking to the lead --------------------------------------------------------------------

    def _context(self) -> AgentContext:
        return AgentContext(
            session=self.session,
            agent=self.name,
            lead=self.lead,
            media_dir=self.media_dir,
            report=self._report,
            record_result=self._books.record_result,
            media=self.media,
            images=self.images,
        )

    async def _report(self, content: str) -> None:
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

    async def _forward(self, event: Event) -> None:
        """Engine events go to the session log, except text deltas (progress says enough)."""
        if not isinstance(event, TextDelta):
            await persist(lambda: self.bus.log.emit(event), "engine event")

    def _describe_round(self, batch: Sequence[Envelope]) -> str:
        first = " ".join(batch[0].content.split())[:120]
        count = len(batch)
        plural = "" if count == 1 else "s"
        return f"round {self.state.step + 1}: received {count} message{plural}: {first}"


_ENDED_BY_ERROR = {
    StopReason.TRUNCATED: "its reply was cut at the length limit twice",
    StopReason.BLOCKED: "every tool call was blocked two rounds in a row",
}


def _made_then_cut(media: Sequence[str]) -> str:
    return (
        f"Made {len(media)} media file(s) (below); the reply about them was then cut at the "
        "length limit twice, so there is no description."
    )


def _outcome_of(result: TurnResult) -> Outcome | None:
    """How a round's stop ends the agent; None when it waits for the next batch. A round cut at
    the length limit twice after its tools made media finishes with them (a 1.5B painter drew the
    lighthouse, then its result text ran away): the work is there, only its summary is not."""
    stop = result.stop
    if stop is StopReason.TRUNCATED and result.media_urls:
        return Outcome("finished")
    if stop is StopReason.ERROR:
        return Outcome("error", str(result.error) if result.error is not None else "model error")
    if stop in _ENDED_BY_ERROR:
        return Outcome("error", str(result.error or _ENDED_BY_ERROR[stop]))
    if stop is StopReason.BUDGET:
        return Outcome("budget")
    if stop is StopReason.CANCELLED:
        return Outcome("cancelled")
    if stop is StopReason.HARD_STOP:
        return Outcome("round_limit")
    if stop is StopReason.TERMINAL or (stop is StopReason.ANSWERED and result.rounds == 0):
        return Outcome("finished")
    return None
