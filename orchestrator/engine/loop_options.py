"""What an agent loop is built from besides its model, its tools and whose it is: its settings
(:class:`LoopOptions`) and its live parts (:class:`LoopParts`).

Two groups, so that the loop's constructor stays short and each group says what it is, as the
lead's do (:mod:`baton.lead.options`): the options are plain values (how many rounds, which tool
choice, how many tokens, which trace), the parts are objects of the process (where events go, the
channel to a person, telemetry, the session's budget, the call rewriter, the image resolver).
"""

from __future__ import annotations

from dataclasses import dataclass

from baton.bus.messages import TraceContext
from baton.engine.budget import TokenBudget
from baton.engine.calls import EventSink, ImageResolver
from baton.engine.interaction import InteractionChannel
from baton.engine.reply_calls import CallRewriter
from baton.engine.spend import Spend
from baton.engine.telemetry import Telemetry
from baton.engine.turn import LoopLimits
from baton.llm.types import ToolChoice


@dataclass(frozen=True, slots=True)
class LoopOptions:
    """A loop's settings.

    ``limits`` bound each turn (None: :class:`LoopLimits`' defaults); ``tool_choice`` is sent
    with every request that offers tools (small local models call tools reliably only when asked
    for ``"required"``); ``token_budget`` fits the history to the model's context before each
    request (None: sent as it is); ``trace`` is the trace context its turns continue (what woke a
    sub-agent; None: its first turn's own, so every later turn of a long-lived loop stays in one
    trace).
    """

    limits: LoopLimits | None = None
    tool_choice: ToolChoice | None = None
    token_budget: TokenBudget | None = None
    trace: TraceContext | None = None


@dataclass(frozen=True, slots=True)
class LoopParts:
    """A loop's live parts: where its ``events`` go, the ``channel`` to a person (approvals,
    files, images), its ``telemetry`` (None: its own), the session's shared budget (``spend``,
    asked before every request), the ``call_rewriter`` (maps each call — native or written as
    text — before the round runs and the history records it) and the ``image_resolver`` (makes
    an image a tool returned something the model can see)."""

    events: EventSink | None = None
    channel: InteractionChannel | None = None
    telemetry: Telemetry | None = None
    spend: Spend | None = None
    call_rewriter: CallRewriter | None = None
    image_resolver: ImageResolver | None = None


DEFAULT_OPTIONS = LoopOptions()
NO_PARTS = LoopParts()
