"""What a tool may know about the sub-agent calling it, without a tool object per agent.

Tool objects are expensive to build (each has its own pydantic argument model), and a worker
hosts thousands of agents, so one :class:`~baton.engine.Tool` serves every agent of a
profile. The agent-specific part — which session, which agent, where its media goes, how to reach
the lead — travels in a context variable set by the inbox loop around each engine turn. Tasks the
engine starts for parallel calls copy the context, so every tool call sees its own agent.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path

from baton.subagents.errors import NoAgentContext


@dataclass(frozen=True, slots=True)
class AgentContext:
    """The calling agent, as its tools see it."""

    session: str
    agent: str
    lead: str
    media_dir: Path
    report: Callable[[str], Awaitable[None]]
    """Send a progress message to the lead now."""
    record_result: Callable[[str], None]
    """Keep the agent's final answer; the loop delivers it (once) when the agent leaves."""


_CURRENT: ContextVar[AgentContext | None] = ContextVar("baton_subagent", default=None)


def current_agent() -> AgentContext:
    """The agent whose turn is running; raises ``NoAgentContext`` outside a sub-agent's turn."""
    context = _CURRENT.get()
    if context is None:
        raise NoAgentContext(
            "this tool needs a sub-agent context: call it from a sub-agent's turn "
            "(baton.subagents.loop sets it), not directly"
        )
    return context


def enter_agent(context: AgentContext) -> None:
    """Make ``context`` the current agent for this task (each agent runs in its own task)."""
    _CURRENT.set(context)
