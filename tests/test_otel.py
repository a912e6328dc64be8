"""One trace per session: the trace context in the envelope, the spans and metrics around it, and
which ``OTEL_*`` variables turn export on (the export itself: tests/cli/test_trace.py)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from opentelemetry.sdk.metrics.export import HistogramDataPoint
from opentelemetry.sdk.trace import ReadableSpan

from baton.bus.errors import InvalidEnvelope
from baton.bus.messages import (
    Envelope,
    SpawnRequest,
    TraceContext,
    make_envelope,
    parse_envelope,
    parse_spawn_request,
)
from baton.cli.otel import exporters_wanted
from baton.engine import tool
from baton.engine.telemetry import current_trace, trace_of
from baton.llm.script import Call, server_error, text, tool_calls
from tests.engine.helpers import Observed, harness, user

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{PARENT_ID}-01"


@tool
def paint(subject: str) -> str:
    """Paints the subject."""
    return f"painted {subject}"


def envelope(**fields: Any) -> Envelope:
    return make_envelope(session="s", sender="lead", recipient="painter", type="task", **fields)


def by_name(spans: Any) -> dict[str, ReadableSpan]:
    return {span.name: span for span in spans}


def histogram(observed: Observed, name: str, attribute: str) -> dict[str, tuple[int, float]]:
    """(count, sum) of histogram ``name`` by the value of ``attribute``."""
    found: dict[str, tuple[int, float]] = {}
    data = observed.reader.get_metrics_data()
    assert data is not None
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name != name:
                    continue
                for point in metric.data.data_points:
                    assert isinstance(point, HistogramDataPoint)
                    key = str((point.attributes or {}).get(attribute))
                    found[key] = (point.count, point.sum)
    return found


# -- the envelope field -------------------------------------------------------------------------


def test_an_untraced_message_is_written_as_before_the_field_existed() -> None:
    raw = envelope(content="paint a fox").to_json()
    assert "trace" not in json.loads(raw)  # an older reader refuses unknown fields
    request = SpawnRequest(session="s", agent="painter", profile="painter")
    assert "trace" not in json.loads(request.model_dump_json())
    assert parse_envelope(raw).trace is None


def test_a_trace_context_travels_in_envelopes_and_spawn_requests() -> None:
    trace = TraceContext(traceparent=TRACEPARENT, tracestate="vendor=1")
    raw = envelope(content="paint a fox", trace=trace).to_json()
    assert json.loads(raw)["trace"] == {"traceparent": TRACEPARENT, "tracestate": "vendor=1"}
    assert parse_envelope(raw).trace == trace
    request = SpawnRequest(session="s", agent="painter", profile="painter", trace=trace)
    assert parse_spawn_request(request.model_dump_json()).trace == trace


def test_a_trace_of_the_wrong_shape_is_refused_with_the_field_named() -> None:
    raw = json.loads(envelope(content="x").to_json())
    raw["trace"] = {"traceparent": 42}
    with pytest.raises(InvalidEnvelope, match=r"trace\.traceparent"):
        parse_envelope(json.dumps(raw))
    raw["trace"] = {"traceparent": "x" * 300}
    with pytest.raises(InvalidEnvelope, match=r"trace\.traceparent"):
        parse_envelope(json.dumps(raw))


def test_a_round_continues_the_newest_traced_message_else_the_spawn_requests() -> None:
    spawn = TraceContext(traceparent=TRACEPARENT)
    newer = TraceContext(traceparent=f"00-{TRACE_ID}-{'1' * 16}-01")
    person = envelope(content="from a person")
    assert trace_of([person], spawn) == spawn
    assert trace_of([envelope(trace=newer), person], spawn) == newer
    assert trace_of([], None) is None


# -- spans ----------------------------------------------------------------------------------------


async def test_a_turn_is_a_child_of_the_trace_it_is_given_with_chat_and_tool_spans_below() -> None:
    script = [tool_calls(Call("paint", '{"subject": "fox"}', id="c1")), text("done")]
    parent = TraceContext(traceparent=TRACEPARENT)
    async with harness(script, [paint], trace=parent) as h:
        await h.loop.run_turn(user("paint a fox"))
        spans = h.observed.spans()
        tokens = histogram(h.observed, "gen_ai.client.token.usage", "gen_ai.token.type")
    named = by_name(spans)
    agent = named["invoke_agent tester"]
    assert agent.parent is not None and agent.parent.is_remote
    assert format(agent.parent.span_id, "016x") == PARENT_ID
    assert {format(span.context.trace_id, "032x") for span in spans} == {TRACE_ID}
    assert agent.attributes is not None and agent.attributes["gen_ai.conversation.id"] == "s1"
    chats = [span for span in spans if span.name == "chat scripted"]
    assert len(chats) == 2
    for chat in chats:
        assert chat.kind.name == "CLIENT"
        assert chat.parent is not None and chat.parent.span_id == agent.context.span_id
        assert chat.attributes is not None
        assert chat.attributes["gen_ai.request.model"] == "scripted"
        assert int(str(chat.attributes["gen_ai.usage.input_tokens"])) > 0
        assert int(str(chat.attributes["gen_ai.usage.output_tokens"])) > 0
    paint_span = named["execute_tool paint"]
    assert (
        paint_span.attributes is not None and paint_span.attributes["gen_ai.tool.call.id"] == "c1"
    )
    assert tokens["input"][0] == 2 and tokens["input"][1] > 0  # one per reply, per type
    assert tokens["output"][0] == 2 and tokens["output"][1] > 0


async def test_a_traceparent_that_does_not_parse_starts_a_trace_of_its_own() -> None:
    async with harness([text("hi")], trace=TraceContext(traceparent="not-a-traceparent")) as h:
        result = await h.loop.run_turn(user("hi"))
        agent = by_name(h.observed.spans())["invoke_agent tester"]
    assert result.text == "hi"  # the message's work is done all the same
    assert agent.parent is None


async def test_later_turns_of_a_loop_stay_in_its_first_turns_trace() -> None:
    async with harness([text("one"), text("two")]) as h:
        await h.loop.run_turn(user("first"))
        await h.loop.run_turn(user("second"))
        first, second = (s for s in h.observed.spans() if s.name == "invoke_agent tester")
    assert first.parent is None
    assert second.parent is not None and second.parent.span_id == first.context.span_id
    assert second.context.trace_id == first.context.trace_id


async def test_a_failed_model_request_marks_its_chat_span_with_the_error_type() -> None:
    async with harness([server_error(400)]) as h:
        result = await h.loop.run_turn(user("hi"))
        chat = by_name(h.observed.spans())["chat scripted"]
    assert result.error is not None
    assert chat.attributes is not None and chat.attributes["error.type"]


def test_what_the_lead_sends_inside_a_client_span_carries_that_span() -> None:
    observed = Observed()
    with observed.telemetry.delegate_span("painter", "s", "task") as span:
        carried = current_trace()
        assert carried is not None and carried == span.trace()
    assert current_trace() is None  # outside any span: nothing is traced
    (client,) = observed.spans()
    assert client.kind.name == "CLIENT" and client.name == "invoke_agent painter"
    assert carried.traceparent.split("-")[2] == format(client.context.span_id, "016x")
    observed.shutdown()


# -- metrics --------------------------------------------------------------------------------------


class Hosting:
    """A worker as the gauge sees it."""

    name = "w1"

    def agent_counts(self) -> tuple[int, int]:
        return 2, 3


def test_inbox_depth_wake_latency_and_agents_per_worker_are_measured() -> None:
    observed = Observed()
    old = envelope(content="a", created_at=datetime.now(UTC) - timedelta(seconds=5))
    naive = envelope(content="b", created_at=datetime.now(UTC).replace(tzinfo=None))
    observed.telemetry.woke("painter", [old, naive])
    hosting = Hosting()
    observed.telemetry.watch_agents(hosting)
    depth = histogram(observed, "baton.inbox.depth", "baton.profile")
    waited = histogram(observed, "baton.wake.latency", "baton.profile")
    agents = observed.counts("baton.worker.agents", "state")
    assert depth == {"painter": (1, 2)}
    assert waited["painter"][0] == 1 and 5 <= waited["painter"][1] < 60  # the oldest's wait
    assert agents == {"running": 2, "idle": 3}
    observed.shutdown()


# -- which variables turn export on ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("environ", "traces", "metrics"),
    [
        ({}, [], []),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, ["otlp"], ["otlp"]),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://h/v1/traces"}, ["otlp"], []),
        (
            {"OTEL_TRACES_EXPORTER": "console,otlp", "OTEL_METRICS_EXPORTER": "none"},
            ["console", "otlp"],
            [],
        ),
        (
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://h", "OTEL_METRICS_EXPORTER": "none"},
            ["otlp"],
            [],
        ),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://h", "OTEL_SDK_DISABLED": "true"}, [], []),
        (
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://h", "OTEL_TRACES_EXPORTER": ""},
            ["otlp"],
            ["otlp"],
        ),
    ],
)
def test_the_standard_variables_decide_what_is_exported(
    environ: dict[str, str], traces: list[str], metrics: list[str]
) -> None:
    assert exporters_wanted("traces", environ) == traces
    assert exporters_wanted("metrics", environ) == metrics
