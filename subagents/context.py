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
from typing import TYPE_CHECKING

from baton.media import DirectoryStore, MediaStore
from baton.subagents.errors import NoAgentContext

if TYPE_CHECKING:
    from baton.subagents.images import ImageGenerator


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
    media: MediaStore | None = None
    """Where its tools put media (:func:`media_store`); None: a directory store at ``media_dir``."""
    images: ImageGenerator | None = None
    """What makes real pictures for ``generate_image``; None: it paints its offline demo."""

    def media_store(self) -> MediaStore:
        """The store this agent's tools put media in (see :mod:`baton.media`)."""
        return self.media if self.media is not None else DirectoryStore(self.media_dir)


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


def media_store() -> MediaStore:
    """The media store of the agent whose turn is running: what a tool that makes media (a
    picture, an MCP server's image) puts its bytes in to get a URL the lead can open. Raises
    ``NoAgentContext`` outside a sub-agent's turn."""
    return current_agent().media_store()


def enter_agent(context: AgentContext) -> None:
    """Make ``context`` the current agent for this task (each agent runs in its own task)."""
    _CURRENT.set(context)
