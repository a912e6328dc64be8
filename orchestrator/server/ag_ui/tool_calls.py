"""Each logged tool call and its result as AG-UI's tool call events, under ids that stay apart.

A tool call's id is ``<session>:<call id>`` for the lead, ``<session>:<agent>.<call id>`` for a
sub-agent, with ``.<cursor>`` added should one repeat in the session; its result's message is
``<tool call id>.result``. Call ids repeat across agents, and across the sessions of one thread
(a model numbers its calls anew in each): a client holds the whole thread, and a call id it has
seen before would merge two calls into one. The session names the call (``:`` is in no session
id, so no id of another session, nor a message id, can be the same), and a replay of the session
names it alike. A lead's call may be a delegation: the call and its
result tell :mod:`.invocations` which invocation it starts (a follow-up that reached a living
agent starts one with its result). Arguments and results go out with their ``file://`` URLs
rewritten (:mod:`.links`); those the client already holds are not sent again.
"""

from __future__ import annotations

from ag_ui.core import (
    BaseEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)

from baton.bus.events import ToolCalled, ToolResulted
from baton.server.ag_ui.holdings import HeldMark, Holdings
from baton.server.ag_ui.links import Links, comparable
from baton.server.ag_ui.subagents import SubagentRuns
from baton.server.ag_ui.texts import TextMessages
from baton.session.view import LEAD_NAME


class ToolCalls:
    """The tool calls of one session's log, as the translation meets them."""

    __slots__ = ("_held", "_holdings", "_ids", "_links", "_runs", "_session", "_texts", "_used")

    def __init__(
        self,
        session: str,
        texts: TextMessages,
        runs: SubagentRuns,
        holdings: Holdings,
        held: HeldMark,
        links: Links,
    ) -> None:
        self._session = session
        self._links = links
        self._texts = texts
        self._runs = runs
        self._holdings = holdings
        self._held = held
        self._ids: dict[tuple[str, str], str] = {}
        """(agent, the model's call id) -> the tool call's id in AG-UI."""
        self._used: set[str] = set()

    def id_of(self, agent: str, call_id: str) -> str | None:
        """The AG-UI id of ``agent``'s call ``call_id`` (None: the log has not shown it)."""
        return self._ids.get((agent, call_id))

    def called(self, event: ToolCalled, cursor: str) -> list[BaseEvent]:
        agent, call = event.agent, event.call
        named = call.call_id if agent == LEAD_NAME else f"{agent}.{call.call_id}"
        base = f"{self._session}:{named}"
        tool_call = base if base not in self._used else f"{base}.{cursor}"
        self._used.add(tool_call)
        self._ids[(agent, call.call_id)] = tool_call
        out, owner = self._runs.owner(agent)
        ended, parent = self._texts.attributed(
            agent, cursor, owner
        )  # the call's owner is its message's
        out.extend(ended)
        if agent == LEAD_NAME:
            self._runs.invocations.delegated(tool_call, call.name, call.arguments, parent)
        arguments = self._links.text(call.arguments)
        held = self._holdings.arguments.get(tool_call)
        whole = held is not None and comparable(held) == comparable(arguments)
        self._held.note(whole)
        if whole:
            return out
        if held is not None and arguments.startswith(held):
            arguments = arguments[len(held) :]
        out.append(
            ToolCallStartEvent(
                tool_call_id=tool_call,
                tool_call_name=call.name,
                parent_message_id=parent,
                subagent_run_id=owner,
            )
        )
        if arguments:
            out.append(
                ToolCallArgsEvent(tool_call_id=tool_call, delta=arguments, subagent_run_id=owner)
            )
        out.append(ToolCallEndEvent(tool_call_id=tool_call, subagent_run_id=owner))
        return out

    def resulted(self, event: ToolResulted) -> list[BaseEvent]:
        agent, result = event.agent, event.result
        tool_call = self._ids.get((agent, result.call_id))
        if tool_call is None:  # its call is older than what the log kept
            return []
        out: list[BaseEvent] = []
        if agent == LEAD_NAME:
            started = self._runs.invocations.answered(tool_call, result.content, result.is_error)
            if started is not None:  # a follow-up that reached a living agent
                out.extend(self._runs.opened(started))
        prefix, owner = self._runs.owner(agent)
        out.extend(prefix)
        message = f"{tool_call}.result"
        self._held.note(message in self._holdings.ids)
        if message not in self._holdings.ids:
            out.append(
                ToolCallResultEvent(
                    message_id=message,
                    tool_call_id=tool_call,
                    content=self._links.text(result.content),
                    role="tool",
                    subagent_run_id=owner,
                )
            )
        return out
