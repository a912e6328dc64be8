"""The scripted server records requests only when asked (issue 12).

The offline model is a scripted server that lives as long as its worker: a body kept per request
grew a worker by ~2.9 MB per 100 sessions. By default nothing is kept; tests opt in with
``record=True``.
"""

from __future__ import annotations

import gc
import tracemalloc

import pytest

from baton.llm.offline import offline_model, offline_server
from baton.llm.script import Script, text
from baton.llm.scripted import ScriptedServer
from tests.llm.helpers import Mount, connected

BIG = "x" * 50_000
"""A request body this large, kept 40 times, would be 2 MB: far above what the test allows."""


async def test_a_default_scripted_server_keeps_no_request_bodies(mount: Mount) -> None:
    server = offline_server()
    async with connected(server, mount) as model:
        for n in range(5):
            await model.complete([{"role": "user", "content": f"{BIG} {n}"}])
    assert server.request_count == 5
    assert server.script.bodies == []
    with pytest.raises(RuntimeError, match="record=True"):
        _ = server.requests  # an empty list would let a test that forgot to opt in pass


async def test_a_recording_server_keeps_every_request_in_order(mount: Mount) -> None:
    server = ScriptedServer(Script([text("a"), text("b")]), record=True)
    async with connected(server, mount) as model:
        await model.complete([{"role": "user", "content": "one"}])
        await model.complete([{"role": "user", "content": "two"}])
    assert [r.messages[-1]["content"] for r in server.requests] == ["one", "two"]
    assert [b["messages"][-1]["content"] for b in server.script.bodies] == ["one", "two"]
    assert server.request_count == 2


def test_a_script_records_only_when_asked() -> None:
    body = {"messages": [{"role": "user", "content": "hi"}]}
    quiet, recording = Script([text("a")]), Script([text("a")], record=True)
    quiet.next(body)
    recording.next(body)
    assert (quiet.bodies, recording.bodies) == ([], [body])


async def test_the_offline_model_does_not_grow_with_its_requests() -> None:
    """The model a worker runs sub-agents with: 40 requests of 50 KB leave (almost) nothing."""
    async with offline_model() as model:
        for n in range(3):  # warm up: the client's pool, caches, lazily built parts
            await model.complete([{"role": "user", "content": f"warm {n}"}])
        gc.collect()
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            for n in range(40):
                await model.complete([{"role": "user", "content": f"{BIG} {n}"}])
            gc.collect()
            grown = tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()
    assert grown < 500_000, f"the offline model kept {grown} bytes over 40 requests"
