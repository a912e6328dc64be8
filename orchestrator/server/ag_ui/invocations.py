"""Who works for whom: each of the lead's delegations is one invocation of a sub-agent.

AG-UI names a subagent *invocation*, not a subagent: a ``subagentRunId`` is new for every
delegation, a follow-up to a living agent included, and the events of an agent belong to its
newest invocation. baton's log says it in pieces — the lead's delegation call (``tool.call`` of
``send_message``, or of a profile's own tool), the agent's ``agent.spawned`` (logged once the
lead's checkpoint has it: a worker may claim the agent and log work before it), the call's
``tool.result`` (which says whether a follow-up reached the agent) — and :class:`Invocations`
puts them together. It keeps no AG-UI events: the translator (:mod:`.mapping`) announces what
this decides.

Matching a spawn to the call that caused it: the oldest delegation call still unmatched whose
target is the agent's name or its profile (the lead sends in order and logs its spawns in that
order). A follow-up is a delegation call that started no agent and whose result does not say it
was refused (``Did not send``/``Not sent``: :data:`REFUSED_SEND`, the lead's own words).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from baton.lead.tools import SEND_MESSAGE

REFUSED_SEND = ("Did not send", "Not sent")
"""How the lead's ``send_message`` says it sent nothing (baton.lead.tools, .delegation)."""


@dataclass(slots=True)
class Invocation:
    """One delegation to a sub-agent: from its spawn (or a follow-up) to its result."""

    id: str
    agent: str
    profile: str
    parent_call: str | None = None
    parent_message: str | None = None
    announced: bool = False
    """Announced (``SUBAGENT_STARTED``) in the run being streamed."""
    early: bool = False
    """Opened by the agent's own work logged before the lead logged its spawn (a worker that
    claimed it and called a tool first): its ``agent.spawned`` adopts it."""
    activity: dict[str, Any] = field(default_factory=dict)
    """Its progress card (``ACTIVITY_SNAPSHOT``) as last sent."""

    @property
    def activity_id(self) -> str:
        return f"{self.id}.activity"


@dataclass(frozen=True, slots=True)
class Delegation:
    """A lead's delegation call not yet matched to the invocation it started."""

    call: str
    target: str
    message: str | None


def delegation_target(name: str, arguments: str, profile_tools: frozenset[str]) -> str | None:
    """Whom a lead's call delegates to (a profile or an agent), or None if it does not."""
    if name in profile_tools:
        return name
    if name != SEND_MESSAGE:
        return None
    try:
        args = json.loads(arguments or "{}")
    except ValueError:
        return None
    if not isinstance(args, dict) or args.get("type") == "shutdown":
        return None
    target = args.get("to")
    return target if isinstance(target, str) and target else None


class Invocations:
    """The invocations of one session (see the module docstring)."""

    def __init__(self, session: str, profile_tools: Iterable[str] = ()) -> None:
        self.session = session
        self.profile_tools = frozenset(profile_tools)
        """Tool names that start a sub-agent besides ``send_message`` (one per profile)."""
        self._open: dict[str, list[Invocation]] = {}
        self._counts: Counter[str] = Counter()
        self._pending: list[Delegation] = []
        self._living: set[str] = set()
        self._spawned: set[str] = set()

    def delegated(self, call: str, name: str, arguments: str, message: str | None) -> None:
        """The lead called ``name``: remembered when it delegates."""
        target = delegation_target(name, arguments, self.profile_tools)
        if target is not None:
            self._pending.append(Delegation(call, target, message))

    def spawned(self, agent: str, profile: str) -> Invocation | None:
        """``agent.spawned``: the agent's new invocation, tied to the call that started it; None
        when an invocation its early work opened is adopted instead."""
        self._living.add(agent)
        self._spawned.add(agent)
        found = next((d for d in self._pending if d.target in (agent, profile)), None)
        if found is not None:
            self._pending.remove(found)
        early = self.newest(agent)
        if early is not None and early.early:
            early.early = False
            return None
        return self._start(agent, profile, found)

    def answered(self, call: str, content: str, is_error: bool) -> Invocation | None:
        """A delegation call's result that started no agent: the new invocation of the living
        agent a follow-up reached; None for a refused send (or a call that was no delegation)."""
        found = next((d for d in self._pending if d.call == call), None)
        if found is None:
            return None
        self._pending.remove(found)
        sent = not is_error and not content.startswith(REFUSED_SEND)
        if not sent or found.target not in self._living:
            return None
        newest = self.newest(found.target)
        return self._start(found.target, newest.profile if newest else found.target, found)

    def working(self, agent: str, profile: str) -> Invocation:
        """The invocation an agent's work belongs to: its newest, or a new one for an agent
        seen working with none (marked ``early`` until its spawn is logged)."""
        newest = self.newest(agent)
        if newest is not None:
            return newest
        self._living.add(agent)
        started = self._start(agent, profile, None)
        started.early = agent not in self._spawned
        return started

    def known(self, agent: str) -> bool:
        """Whether the agent's spawn was logged or it has an invocation open."""
        return agent in self._spawned or bool(self._open.get(agent))

    def newest(self, agent: str) -> Invocation | None:
        found = self._open.get(agent)
        return found[-1] if found else None

    def running(self) -> list[Invocation]:
        """Every open invocation, oldest first per agent."""
        return [i for invocations in self._open.values() for i in invocations]

    def finish(self, agent: str) -> list[Invocation]:
        """The agent reported: its open invocations, which close."""
        return self._open.pop(agent, [])

    def left(self, agent: str) -> list[Invocation]:
        """The agent exited: whatever it left open, which closes."""
        self._living.discard(agent)
        return self._open.pop(agent, [])

    def clear(self) -> None:
        """The session ended: nothing is open any more."""
        self._open.clear()

    def _start(self, agent: str, profile: str, parent: Delegation | None) -> Invocation:
        self._counts[agent] += 1
        invocation = Invocation(
            id=f"{self.session}.{agent}.{self._counts[agent]}",
            agent=agent,
            profile=profile,
            parent_call=parent.call if parent is not None else None,
            parent_message=parent.message if parent is not None else None,
        )
        self._open.setdefault(agent, []).append(invocation)
        return invocation
