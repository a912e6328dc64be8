"""Benchmark of tracing's cost per agent round: spans exported over OTLP/HTTP vs tracing off.

Prints one JSON object:

- ``round_off_us``: one round (a turn of two streamed requests — a tool call, then the answer —
  plus the tool, as in ``benchmarks/loop.py``) with no OpenTelemetry SDK set up: baton's default;
- ``round_recorded_us``: the same with the SDK recording every span and metric, exporting nothing;
- ``round_exported_us``: the same with spans batched (``BatchSpanProcessor``) and sent over
  OTLP/HTTP to a receiver on loopback, and metrics exported every second, as ``baton`` sets it
  up from ``OTEL_EXPORTER_OTLP_ENDPOINT``;
- ``tracing_overhead_us_per_round`` (and ``_pct``): exported minus off — what turning export on
  costs a round (``recording_overhead_us_per_round``: recorded minus off);
- ``spans_per_round``: ``invoke_agent``, two ``chat``, one ``execute_tool``;
- ``trace_inject_us``: reading the current span's W3C context for an envelope (per message sent);
- ``export_requests`` / ``export_kib``: what the receiver got.

Medians over interleaved rounds, all three on the same in-process scripted model, so the
differences are tracing work (the exporter's thread competes for the GIL, as it would in a
``baton worker``). The receiver counts bytes and does not parse them. Run:
``.venv/bin/python benchmarks/tracing.py [--rounds N] [--smoke]`` (``--smoke``: 20 rounds, as CI
does, to prove it still works).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import anyio
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from baton.engine import AgentLoop, LoopParts, Telemetry, tool
from baton.engine.telemetry import current_trace
from baton.llm.client import ModelSettings, OpenAIChatModel
from baton.llm.script import Call, ScriptItem, text, tool_calls
from baton.llm.scripted import IN_PROCESS_URL, ScriptedServer
from baton.llm.types import Message
from baton.testing.otlp import OtlpReceiver

SPANS_PER_ROUND = 4


@tool
async def weather(city: str) -> str:
    """Current weather for a city."""
    return f"{city}: 18 degrees, light rain"


def respond(body: dict[str, Any]) -> ScriptItem:
    if body["messages"][-1]["role"] == "user":
        return tool_calls(Call("weather", '{"city": "Paris"}'))
    return text("It is 18 degrees and raining in Paris.")


def history() -> list[Message]:
    return [
        {"role": "system", "content": "You are a weather assistant."},
        {"role": "user", "content": "What is the weather in Paris?"},
    ]


async def timed(fn: Callable[[], Awaitable[object]]) -> float:
    start = time.perf_counter()
    await fn()
    return time.perf_counter() - start


class Exported:
    """SDK providers exporting to the receiver as ``baton.cli.otel`` would set them up."""

    def __init__(self, url: str) -> None:
        self.tracers = TracerProvider(shutdown_on_exit=False)
        self.tracers.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(f"{url}/v1/traces")))
        reader = PeriodicExportingMetricReader(
            OTLPMetricExporter(f"{url}/v1/metrics"), export_interval_millis=1000
        )
        self.meters = MeterProvider(metric_readers=[reader], shutdown_on_exit=False)

    def shutdown(self) -> None:
        self.tracers.shutdown()  # flushes what is batched
        self.meters.shutdown()


def inject_us(telemetry: Telemetry, samples: int) -> float:
    """Microseconds to read the current span's context for a message, inside a CLIENT span."""
    with telemetry.delegate_span("painter", "bench", "task"):
        assert current_trace() is not None
        start = time.perf_counter()
        for _ in range(samples):
            current_trace()
        return (time.perf_counter() - start) / samples * 1e6


async def main(rounds: int) -> dict[str, float]:
    server = ScriptedServer(responder=respond)
    settings = ModelSettings(model="scripted", base_url=IN_PROCESS_URL, api_key="sk-bench")
    with OtlpReceiver(decode=False) as receiver:
        exported = Exported(receiver.url)
        recorded = Telemetry(tracer_provider=TracerProvider(), meter_provider=MeterProvider())
        telemetries = (
            Telemetry(),  # the global providers: no SDK set up in this process
            recorded,
            Telemetry(tracer_provider=exported.tracers, meter_provider=exported.meters),
        )
        async with OpenAIChatModel(settings, http_client=server.http_client()) as model:
            loops = [
                AgentLoop(
                    model,
                    [weather],
                    session="bench",
                    agent="lead",
                    parts=LoopParts(telemetry=telemetry),
                )
                for telemetry in telemetries
            ]

            async def one(loop: AgentLoop) -> None:
                result = await loop.run_turn(history())
                assert result.rounds == 1 and result.text.endswith("Paris."), result

            for _ in range(max(10, rounds // 10)):  # warm up every path
                for loop in loops:
                    await one(loop)
            samples: list[list[float]] = [[], [], []]
            for _ in range(rounds):  # interleaved, so drift hits all three alike
                for sample, loop in zip(samples, loops, strict=True):
                    sample.append(await timed(partial(one, loop)))
        inject = inject_us(telemetries[2], 2000)
        exported.shutdown()
        requests, kib = receiver.requests, receiver.body_bytes / 1024
    off, rec, exp = (statistics.median(sample) for sample in samples)
    return {
        "round_off_us": round(off * 1e6, 1),
        "round_recorded_us": round(rec * 1e6, 1),
        "round_exported_us": round(exp * 1e6, 1),
        "tracing_overhead_us_per_round": round((exp - off) * 1e6, 1),
        "tracing_overhead_pct": round(100 * (exp - off) / off, 1),
        "recording_overhead_us_per_round": round((rec - off) * 1e6, 1),
        "spans_per_round": SPANS_PER_ROUND,
        "trace_inject_us": round(inject, 2),
        "export_requests": requests,
        "export_kib": round(kib, 1),
        "rounds_measured": rounds,
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--smoke", action="store_true", help="20 rounds, for CI")
    options = parser.parse_args()
    result = anyio.run(main, 20 if options.smoke else options.rounds)
    print(json.dumps(result))
    assert result["export_requests"] > 0, result  # the spans really went out over HTTP
    assert result["round_off_us"] > 0 and result["round_exported_us"] > 0, result
