"""A session's events as the progress lines an MCP host shows while ``run`` runs.

A host shows ``notifications/progress`` messages one at a time, often only the newest (a task's
``statusMessage`` is exactly that), so each line stands on its own: who does what, in a few
words. The lead says what it delegates and when it answers; each sub-agent its progress, the
tools it calls and its result; questions to a person and retries get a line too. Everything else
(text deltas, rounds, budgets) is left to the session's page and ``baton watch``.
"""

from __future__ import annotations

import json

from baton.bus.events import (
    AgentProgress,
    AgentResult,
    AgentSpawned,
    AgentUnclaimed,
    ApprovalDecided,
    ApprovalRequested,
    ErrorEvent,
    Event,
    ModelRetried,
    QuestionAnswered,
    QuestionAsked,
    SessionFinished,
    SessionStarted,
    ToolCalled,
)
from baton.session.view import (
    LEAD_NAME,
    describe_outcome,
    describe_question,
    describe_status,
    describe_unclaimed,
    describe_verdict,
)

LINE_MAX = 200
"""The most characters of one line: a progress message is a status, not a transcript."""


def short(text: str, limit: int = LINE_MAX) -> str:
    """``text`` on one line, cut to ``limit`` characters with an ellipsis."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def progress_line(event: Event) -> str | None:
    """The line ``event`` is worth to a host, or None."""
    match event:
        case SessionStarted():
            model = "offline model" if event.offline else event.model
            return short(f"session {event.session} started ({model}): {event.task}")
        case ToolCalled(agent=agent, call=call) if agent == LEAD_NAME:
            return _lead_call(call.name, call.arguments)
        case ToolCalled(agent=agent, call=call) if call.name != "send_message":
            return f"{agent} calls {call.name}"
        case AgentSpawned():
            return f"{event.agent} started (profile {event.profile})"
        case AgentProgress():
            return short(f"{event.agent}: {event.content}")
        case AgentResult():
            media = f" [{len(event.media_urls)} media]" if event.media_urls else ""
            return short(f"{event.agent} done: {event.content}", LINE_MAX - len(media)) + media
        case ApprovalRequested(policy=None):
            names = ", ".join(call.name for call in event.calls)
            return f"{event.agent} asks a person to approve {names}"
        case ApprovalDecided():
            return short(f"{event.call_id} {describe_verdict(event.approved, event.reason)}")
        case QuestionAsked():
            return short(f"{event.agent} asks a person for {describe_question(event)}")
        case QuestionAnswered():
            return short(f"{event.question_id} {describe_outcome(event)}")
        case _:
            return _trouble_line(event)


def _trouble_line(event: Event) -> str | None:
    match event:
        case ModelRetried():
            return short(f"{event.agent}: model request failed ({event.reason}); retrying")
        case AgentUnclaimed():
            return short(f"{event.agent}: {describe_unclaimed(event)}")
        case ErrorEvent():
            return short(f"{event.agent}: {event.message}")
        case SessionFinished():
            return f"session {event.session} {describe_status(event.status)}"
        case _:
            return None


def _lead_call(name: str, arguments: str) -> str | None:
    """The lead's delegation and its answer, from its typed calls."""
    try:
        args = json.loads(arguments)
    except ValueError:
        args = {}
    if not isinstance(args, dict):
        args = {}
    if name == "send_message":
        to, content = str(args.get("to", "?")), str(args.get("content", ""))
        return short(f"lead → {to}: {content}")
    if name == "answer":
        return "lead answers"
    return f"lead calls {name}"
