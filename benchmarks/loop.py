"""Benchmark of the agent loop engine against the bare ``openai`` client, on the scripted model.

Prints one JSON object:

- ``rounds_per_s``: governed tool rounds per second (a turn of two streamed requests — a tool call,
  then the answer — plus the tool), scripted model with zero latency;
- ``engine_overhead_us_per_round``: the engine's time per round minus the bare ``AsyncOpenAI``
  client streaming the same two responses (``chat.completions.create(stream=True)``), medians
  measured in the same run, interleaved;
- ``engine_only_overhead_us_per_round``: the engine's time per round minus the engine's own model
  client (``OpenAIChatModel``) making the same two requests — what governance, events and the
  loop add by themselves;
- ``fanout_32_calls_ms``: one turn whose round has 32 parallel calls of a tool that sleeps 50 ms
  (≈ 50 ms plus two requests means they really ran concurrently; median of 5 turns).

Both sides talk to the same in-process scripted server (an ``httpx2`` transport), so the
difference is client and engine work, not sockets. ``--profile`` prints a cProfile of the engine
rounds to stderr. Keep runs short on shared machines: ``--rounds 200`` is the default.

Run: ``.venv/bin/python benchmarks/loop.py [--rounds N] [--profile] [--smoke]`` (``--smoke``: 20
rounds, as CI does, to prove it still works).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import openai

from baton.bus.events import Event
from baton.engine import AgentLoop, LoopParts, tool
from baton.llm.client import ModelSettings, OpenAIChatModel
from baton.llm.script import Call, ScriptItem, text, tool_calls
from baton.llm.scripted import IN_PROCESS_URL, ScriptedServer
from baton.llm.types import Message

ARGS = '{"city": "Paris", "units": "metric"}'


@tool
async def weather(city: str, units: str = "metric") -> str:
    """Current weather for a city."""
    return f"{city}: 18 degrees, light rain ({units})"


def respond(body: dict[str, Any]) -> ScriptItem:
    """Tool call when the last message is the user's, the answer after the tool result."""
    if body["messages"][-1]["role"] == "user":
        return tool_calls(Call("weather", ARGS))
    return text("It is ", "18 degrees ", "and raining in Paris.")


def history() -> list[Message]:
    return [
        {"role": "system", "content": "You are a weather assistant."},
        {"role": "user", "content": "What is the weather in Paris?"},
    ]


async def timed(fn: Callable[[], Awaitable[object]]) -> float:
    start = time.perf_counter()
    await fn()
    return time.perf_counter() - start


async def fanout(settings: ModelSettings) -> float:
    """Seconds for one turn whose round has 32 parallel calls of a 50 ms tool (median of 5)."""

    @tool
    async def nap(i: int) -> str:
        """Sleep 50 ms."""
        await anyio.sleep(0.05)
        return f"nap {i} done"

    fan = tool_calls(*(Call("nap", f'{{"i": {i}}}') for i in range(32)))
    server = ScriptedServer([item for _ in range(6) for item in (fan, text("all done"))])
    async with OpenAIChatModel(settings, http_client=server.http_client()) as model:
        loop = AgentLoop(model, [nap], session="bench", agent="lead")
        await loop.run_turn(history())  # warm-up: first-request costs of a new client
        return statistics.median([await timed(lambda: loop.run_turn(history())) for _ in range(5)])


def print_profile(profiler: cProfile.Profile) -> None:
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(40)
    print(out.getvalue(), file=sys.stderr)


class Paths:
    """The three ways of doing one tool round that are compared."""

    def __init__(self, bare: openai.AsyncOpenAI, model: OpenAIChatModel) -> None:
        self.bare = bare
        self.model = model
        self.events: list[Event] = []
        parts = LoopParts(events=self.sink)
        self.loop = AgentLoop(model, [weather], session="bench", agent="lead", parts=parts)

    async def sink(self, event: Event) -> None:
        self.events.append(event)

    async def bare_round(self) -> None:
        """The bare SDK: ``create(stream=True)`` and iterate the chunk objects, twice."""
        messages: list[Any] = history()
        for _ in range(2):
            stream = await self.bare.chat.completions.create(
                model="scripted",
                messages=messages,
                tools=[weather.schema],
                stream=True,
                stream_options={"include_usage": True},
            )
            async for _chunk in stream:
                pass
            messages.append({"role": "tool", "tool_call_id": "x", "content": "18"})

    async def client_round(self) -> None:
        """The engine's model client alone, twice."""
        messages = history()
        for _ in range(2):
            await self.model.complete(messages, (weather.schema,))
            messages = [*messages, {"role": "tool", "tool_call_id": "x", "content": "18"}]

    async def engine_round(self) -> None:
        """A whole governed turn: tool call, tool, answer; events to a sink."""
        result = await self.loop.run_turn(history())
        assert result.rounds == 1 and result.text.endswith("Paris.")
        self.events.clear()


async def main(rounds: int, profile: bool) -> dict[str, float]:
    server = ScriptedServer(responder=respond)
    settings = ModelSettings(model="scripted", base_url=IN_PROCESS_URL, api_key="sk-bench")
    bare = openai.AsyncOpenAI(
        base_url=IN_PROCESS_URL, api_key="sk-bench", max_retries=0, http_client=server.http_client()
    )
    async with bare, OpenAIChatModel(settings, http_client=server.http_client()) as model:
        bench = Paths(bare, model)
        paths = (bench.bare_round, bench.client_round, bench.engine_round)
        for _ in range(max(20, rounds // 10)):  # warm up every path
            for path in paths:
                await path()
        samples: list[list[float]] = [[], [], []]
        for _ in range(rounds):  # interleaved, so drift hits all three alike
            for sample, path in zip(samples, paths, strict=True):
                sample.append(await timed(path))
        if profile:
            profiler = cProfile.Profile()
            profiler.enable()
            for _ in range(rounds):
                await bench.engine_round()
            profiler.disable()
            print_profile(profiler)
    fanout_s = await fanout(settings)
    bare_med, client_med, engine_med = (statistics.median(sample) for sample in samples)
    overhead = engine_med - bare_med
    return {
        "rounds_per_s": round(1 / engine_med, 1),
        "engine_round_us": round(engine_med * 1e6, 1),
        "bare_openai_round_us": round(bare_med * 1e6, 1),
        "model_client_round_us": round(client_med * 1e6, 1),
        "engine_overhead_us_per_round": round(overhead * 1e6, 1),
        "engine_overhead_pct_of_bare": round(100 * overhead / bare_med, 1),
        "engine_only_overhead_us_per_round": round((engine_med - client_med) * 1e6, 1),
        "engine_only_overhead_pct_of_bare": round(100 * (engine_med - client_med) / bare_med, 1),
        "fanout_32_calls_ms": round(fanout_s * 1e3, 1),
        "rounds_measured": rounds,
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--profile", action="store_true", help="cProfile the engine to stderr")
    parser.add_argument("--smoke", action="store_true", help="20 rounds, for CI")
    options = parser.parse_args()
    result = anyio.run(main, 20 if options.smoke else options.rounds, options.profile)
    print(json.dumps(result))
    # 32 calls of a 50 ms tool in well under their 1.6 s sum: they really ran concurrently.
    assert result["fanout_32_calls_ms"] < 800, result
    assert result["rounds_per_s"] > 0, result
