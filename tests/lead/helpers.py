"""Helpers for the lead and session tests: scripted models, a gated tool, event collection.

A gate is an ``anyio.Event`` a tool waits on, so a test holds a sub-agent mid-round for exactly as
long as it needs (never a sleep). Scripted models fall back to the offline answers, so a scenario
spells out only the replies that matter to it.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit
from urllib.request import url2pathname

import anyio

from baton.bus.base import Bus
from baton.bus.events import Event
from baton.engine import Tool, tool
from baton.llm import IN_PROCESS_URL, ModelSettings, OpenAIChatModel, ScriptedServer
from baton.llm.offline import offline_reply
from baton.llm.script import Call, Reply, ScriptItem
from baton.subagents.profiles import AgentLimits, Profile

PAINT_AND_WRITE = "paint a fox and write a haiku about it"


def scripted(
    items: Iterable[ScriptItem] = (), *, fallback: bool = True, name: str = "scripted"
) -> tuple[ScriptedServer, OpenAIChatModel]:
    """A scripted server (falling back to the offline answers) and a model client on it."""
    server = ScriptedServer(list(items), responder=offline_reply if fallback else None)
    settings = ModelSettings(model=name, base_url=IN_PROCESS_URL, api_key="sk-test", max_retries=0)
    return server, OpenAIChatModel(settings, http_client=server.http_client())


def call(name: str, call_id: str = "c1", **arguments: Any) -> Reply:
    return Reply(calls=[Call(name, json.dumps(arguments), id=call_id)])


def gated_profile(gate: anyio.Event, name: str = "slow") -> Profile:
    """A profile whose one tool blocks until ``gate`` is set."""

    @tool(name="slow_paint")
    async def slow_paint(prompt: str) -> str:
        """Paint slowly.

        Args:
            prompt: what to paint
        """
        await gate.wait()
        return f"painted {prompt}"

    return Profile(
        name=name,
        description="Paints, slowly.",
        system_prompt="[baton:subagent] You paint slowly.",
        tools=(slow_paint,),
        limits=AgentLimits(idle_timeout_s=30.0),
    )


def gated_tool(name: str = "deploy") -> Tool:
    """A tool that needs approval and says when it ran."""

    @tool(name=name, needs_approval=True)
    async def deploy(target: str) -> str:
        """Deploy something.

        Args:
            target: where to deploy
        """
        return f"deployed to {target}"

    return deploy


def file_path(url: str) -> Path:
    return Path(url2pathname(urlsplit(url).path))


async def logged_events(bus: Bus, session: str) -> list[Event]:
    """The whole event log of a session, as it stands."""
    return [logged.event async for logged in bus.events(session, follow=False)]


async def wait_for_event(bus: Bus, session: str, kind: type[Any], timeout: float = 20.0) -> Any:
    """The first logged event of type ``kind`` (waits on the log's tail, bounded)."""
    with anyio.fail_after(timeout):
        async for logged in bus.events(session):
            if isinstance(logged.event, kind):
                return logged.event
    raise AssertionError("the event log ended")


def other_tasks() -> set[asyncio.Task[Any]]:
    """Every asyncio task but the current one (what a finished session must leave: none new)."""
    current = asyncio.current_task()
    return {task for task in asyncio.all_tasks() if task is not current and not task.done()}
