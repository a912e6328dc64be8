"""Each sub-agent invocation as AG-UI's subagent events: ``SUBAGENT_STARTED`` when the run first
meets it, its progress card (``ACTIVITY_SNAPSHOT``, then ``ACTIVITY_DELTA`` patches), and
``SUBAGENT_FINISHED`` or ``SUBAGENT_ERROR`` when its agent gives its result or leaves.

Which delegation is which invocation is :mod:`.invocations`'; this says it in AG-UI, and only in
a live run: an invocation the fold met before the run began is announced when the run begins (or
when its agent next does something), under the id it had.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from ag_ui.core import (
    ActivityDeltaEvent,
    ActivitySnapshotEvent,
    BaseEvent,
    SubagentErrorEvent,
    SubagentFinishedEvent,
    SubagentFinishedSuspendedOutcome,
    SubagentStartedEvent,
)

from baton.bus.events import AgentExited, AgentResult, AgentSpawned
from baton.server.ag_ui.invocations import Invocation, Invocations
from baton.server.ag_ui.state import JsonObject, patch
from baton.server.ag_ui.texts import TextMessages
from baton.session.view import LEAD_NAME, SessionView, describe_placement

ACTIVITY_TYPE = "baton.subagent"
"""The ``activityType`` of a sub-agent's progress card."""


class SubagentRuns:
    """The subagent events of one session's invocations (see the module docstring)."""

    __slots__ = ("_media_url", "_texts", "_view", "invocations", "live")

    def __init__(
        self,
        invocations: Invocations,
        view: SessionView,
        texts: TextMessages,
        media_url: Callable[[str], str],
    ) -> None:
        self.invocations = invocations
        self._view = view
        self._texts = texts
        self._media_url = media_url
        self.live = False
        """Whether the run streams: invocations are announced only then."""

    def spawned(self, event: AgentSpawned) -> list[BaseEvent]:
        started = self.invocations.spawned(event.agent, event.profile)
        return self.opened(started) if started is not None else []

    def opened(self, invocation: Invocation) -> list[BaseEvent]:
        """A new invocation: its card as it stands, announced when the run is live."""
        invocation.activity = self._activity_of(invocation.agent, invocation.profile)
        return self.announce(invocation)

    def announce(self, invocation: Invocation) -> list[BaseEvent]:
        if not self.live or invocation.announced:
            return []
        invocation.announced = True
        return [
            SubagentStartedEvent(
                subagent_run_id=invocation.id,
                name=invocation.agent,
                description=f"a {invocation.profile} sub-agent",
                parent_tool_call_id=invocation.parent_call,
                parent_message_id=invocation.parent_message,
            ),
            ActivitySnapshotEvent(
                message_id=invocation.activity_id,
                activity_type=ACTIVITY_TYPE,
                content=dict(invocation.activity),
                replace=True,
                subagent_run_id=invocation.id,
            ),
        ]

    def owner(self, agent: str) -> tuple[list[BaseEvent], str | None]:
        """The invocation an agent's event belongs to (None: the lead's), announcing it first
        when it was not yet in this run; an agent seen working with none gets one."""
        if agent == LEAD_NAME:
            return [], None
        newest = self.invocations.newest(agent)
        invocation = self.invocations.working(agent, self._profile_of(agent))
        if invocation is not newest:
            return self.opened(invocation), invocation.id
        return self.announce(invocation), invocation.id

    def announced_owner(self, agent: str) -> str | None:
        """The invocation an agent's event belongs to when the run announced it (else None)."""
        invocation = self.invocations.newest(agent) if agent != LEAD_NAME else None
        return invocation.id if invocation is not None and invocation.announced else None

    def activity(self, agent: str) -> list[BaseEvent]:
        """The agent's card after its claim, its warning or its progress: the patch."""
        if not self.invocations.known(agent):
            return []  # a worker's claim logged before the lead's spawn: its card comes with it
        out, owner = self.owner(agent)
        invocation = self.invocations.newest(agent)
        if invocation is None or owner is None:
            return out
        fresh = self._activity_of(agent, invocation.profile)
        ops = patch(invocation.activity, fresh)
        invocation.activity = fresh
        if ops and self.live:
            out.append(
                ActivityDeltaEvent(
                    message_id=invocation.activity_id,
                    activity_type=ACTIVITY_TYPE,
                    patch=ops,
                    subagent_run_id=owner,
                )
            )
        return out

    def result(self, event: AgentResult) -> list[BaseEvent]:
        """The agent's result ends every invocation it answers; the newest carries its text."""
        out = self.activity(event.agent)
        invocations = self.invocations.finish(event.agent)
        result = {
            "agent": event.agent,
            "content": event.content,
            "mediaUrls": [self._media_url(url) for url in event.media_urls],
        }
        for index, invocation in enumerate(invocations):
            out.extend(self.announce(invocation))
            if index == len(invocations) - 1 and event.content:
                message = f"{invocation.id}.result"
                out.extend(self._texts.stream(message, event.content, invocation.id))
                out.extend(self._texts.close(message))
            if invocation.announced:
                out.append(SubagentFinishedEvent(subagent_run_id=invocation.id, result=result))
        return out

    def exited(self, event: AgentExited) -> list[BaseEvent]:
        """The agent left: its open invocations end, finished or with the reason as an error."""
        had = self.invocations.newest(event.agent) is not None
        out = self.activity(event.agent) if had else []
        for invocation in self.invocations.left(event.agent):
            out.extend(self.announce(invocation))
            if not invocation.announced:
                continue
            if event.reason == "finished":
                out.append(SubagentFinishedEvent(subagent_run_id=invocation.id))
            else:
                message = f"{event.agent} left without a result ({event.reason})"
                out.append(
                    SubagentErrorEvent(
                        subagent_run_id=invocation.id, message=message, code=event.reason
                    )
                )
        return out

    def suspended(self, asked: Mapping[str, list[str]]) -> list[BaseEvent]:
        """The run ends for an interrupt: every invocation it announced finishes as suspended,
        the asking ones (``asked``: invocation id -> interrupt ids) naming their interrupts."""
        out: list[BaseEvent] = []
        for invocation in self.invocations.running():
            if invocation.announced:
                ids = asked.get(invocation.id)
                outcome = SubagentFinishedSuspendedOutcome(interrupt_ids=ids)
                out.append(SubagentFinishedEvent(subagent_run_id=invocation.id, outcome=outcome))
                invocation.announced = False
        return out

    def ended(self, why: str) -> list[BaseEvent]:
        """The session ended: an invocation that never reported ends with ``why`` as its error
        code (``cancelled``, ``failed``...), and none is left."""
        out: list[BaseEvent] = []
        for invocation in self.invocations.running():
            if invocation.announced:
                message = f"{invocation.agent} gave no result before the session ended ({why})"
                out.append(
                    SubagentErrorEvent(
                        subagent_run_id=invocation.id, message=message, code=why.replace(" ", "_")
                    )
                )
            invocation.announced = False
        self.invocations.clear()
        return out

    def _profile_of(self, agent: str) -> str:
        view = self._view.agents.get(agent)
        return view.profile if view is not None and view.profile else agent

    def _activity_of(self, agent: str, profile: str) -> JsonObject:
        view = self._view.agents.get(agent)
        if view is None:
            return {"agent": agent, "profile": profile, "status": "spawned", "progress": "",
                    "placement": ""}  # fmt: skip
        return {
            "agent": agent,
            "profile": view.profile or profile,
            "status": view.status,
            "progress": view.progress,
            "placement": describe_placement(view),
        }
