"""One streamed tool round (2 requests: a tool-call reply, then a text reply) through
``OpenAIChatModel`` versus the bare ``AsyncOpenAI`` ``create(stream=True)`` iterating chunk
objects, both against the in-process scripted transport. Prints JSON (medians per round).

Run: ``.venv/bin/python benchmarks/llm_client.py [--rounds N] [--smoke]`` (``--smoke``: 20 rounds,
as CI does, to prove it still works).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import openai

from baton.llm.client import ModelSettings, OpenAIChatModel
from baton.llm.script import Call, Json, Reply, pieces, text
from baton.llm.scripted import IN_PROCESS_URL, ScriptedServer

MESSAGES: list[Any] = [
    {"role": "system", "content": "You are a helpful assistant with tools."},
    {"role": "user", "content": "Find pictures of red foxes and summarise them."},
]
TOOLS: list[Any] = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": "a tool",
            "parameters": {
                "type": "object",
                "properties": {"query": {"type": "string"}},
                "required": ["query"],
            },
        },
    }
    for name in ("search", "fetch", "generate_image")
]
ARGS = json.dumps({"query": "red foxes in the snow at dusk, high resolution"})
TOOL_REPLY = Reply(calls=[Call("search", pieces(ARGS, 8)), Call("fetch", pieces(ARGS, 8))])
TEXT_REPLY = text(*[f"word{i} " for i in range(24)])


def responder(body: Json) -> Reply:
    return TOOL_REPLY if body["messages"][-1]["role"] == "user" else TEXT_REPLY


FOLLOW_UP: list[Any] = [
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "call_0", "type": "function", "function": {"name": "search", "arguments": ARGS}}
        ],
    },
    {"role": "tool", "tool_call_id": "call_0", "content": "three foxes found"},
]


async def measure(round_: Callable[[], Awaitable[None]], rounds: int) -> dict[str, float]:
    for _ in range(20):
        await round_()
    walls, cpus = [], []
    for _ in range(rounds):
        wall, cpu = time.perf_counter(), time.process_time()
        await round_()
        cpus.append(time.process_time() - cpu)
        walls.append(time.perf_counter() - wall)
    return {
        "median_wall_ms": round(statistics.median(walls) * 1e3, 3),
        "median_cpu_ms": round(statistics.median(cpus) * 1e3, 3),
    }


async def main(rounds: int) -> None:
    server = ScriptedServer(responder=responder)
    settings = ModelSettings(model="bench", base_url=IN_PROCESS_URL, api_key="k")
    model = OpenAIChatModel(settings, http_client=server.http_client())
    bare = openai.AsyncOpenAI(
        api_key="k", base_url=IN_PROCESS_URL, http_client=server.http_client(), max_retries=0
    )

    async def engine_round() -> None:
        first = await model.complete(MESSAGES, TOOLS)
        assert len(first.tool_calls) == 2
        second = await model.complete([*MESSAGES, *FOLLOW_UP], TOOLS)
        assert second.text

    async def bare_round() -> None:
        for messages in (MESSAGES, [*MESSAGES, *FOLLOW_UP]):
            stream = await bare.chat.completions.create(
                model="bench",
                messages=messages,
                tools=TOOLS,
                stream=True,
                stream_options={"include_usage": True},
            )
            async for _chunk in stream:
                pass

    async with model, bare:
        ours = await measure(engine_round, rounds)
        sdk = await measure(bare_round, rounds)
    print(
        json.dumps(
            {
                "rounds": rounds,
                "requests_per_round": 2,
                "openai_chat_model": ours,
                "bare_async_openai": sdk,
                "speedup_wall": round(sdk["median_wall_ms"] / ours["median_wall_ms"], 2),
            }
        )
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--smoke", action="store_true", help="20 rounds, for CI")
    options = parser.parse_args()
    anyio.run(main, 20 if options.smoke else options.rounds)
