"""The vocabulary of one tool round: a call on its way through governance, the answer it gets,
the context interceptors work in, and the interceptor interface itself.

An interceptor looks at the calls nobody has claimed yet and may claim some of them with an
:class:`Answer` keyed by tool call id; a claimed call never runs and later interceptors never see
it. Interceptors keep no state of their own: per-turn memory lives on the :class:`AgentTurn`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from baton.bus.events import Event, GuardFired
from baton.engine.interaction import InteractionChannel
from baton.engine.telemetry import LoopOutcome, Telemetry
from baton.engine.tools import Tool, ToolRegistry
from baton.engine.turn import AgentTurn, LoopLimits, Verdict
from baton.llm.types import Message, ToolCall

EventSink = Callable[[Event], Awaitable[None]]
"""Where the engine's events go (the lead and sub-agents forward them to the bus)."""

ImageResolver = Callable[[str], Awaitable[str | None]]
"""Turns an image reference the model gave (a name, an id) into a URL, or None if unknown."""


@dataclass(frozen=True, slots=True)
class Answer:
    """The result given to the model for one call, produced by a tool or by governance."""

    content: str
    media_urls: tuple[str, ...] = ()
    synthetic: bool = True
    """True when governance answered instead of the tool running."""
    is_error: bool = False
    terminal: bool = False
    """The call ran and ends the loop."""
    blocked: bool = False
    """A guard refused the call (or the tool did, with ``ToolResult(blocked=True)``); a round of
    only blocked calls counts towards the blocked-rounds stop."""
    ends_turn: bool = False
    """The tool asked for the turn to end after this round (``ToolResult(ends_turn=True)``)."""


@dataclass(slots=True)
class PendingCall:
    """A call the model made, with its tool resolved and arguments validated where possible."""

    index: int
    call: ToolCall
    tool: Tool | None
    args: dict[str, object] | None
    problem: str | None = None
    """The recovery hint when the tool is unknown or the arguments are invalid."""

    @property
    def id(self) -> str:
        return self.call.id

    @property
    def name(self) -> str:
        return self.call.name


@dataclass(slots=True)
class RoundContext:
    """Everything an interceptor may use in one round; built by the loop once per turn."""

    session: str
    agent: str
    turn: AgentTurn
    tools: ToolRegistry
    telemetry: Telemetry
    channel: InteractionChannel | None = None
    sink: EventSink | None = None
    image_resolver: ImageResolver | None = None
    verdict: Verdict = Verdict.CONTINUE
    media_seen: list[str] = field(default_factory=list)
    """Media URLs produced earlier this turn (an image reference may name one)."""
    followups: list[Message] = field(default_factory=list)
    """Messages to append after this round's tool results (e.g. an attached image)."""

    @property
    def limits(self) -> LoopLimits:
        return self.turn.limits

    async def emit(self, event: Event) -> None:
        if self.sink is not None:
            await self.sink(event)

    async def guard(
        self,
        outcome: LoopOutcome,
        call: PendingCall,
        content: str,
        *,
        count: bool = True,
        blocked: bool = True,
    ) -> Answer:
        """Answer a call on a guard's behalf: record it and say so to observers. ``blocked=False``
        for the round verdicts (wrap-up, hard stop, cancel): those end the turn on their own."""
        if count:
            self.telemetry.loop_outcome(outcome)
        await self.emit(
            GuardFired(
                session=self.session,
                agent=self.agent,
                outcome=outcome,
                call_id=call.id,
                tool=call.name,
            )
        )
        return Answer(content, blocked=blocked)


class Interceptor(Protocol):
    """One step of the chain. Returns the answers of the calls it claims, keyed by call id."""

    async def intercept(
        self, calls: Sequence[PendingCall], ctx: RoundContext
    ) -> dict[str, Answer]: ...
