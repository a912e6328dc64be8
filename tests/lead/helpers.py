"""Helpers for the lead and session tests: gated profiles and tools, leftover tasks.

A gate is an ``anyio.Event`` a tool waits on, so a test holds a sub-agent mid-round for exactly as
long as it needs (never a sleep). Scripted models, event waits and media paths are shared by every
package's tests: :mod:`tests.support`.
"""

from __future__ import annotations

import asyncio
from typing import Any

import anyio

from baton.engine import Tool, tool
from baton.subagents.profiles import AgentLimits, Profile

PAINT_AND_WRITE = "paint a fox and write a haiku about it"


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


def other_tasks() -> set[asyncio.Task[Any]]:
    """Every asyncio task but the current one (what a finished session must leave: none new)."""
    current = asyncio.current_task()
    return {task for task in asyncio.all_tasks() if task is not current and not task.done()}
