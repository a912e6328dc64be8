"""One round of a sub-agent: its batch turned into one engine turn (or one relayed to a remote
agent), run while the inbox is watched, and folded into the agent's checkpoint.

A round lives only while it runs: what must outlive it (the memory, the media, the step) is the
agent's checkpoint, and what it read ahead is handed back to the agent for the next round. So an
idle agent holds nothing of it (issue 24: memory per idle agent).

How a round ends the agent is decided here from the turn's stop (:func:`outcome_of`); the agent's
loop (:mod:`baton.subagents.loop`) decides what comes next.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, cast

import anyio

from baton.bus.events import Event
from baton.bus.interrupt import RoundWatch
from baton.bus.messages import Envelope, TraceContext
from baton.engine import (
    AgentLoop,
    AgentTurn,
    InteractionChannel,
    LoopLimits,
    StopReason,
    Telemetry,
    TurnResult,
)
from baton.engine.bus_channel import BusInteractionChannel
from baton.engine.channels import policy_channel
from baton.engine.loop_options import LoopOptions, LoopParts
from baton.llm.types import Message
from baton.media import MediaStore, directory_of
from baton.subagents.bookkeeping import Bookkeeper
from baton.subagents.phases import Outcome
from baton.subagents.state import format_inbox
from baton.subagents.stopping import shielded

if TYPE_CHECKING:
    from baton.subagents.loop import SubAgent


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


class Round:
    """One round of ``agent`` on ``batch``, in ``trace`` (the batch's, else the agent's).

    After :meth:`run`, however it ended: :attr:`ahead` holds what the inbox watch read meanwhile
    (the start of the next batch, still un-acked) and :attr:`runner_trace` the trace the turn
    ran in (an agent keeps its first round's for the rounds whose messages carry none)."""

    __slots__ = ("_agent", "_batch", "_runner", "_trace", "_watch")

    def __init__(
        self, agent: SubAgent, batch: Sequence[Envelope], trace: TraceContext | None
    ) -> None:
        self._agent = agent
        self._batch = batch
        self._trace = trace
        self._watch = RoundWatch(agent.inbox)
        self._runner: TurnRunner | None = None

    @property
    def ahead(self) -> list[Envelope]:
        return self._watch.ahead

    @property
    def runner_trace(self) -> TraceContext | None:
        return self._runner.trace if self._runner is not None else None

    async def run(self, books: Bookkeeper) -> Outcome | None:
        """The round: a ``shutdown`` in the batch ends the agent; else the lead is told of the
        round, then one engine turn on the batch, checkpointed and acked (through ``books``)
        unless the model failed. Returns how the round ends the agent (also checkpointed: see
        :attr:`Checkpoint.ending`), or None when it waits for the next batch."""
        agent, batch = self._agent, self._batch
        state = agent.state
        agent.telemetry.woke(agent.profile.name, batch)
        if any(envelope.type == "shutdown" for envelope in batch):
            return Outcome("shutdown")
        if agent.on_round is not None:
            agent.on_round(agent, batch)
        await agent.report(_describe_round(state.step, batch))
        memory = cast(list[Message], state.memory)
        if not memory:
            memory.append({"role": "system", "content": agent.profile.system_prompt})
        memory.append({"role": "user", "content": format_inbox(batch)})
        result = await self._run_turn(self._make_runner(), memory)
        state.last_text = result.text or state.last_text
        state.tool_errors = list(result.tool_errors)
        state.reply_to = batch[-1].id
        if self._watch.shutdown and result.stop is StopReason.CANCELLED:
            outcome: Outcome | None = Outcome("shutdown")  # read mid-round; acked with the rest
        else:
            outcome = outcome_of(result)
        if result.stop is StopReason.TRUNCATED and outcome is not None:
            if outcome.reason == "finished":  # media made; only the words about them ran away
                state.last_text = _made_then_cut(result.media_urls)
        if result.stop is StopReason.ERROR:
            return outcome  # not checkpointed: the batch goes back unacked with the report
        if outcome is not None:
            state.ending, state.error = outcome.reason, outcome.error
        await books.complete_round([envelope.id for envelope in batch])
        return outcome

    def _make_runner(self) -> TurnRunner:
        agent = self._agent
        runner: TurnRunner
        if agent.remote is not None:
            runner = agent.remote(self._remote_round())
        else:
            runner = AgentLoop(
                agent.model,
                agent.tools,
                session=agent.session,
                agent=agent.name,
                options=LoopOptions(
                    limits=agent.profile.limits.loop,
                    tool_choice=agent.profile.tool_choice,
                    trace=self._trace,
                ),
                parts=LoopParts(
                    events=agent.forward,
                    telemetry=agent.telemetry,
                    spend=agent.spend,
                    channel=self._channel(),
                ),
            )
        self._runner = runner
        return runner

    def _channel(self) -> InteractionChannel:
        """The session's policy decides approvals at once; under ``ask`` they are asked over the
        bus, as questions for files and images always are, so ``baton approve``/``baton
        upload``, the HTTP API or a Session in another process can answer them."""
        agent = self._agent
        file_root = directory_of(agent.media, agent.media_dir)
        asks = BusInteractionChannel(agent.bus, agent.session, agent.name, file_root=file_root)
        return policy_channel(agent.approve, asks) or asks

    def _remote_round(self) -> RemoteRound:
        agent = self._agent
        return RemoteRound(
            session=agent.session,
            agent=agent.name,
            batch=self._batch,
            trace=self._trace,
            limits=agent.profile.limits.loop,
            telemetry=agent.telemetry,
            report=agent.report,
            emit=agent.forward,
            channel=self._channel(),
            media=agent.context().media_store(),
        )

    async def _run_turn(self, engine: TurnRunner, memory: list[Message]) -> TurnResult:
        """Run the turn in a shielded child task, so that a cancellation from outside becomes
        the turn's ``cancel()``: the turn then ends cleanly and its media are still counted.
        Meanwhile a :class:`RoundWatch` reads the inbox when woken, and a ``shutdown`` there
        cancels the turn the same way."""
        agent = self._agent
        turn = engine.new_turn()  # made first, so a cancel before the turn starts still counts
        watch = self._watch
        box: list[TurnResult] = []
        done = anyio.Event()
        agent.busy = True

        async def run() -> None:
            try:
                with shielded():  # a stopping worker's deadline still cuts it
                    result = await engine.run_turn(memory, turn=turn)
                    media = [*agent.state.media, *result.media_urls]
                    agent.state.media = list(dict.fromkeys(media))
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
            agent.busy = False
        return box[0]


def _describe_round(step: int, batch: Sequence[Envelope]) -> str:
    first = " ".join(batch[0].content.split())[:120]
    count = len(batch)
    plural = "" if count == 1 else "s"
    return f"round {step + 1}: received {count} message{plural}: {first}"


_ENDED_BY_ERROR = {
    StopReason.TRUNCATED: "its reply was cut at the length limit twice",
    StopReason.BLOCKED: "every tool call was blocked two rounds in a row",
}


def _made_then_cut(media: Sequence[str]) -> str:
    return (
        f"Made {len(media)} media file(s) (below); the reply about them was then cut at the "
        "length limit twice, so there is no description."
    )


def outcome_of(result: TurnResult) -> Outcome | None:
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
