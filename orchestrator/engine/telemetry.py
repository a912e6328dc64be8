"""Counters, histograms and spans of the engine, through the OpenTelemetry API when it is installed.

OpenTelemetry is an optional dependency: it is imported lazily, and without it every call here is a
no-op. With the API but no SDK configured, the API's own no-op providers apply. Tests and
embedders pass their own ``MeterProvider`` / ``TracerProvider`` instead of touching global state;
the ``baton`` commands set the global ones up from the standard ``OTEL_*`` variables
(:mod:`baton.cli.otel`).

Metrics (instruments are made once per meter provider and shared by every :class:`Telemetry`):

- ``chat.tool.loop`` (attribute ``outcome``): how often each guard fired. The round verdicts
  (``wrap-up``, ``hard-stop``) count once per round, ``cancelled`` once per cancelled turn, and the
  per-call guards (``repeated``, ``declined-repeat``, ``interaction-budget``) once per call.
- ``hitl.decision`` (attributes ``outcome`` = approved / declined / ask-failed, ``side``,
  ``source`` = the tool's: ``python`` or ``mcp:<server>``): one per gated call.
- ``gen_ai.client.token.usage`` (GenAI semantic conventions; ``gen_ai.token.type`` = input /
  output, ``gen_ai.request.model``): the tokens of each model reply that reported usage.
- ``baton.inbox.depth`` and ``baton.wake.latency`` (attribute ``baton.profile``): how many
  messages a sub-agent found when it woke, and how long the oldest of them had waited (seconds).
- ``baton.worker.agents`` (attributes ``baton.worker``, ``state`` = running / idle): a gauge of
  the agents each worker hosts, running a round or waiting for mail.

Spans (GenAI semantic conventions; one trace per session, across processes):

- ``invoke_agent {agent}`` around one turn of an agent (kind INTERNAL), a child of the trace
  context it is given (what woke a sub-agent: :class:`~baton.bus.messages.TraceContext`) or else
  of the current one;
- ``invoke_agent {agent}`` of kind CLIENT around the lead's send to a sub-agent
  (:meth:`Telemetry.delegate_span`); what it sends carries its context (:func:`current_trace`), so
  the sub-agent's turns, in whichever worker runs them, are its children;
- ``chat {model}`` (kind CLIENT) around each model request, with the usage of its reply;
- ``execute_tool {tool}`` around each tool run.
"""

from __future__ import annotations

import importlib.util
import logging
import sys
import threading
import weakref
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Literal, Protocol

from baton.bus.messages import TraceContext

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.metrics import (
        CallbackOptions,
        Counter,
        Histogram,
        Meter,
        MeterProvider,
        Observation,
    )
    from opentelemetry.trace import Span, Tracer, TracerProvider

    from baton.bus.messages import Envelope
    from baton.llm.types import Usage

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


def _otel_installed() -> bool:
    """Whether the ``otel`` extra's API is there (optional: without it telemetry is a no-op).
    ``find_spec`` of a submodule imports its parent, and raises when the parent is missing."""
    try:
        found = importlib.util.find_spec("opentelemetry.trace") is not None
    except ModuleNotFoundError:
        found = False
    if not found:
        log.debug("opentelemetry is not installed; engine telemetry is off")
    return found


_INSTALLED = _otel_installed()
"""Looked up once (and without importing it): a failed import on every send would cost more
than the send."""


def _in_use(api: str) -> bool:
    """Whether the API's ``api`` module (``opentelemetry.metrics``, ``opentelemetry.trace``) has
    been imported by anyone: a provider can only have been set, or a span started, through it.
    Until then every instrument and span is a no-op, and the API is not imported here either (its
    import is a few per cent of a ``baton run``'s first token); checked at each use, so an API
    set up after a :class:`Telemetry` was made is still picked up."""
    return _INSTALLED and api in sys.modules


class AgentCounts(Protocol):
    """What a worker tells the ``baton.worker.agents`` gauge (read from the exporter's thread)."""

    name: str

    def agent_counts(self) -> tuple[int, int]:
        """(running a round, idle) agents now."""
        ...


class SpanHandle(Protocol):
    """What engine code may do with an open span."""

    def fail(self, error_type: str) -> None: ...

    def set(self, key: str, value: str | int | bool) -> None: ...

    def trace(self) -> TraceContext | None:
        """This span's context, for a message sent from inside it; None when not traced."""
        ...


class _NoSpan:
    __slots__ = ()

    def fail(self, error_type: str) -> None:
        return None

    def set(self, key: str, value: str | int | bool) -> None:
        return None

    def trace(self) -> TraceContext | None:
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

    def trace(self) -> TraceContext | None:
        from opentelemetry.trace import set_span_in_context

        return _inject(set_span_in_context(self._span))


def _inject(context: Context | None) -> TraceContext | None:
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    carrier: dict[str, str] = {}
    TraceContextTextMapPropagator().inject(carrier, context)
    traceparent = carrier.get("traceparent")
    if not traceparent:
        return None
    return TraceContext(traceparent=traceparent, tracestate=carrier.get("tracestate", ""))


def _extract(trace: TraceContext) -> Context:
    """The context to start a child of ``trace`` in: an empty one (a new trace) when it does
    not parse, never the current one (that would hang the turn under an unrelated span)."""
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    carrier = {"traceparent": trace.traceparent}
    if trace.tracestate:
        carrier["tracestate"] = trace.tracestate
    return TraceContextTextMapPropagator().extract(carrier)


def current_trace() -> TraceContext | None:
    """The W3C trace context of the current span, for the envelope or spawn request about to be
    sent; None when nothing is traced (the message then goes out exactly as before)."""
    if not _in_use("opentelemetry.trace"):
        return None
    from opentelemetry import trace

    if not trace.get_current_span().get_span_context().is_valid:
        return None
    return _inject(None)


def trace_of(batch: Sequence[Envelope], fallback: TraceContext | None) -> TraceContext | None:
    """The context a round on ``batch`` continues: the newest message's that has one, else
    ``fallback`` (the spawn request's: a person's message carries none)."""
    for envelope in reversed(batch):
        if envelope.trace is not None:
            return envelope.trace
    return fallback


def _aware(moment: datetime) -> datetime:
    """A producer may write ``created_at`` without an offset: the protocol's times are UTC."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


class _Instruments:
    """One meter provider's instruments, made once: the API's proxy provider keeps every
    instrument ever made, so making them per :class:`Telemetry` (one per loop) would grow it."""

    def __init__(self, meter: Meter) -> None:
        self.loop: Counter = meter.create_counter(
            "chat.tool.loop", unit="{guard}", description="Tool-loop guards that fired, by outcome"
        )
        self.hitl: Counter = meter.create_counter(
            "hitl.decision", unit="{call}", description="Human approval decisions, by outcome"
        )
        self.tokens: Histogram = meter.create_histogram(
            "gen_ai.client.token.usage", unit="{token}", description="Tokens of each model reply"
        )
        self.depth: Histogram = meter.create_histogram(
            "baton.inbox.depth", unit="{message}", description="Messages a sub-agent woke to"
        )
        self.wake: Histogram = meter.create_histogram(
            "baton.wake.latency",
            unit="s",
            description="How long the oldest message had waited when its agent woke to it",
        )
        self._sources: weakref.WeakSet[AgentCounts] = weakref.WeakSet()
        self._lock = threading.Lock()  # the gauge is read from the exporter's thread
        meter.create_observable_gauge(
            "baton.worker.agents",
            callbacks=[self._observe],
            unit="{agent}",
            description="Agents each worker hosts, by state (running a round, idle)",
        )

    def watch(self, source: AgentCounts) -> None:
        with self._lock:
            self._sources.add(source)

    def _observe(self, options: CallbackOptions) -> Iterable[Observation]:
        from opentelemetry.metrics import Observation

        with self._lock:
            sources = list(self._sources)
        observed: list[Observation] = []
        for source in sources:
            running, idle = source.agent_counts()
            observed.append(Observation(running, {"baton.worker": source.name, "state": "running"}))
            observed.append(Observation(idle, {"baton.worker": source.name, "state": "idle"}))
        return observed


_BY_PROVIDER: weakref.WeakKeyDictionary[MeterProvider, _Instruments] = weakref.WeakKeyDictionary()


def _instruments(provider: MeterProvider) -> _Instruments:
    made = _BY_PROVIDER.get(provider)
    if made is None:
        made = _BY_PROVIDER[provider] = _Instruments(provider.get_meter(_SCOPE))
    return made


class Telemetry:
    """The engine's instruments; one per loop (cheap) or shared."""

    __slots__ = ("_given", "_tracer", "_tracer_provider", "provider_name")

    def __init__(
        self,
        *,
        meter_provider: MeterProvider | None = None,
        tracer_provider: TracerProvider | None = None,
        provider_name: str = "openai",
    ) -> None:
        self.provider_name = provider_name
        self._given: _Instruments | None = None
        self._tracer: Tracer | None = None
        self._tracer_provider = tracer_provider
        if not _INSTALLED:
            return
        if meter_provider is not None:
            self._given = _instruments(meter_provider)
        if tracer_provider is not None:
            self._tracer = tracer_provider.get_tracer(_SCOPE)

    @property
    def _inst(self) -> _Instruments | None:
        """The given meter provider's instruments, else the global provider's once the metrics
        API is in use (:func:`_in_use`)."""
        if self._given is not None or not _in_use("opentelemetry.metrics"):
            return self._given
        from opentelemetry import metrics

        return _instruments(metrics.get_meter_provider())

    def _current_tracer(self) -> Tracer | None:
        """The tracer to use now: the given provider's, else the global one's once an SDK is set.

        The API's default proxy provider only ever yields no-op spans, and going through it costs
        ~17 µs a span, so spans are skipped while it is what the global provider is.
        """
        if self._tracer is not None or self._tracer_provider is not None:
            return self._tracer
        if not _in_use("opentelemetry.trace"):
            return None
        from opentelemetry import trace

        provider = trace.get_tracer_provider()
        if isinstance(provider, trace.ProxyTracerProvider):
            return None
        self._tracer = provider.get_tracer(_SCOPE)
        return self._tracer

    # -- metrics --------------------------------------------------------------------------------

    def loop_outcome(self, outcome: LoopOutcome, amount: int = 1) -> None:
        inst = self._inst
        if inst is not None and amount:
            inst.loop.add(amount, {"outcome": outcome})

    def hitl_decision(
        self, outcome: HitlOutcome, side: str = "chat", amount: int = 1, *, source: str = "python"
    ) -> None:
        inst = self._inst
        if inst is not None and amount:
            inst.hitl.add(amount, {"outcome": outcome, "side": side, "source": source})

    def woke(self, profile: str, batch: Sequence[Envelope]) -> None:
        """A sub-agent woke to ``batch``: its inbox depth and how long the oldest had waited."""
        inst = self._inst
        if inst is None or not batch:
            return
        attributes = {"baton.profile": profile}
        inst.depth.record(len(batch), attributes)
        now = datetime.now(UTC)
        waited = max(now - _aware(envelope.created_at) for envelope in batch).total_seconds()
        inst.wake.record(max(0.0, waited), attributes)

    def watch_agents(self, source: AgentCounts) -> None:
        """Report ``source``'s agents on the ``baton.worker.agents`` gauge while it lives."""
        inst = self._inst
        if inst is not None:
            inst.watch(source)

    def model_usage(self, span: SpanHandle, model: str, usage: Usage | None) -> None:
        """A model reply's usage (when the server sent one): on its ``chat`` span and the token
        histogram."""
        if usage is None:
            return
        input_tokens, output_tokens = usage.prompt_tokens, usage.completion_tokens
        span.set("gen_ai.usage.input_tokens", input_tokens)
        span.set("gen_ai.usage.output_tokens", output_tokens)
        inst = self._inst
        if inst is None:
            return
        base = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": self.provider_name,
            "gen_ai.request.model": model,
        }
        inst.tokens.record(input_tokens, {**base, "gen_ai.token.type": "input"})
        inst.tokens.record(output_tokens, {**base, "gen_ai.token.type": "output"})

    # -- spans ----------------------------------------------------------------------------------

    @contextmanager
    def agent_span(
        self, agent: str, model: str, session: str, *, parent: TraceContext | None = None
    ) -> Iterator[SpanHandle]:
        """``invoke_agent`` around one turn, a child of ``parent`` when given (what woke the
        agent, sent from another process perhaps), else of the current span."""
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
        context = _extract(parent) if parent is not None else None
        with tracer.start_as_current_span(
            f"invoke_agent {agent}", context=context, attributes=attributes
        ) as span:
            yield _OtelSpan(span)

    @contextmanager
    def delegate_span(self, agent: str, session: str, kind: str) -> Iterator[SpanHandle]:
        """``invoke_agent`` of kind CLIENT around a send to sub-agent ``agent``: what is sent
        inside it carries its context, so the agent's own turns are its children."""
        tracer = self._current_tracer()
        if tracer is None:
            yield _NO_SPAN
            return
        from opentelemetry.trace import SpanKind

        attributes: dict[str, str] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": agent,
            "gen_ai.conversation.id": session,
            "baton.message.type": kind,
        }
        with tracer.start_as_current_span(
            f"invoke_agent {agent}", kind=SpanKind.CLIENT, attributes=attributes
        ) as span:
            yield _OtelSpan(span)

    @contextmanager
    def chat_span(self, model: str) -> Iterator[SpanHandle]:
        """``chat {model}`` (kind CLIENT) around one model request, its retries included."""
        tracer = self._current_tracer()
        if tracer is None:
            yield _NO_SPAN
            return
        from opentelemetry.trace import SpanKind

        attributes: dict[str, str] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": model,
            "gen_ai.provider.name": self.provider_name,
        }
        with tracer.start_as_current_span(
            f"chat {model}", kind=SpanKind.CLIENT, attributes=attributes
        ) as span:
            handle = _OtelSpan(span)
            try:
                yield handle
            except Exception as exc:  # the request failed: say how (cancellation is no error)
                handle.fail(type(exc).__qualname__)
                raise

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
