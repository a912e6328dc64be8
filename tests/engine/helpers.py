"""Shared helpers for the engine tests: a loop wired to the scripted server over real HTTP.

Every loop test goes through the real ``openai`` client to the scripted OpenAI-compatible server on
a loopback socket, so the engine sees exactly what it would see from a real endpoint. A context
manager rather than a fixture because the loopback server owns a task group, which must be entered
and left in the same task.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, fields
from typing import Any, TypeVar

import anyio
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from baton.bus.events import Event
from baton.engine import AgentLoop, MemoryChannel, Question, QuestionClosed, Telemetry, Tool
from baton.engine.loop_options import LoopOptions, LoopParts
from baton.llm.client import ModelSettings, OpenAIChatModel
from baton.llm.script import Responder, ScriptItem
from baton.llm.scripted import RecordedRequest, ScriptedServer
from baton.llm.types import Message

E = TypeVar("E")


class EventLog:
    """An event sink that keeps every event, in order."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    async def __call__(self, event: Event) -> None:
        self.events.append(event)

    def of(self, kind: type[E]) -> list[E]:
        return [event for event in self.events if isinstance(event, kind)]

    @property
    def types(self) -> list[str]:
        return [event.type for event in self.events]


@dataclass
class Observed:
    """OpenTelemetry SDK providers with in-memory readers, private to one test."""

    reader: InMemoryMetricReader = field(default_factory=InMemoryMetricReader)
    exporter: InMemorySpanExporter = field(default_factory=InMemorySpanExporter)

    def __post_init__(self) -> None:
        self.meters = MeterProvider(metric_readers=[self.reader])
        self.tracers = TracerProvider()
        self.tracers.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.telemetry = Telemetry(meter_provider=self.meters, tracer_provider=self.tracers)

    def counts(self, name: str, attribute: str = "outcome") -> dict[str, int]:
        """Sum of counter ``name`` by the value of ``attribute``."""
        totals: dict[str, int] = {}
        data = self.reader.get_metrics_data()
        if data is None:
            return totals
        for resource in data.resource_metrics:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    if metric.name != name:
                        continue
                    for point in metric.data.data_points:
                        key = str(point.attributes.get(attribute)) if point.attributes else ""
                        totals[key] = totals.get(key, 0) + int(point.value)  # type: ignore[union-attr]
        return totals

    def spans(self) -> Sequence[ReadableSpan]:
        return self.exporter.get_finished_spans()

    def shutdown(self) -> None:
        self.meters.shutdown()
        self.tracers.shutdown()


@dataclass
class Harness:
    server: ScriptedServer
    loop: AgentLoop
    log: EventLog
    observed: Observed

    @property
    def requests(self) -> list[RecordedRequest]:
        return self.server.requests


def user(text: str, system: str = "You are a test agent.") -> list[Message]:
    return [{"role": "system", "content": system}, {"role": "user", "content": text}]


@asynccontextmanager
async def harness(
    script: Iterable[ScriptItem] = (),
    tools: Iterable[Tool] = (),
    *,
    responder: Responder | None = None,
    observed: Observed | None = None,
    retries: int = 0,
    **loop_options: Any,
) -> AsyncIterator[Harness]:
    """An ``AgentLoop`` whose model is the scripted server, reached over loopback HTTP
    (``retries``: the client's ``max_retries``, with no wait between attempts)."""
    server = ScriptedServer(script, responder=responder, record=True)
    observed = observed or Observed()
    log = EventLog()
    async with server.serve() as http:
        settings = ModelSettings(
            model="scripted",
            base_url=http.base_url,
            api_key="sk-test",
            max_retries=retries,
            backoff_initial=0.0,
        )
        async with OpenAIChatModel(settings) as model:
            given = {"events": log, "telemetry": observed.telemetry, **loop_options}
            named = {option.name for option in fields(LoopOptions)}
            loop = AgentLoop(
                model,
                tools,
                session="s1",
                agent="tester",
                options=LoopOptions(**{k: v for k, v in given.items() if k in named}),
                parts=LoopParts(**{k: v for k, v in given.items() if k not in named}),
            )
            try:
                yield Harness(server, loop, log, observed)
            finally:
                observed.shutdown()


def engine_tasks() -> list[asyncio.Task[Any]]:
    """Tasks still running engine code (a coroutine of a ``baton.engine`` module on their stack).

    Matched by the frame's module name, not its file name, so it holds whether baton is installed
    editable (``orchestrator/engine/...``) or not (``site-packages/baton/engine/...``).
    """
    found = []
    for task in asyncio.all_tasks():
        if task.done():
            continue
        coro: Any = task.get_coro()
        while coro is not None:
            frame = getattr(coro, "cr_frame", None) or getattr(coro, "gi_frame", None)
            module = frame.f_globals.get("__name__", "") if frame is not None else ""
            if module == "baton.engine" or module.startswith("baton.engine."):
                found.append(task)
                break
            coro = getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None)
    return found


def tool_messages(history: Sequence[Message]) -> dict[str, str]:
    """Tool results in the history, by call id."""
    out: dict[str, str] = {}
    for message in history:
        if message["role"] == "tool":
            content = message["content"]
            assert isinstance(content, str)
            out[message["tool_call_id"]] = content
    return out


Answerer = Callable[[MemoryChannel, Question], None]


class Human:
    """A person at the other end of a :class:`MemoryChannel`: records and answers questions."""

    def __init__(self, channel: MemoryChannel, answer: Answerer | None) -> None:
        self.channel = channel
        self.answer = answer
        self.questions: list[Question] = []
        self.closed: list[QuestionClosed] = []
        self.asked = anyio.Event()
        self._items = channel.listen()  # listening before the engine can ask

    async def run(self) -> None:
        with self._items as items:
            async for item in items:
                if isinstance(item, QuestionClosed):
                    self.closed.append(item)
                    continue
                self.questions.append(item)
                self.asked.set()
                if self.answer is not None:
                    self.answer(self.channel, item)


@asynccontextmanager
async def human(channel: MemoryChannel, answer: Answerer | None = None) -> AsyncIterator[Human]:
    """Run a :class:`Human` beside the test body; ``answer=None`` never answers."""
    person = Human(channel, answer)
    async with anyio.create_task_group() as group:
        group.start_soon(person.run)
        yield person
        group.cancel_scope.cancel()


def approve_all(channel: MemoryChannel, question: Question) -> None:
    channel.decide(question.id, True)


def decline_all(channel: MemoryChannel, question: Question) -> None:
    channel.decide(question.id, False, reason="no thanks")


def cancel_media(channel: MemoryChannel, question: Question) -> None:
    channel.provide(question.id, None)
