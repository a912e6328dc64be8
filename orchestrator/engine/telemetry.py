"""Counters and spans of the engine, through the OpenTelemetry API when it is installed.

OpenTelemetry is an optional dependency: it is imported lazily, and without it every call here is a
no-op. With the API but no SDK configured, the API's own no-op providers apply. Tests and embedders
pass their own ``MeterProvider`` / ``TracerProvider`` instead of touching global state.

- ``chat.tool.loop`` (attribute ``outcome``): how often each guard fired. The round verdicts
  (``wrap-up``, ``hard-stop``) count once per round, ``cancelled`` once per cancelled turn, and the
  per-call guards (``repeated``, ``declined-repeat``, ``interaction-budget``) once per call.
- ``hitl.decision`` (attributes ``outcome`` = approved / declined / ask-failed, ``side``): one per
  gated call.
- spans ``invoke_agent {agent}`` around a turn and ``execute_tool {tool}`` around each tool run,
  with GenAI semantic-convention attributes.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Literal, Protocol

if TYPE_CHECKING:
    from opentelemetry.metrics import Counter, MeterProvider
    from opentelemetry.trace import Span, Tracer, TracerProvider

log = logging.getLogger(__name__)

LoopOutcome = Literal[
    "wrap-up",
    "hard-stop",
    "cancelled",
    "repeated",
    "declined-repeat",
    "interaction-budget",
    "blocked-rounds",
    "length",
    "runaway",
    "budget",
]
HitlOutcome = Literal["approved", "declined", "ask-failed"]

_SCOPE = "baton.engine"


class SpanHandle(Protocol):
    """What engine code may do with an open span."""

    def fail(self, error_type: str) -> None: ...

    def set(self, key: str, value: str | int | bool) -> None: ...


class _NoSpan:
    __slots__ = ()

    def fail(self, error_type: str) -> None:
        return None

    def set(self, key: str, value: str | int | bool) -> None:
        return None


_NO_SPAN = _NoSpan()


class _OtelSpan:
    __slots__ = ("_span",)

    def __init__(self, span: Span) -> None:
        self._span = span

    def fail(self, error_type: str) -> None:
        from opentelemetry.trace import Status, StatusCode

        self._span.set_attribute("error.type", error_type)
        self._span.set_status(Status(StatusCode.ERROR, error_type))

    def set(self, key: str, value: str | int | bool) -> None:
        self._span.set_attribute(key, value)


class Telemetry:
    """The engine's instruments; one per loop (cheap) or shared."""

    __slots__ = ("_hitl", "_loop", "_tracer", "_tracer_provider", "provider_name")

    def __init__(
        self,
        *,
        meter_provider: MeterProvider | None = None,
        tracer_provider: TracerProvider | None = None,
        provider_name: str = "openai",
    ) -> None:
        self.provider_name = provider_name
        self._loop: Counter | None = None
        self._hitl: Counter | None = None
        self._tracer: Tracer | None = None
        self._tracer_provider = tracer_provider
        try:
            from opentelemetry import metrics
        except ImportError:  # the optional dependency is absent: stay a no-op
            log.debug("opentelemetry is not installed; engine telemetry is off")
            return
        meter = (meter_provider or metrics.get_meter_provider()).get_meter(_SCOPE)
        self._loop = meter.create_counter(
            "chat.tool.loop", unit="{guard}", description="Tool-loop guards that fired, by outcome"
        )
        self._hitl = meter.create_counter(
            "hitl.decision", unit="{call}", description="Human approval decisions, by outcome"
        )
        if tracer_provider is not None:
            self._tracer = tracer_provider.get_tracer(_SCOPE)

    def _current_tracer(self) -> Tracer | None:
        """The tracer to use now: the given provider's, else the global one's once an SDK is set.

        The API's default proxy provider only ever yields no-op spans, and going through it costs
        ~17 µs a span, so spans are skipped while it is what the global provider is.
        """
        if self._tracer is not None or self._tracer_provider is not None or self._loop is None:
            return self._tracer
        from opentelemetry import trace

        provider = trace.get_tracer_provider()
        if isinstance(provider, trace.ProxyTracerProvider):
            return None
        self._tracer = provider.get_tracer(_SCOPE)
        return self._tracer

    def loop_outcome(self, outcome: LoopOutcome, amount: int = 1) -> None:
        if self._loop is not None and amount:
            self._loop.add(amount, {"outcome": outcome})

    def hitl_decision(self, outcome: HitlOutcome, side: str = "chat", amount: int = 1) -> None:
        if self._hitl is not None and amount:
            self._hitl.add(amount, {"outcome": outcome, "side": side})

    @contextmanager
    def agent_span(self, agent: str, model: str, session: str) -> Iterator[SpanHandle]:
        """``invoke_agent`` around one turn (GenAI semantic conventions)."""
        tracer = self._current_tracer()
        if tracer is None:
            yield _NO_SPAN
            return
        attributes: dict[str, str] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": agent,
            "gen_ai.request.model": model,
            "gen_ai.provider.name": self.provider_name,
            "gen_ai.conversation.id": session,
        }
        with tracer.start_as_current_span(f"invoke_agent {agent}", attributes=attributes) as span:
            yield _OtelSpan(span)

    @contextmanager
    def tool_span(self, tool: str, call_id: str) -> Iterator[SpanHandle]:
        """``execute_tool`` around one tool run (GenAI semantic conventions)."""
        tracer = self._current_tracer()
        if tracer is None:
            yield _NO_SPAN
            return
        attributes: dict[str, str] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": tool,
            "gen_ai.tool.call.id": call_id,
            "gen_ai.tool.type": "function",
        }
        with tracer.start_as_current_span(f"execute_tool {tool}", attributes=attributes) as span:
            yield _OtelSpan(span)
