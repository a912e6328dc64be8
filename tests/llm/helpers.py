"""Shared helpers for the model-side tests: connect an ``OpenAIChatModel`` to a scripted server.

A context manager rather than a fixture because the loopback server owns a task group, which must
be entered and left in the same task (pytest-asyncio runs fixture setup and teardown separately).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any, Literal

from baton.llm.client import ModelSettings, OpenAIChatModel
from baton.llm.scripted import IN_PROCESS_URL, ScriptedServer

Mount = Literal["in_process", "loopback"]
MOUNTS: tuple[Mount, ...] = ("in_process", "loopback")


def settings(base_url: str, **overrides: Any) -> ModelSettings:
    values: dict[str, Any] = {
        "model": "test-model",
        "base_url": base_url,
        "api_key": "sk-test",
        "backoff_initial": 0.001,
        "backoff_max": 0.005,
        "max_retries": 2,
    }
    values.update(overrides)
    return ModelSettings(**values)


@asynccontextmanager
async def connected(
    server: ScriptedServer, mount: Mount, **overrides: Any
) -> AsyncIterator[OpenAIChatModel]:
    """A model talking to ``server`` through the real ``openai`` client over ``mount``."""
    async with AsyncExitStack() as stack:
        if mount == "loopback":
            http = await stack.enter_async_context(server.serve())
            model = OpenAIChatModel(settings(http.base_url, **overrides))
        else:
            model = OpenAIChatModel(
                settings(IN_PROCESS_URL, **overrides), http_client=server.http_client()
            )
        await stack.enter_async_context(model)
        yield model


class TextLog:
    """An ``on_text`` sink that keeps what it was given."""

    def __init__(self) -> None:
        self.deltas: list[str] = []

    async def __call__(self, delta: str) -> None:
        self.deltas.append(delta)
