"""Showing a session's events in a terminal: JSON lines, plain lines, or a rich live view.

``baton run`` and ``baton watch`` read the same typed events (DESIGN §5) and hand each one to a
:class:`Renderer`. Three exist because three audiences exist: a program reading a pipe wants one
JSON object per line and nothing else (:class:`JsonRenderer`); a log file wants readable lines in
order (:class:`PlainRenderer`); a person at a terminal wants the lead's text as it streams and one
panel per sub-agent that updates in place (:class:`~baton.cli.render_live.LiveRenderer`). All
three fold events into the same :class:`~baton.view.SessionView` (the one the HTTP API's state
is folded into too), so what they show cannot disagree.
"""

from __future__ import annotations

import sys
from typing import IO, Protocol

from baton.bus.events import (
    AgentExited,
    AgentProgress,
    AgentResult,
    AgentSpawned,
    ApprovalDecided,
    ApprovalRequested,
    ErrorEvent,
    Event,
    GuardFired,
    SessionFinished,
    SessionStarted,
    TextDelta,
    ToolCalled,
    dump_event,
)
from baton.view import LEAD_NAME as LEAD
from baton.view import AgentView, SessionView


def agent_status(agent: AgentView) -> str:
    """A sub-agent's status in a word or two: its phase, or ``exited (reason)``."""
    return f"exited ({agent.exit_reason})" if agent.exit_reason else agent.phase


class Renderer(Protocol):
    """Shows events as they come; ``close`` prints the closing summary."""

    view: SessionView

    def show(self, event: Event) -> None: ...

    def close(self) -> None: ...


class JsonRenderer:
    """One JSON object per event on stdout, flushed at once; nothing else."""

    def __init__(self, out: IO[str] | None = None) -> None:
        self.view = SessionView()
        self._out = out or sys.stdout

    def show(self, event: Event) -> None:
        self.view.apply(event)
        self._out.write(dump_event(event) + "\n")
        self._out.flush()

    def close(self) -> None:
        self._out.flush()


class PlainRenderer:
    """Readable lines for a pipe or a log file.

    The lead's text is written a whole line at a time (the rest waits for its newline or for the
    lead's next non-text event), so other agents' lines fall between the lead's lines rather than
    in the middle of them.
    """

    def __init__(self, out: IO[str] | None = None) -> None:
        self.view = SessionView()
        self._out = out or sys.stdout
        self._partial = ""

    def show(self, event: Event) -> None:
        repeat = isinstance(event, AgentSpawned) and _running(self.view, event.agent)
        self.view.apply(event)
        if isinstance(event, TextDelta):
            if event.agent == LEAD:
                lines = (self._partial + event.text).split("\n")
                self._partial = lines.pop()
                self._write(lines)
            return
        if event.agent == LEAD:
            self._flush()
        line = "" if repeat else describe(event)
        if line:
            self._write([line])

    def _flush(self) -> None:
        if self._partial:
            self._write([self._partial])
            self._partial = ""

    def _write(self, lines: list[str]) -> None:
        if lines:
            self._out.write("".join(line + "\n" for line in lines))
            self._out.flush()

    def close(self) -> None:
        self._flush()
        self._write(summary_lines(self.view))


def _running(view: SessionView, agent: str) -> bool:
    """Whether ``agent`` is already known and not exited (its spawn was already shown)."""
    known = view.agents.get(agent)
    return known is not None and known.running


def describe(event: Event) -> str:
    """One line about an event for people, or "" for events not worth a line."""
    match event:
        case SessionStarted():
            label = "offline model" if event.offline else event.model
            return f"── session {event.session} ({label}): {event.task}"
        case AgentSpawned():
            return f"· {event.agent} spawned (profile {event.profile})"
        case AgentProgress():
            return f"· {event.agent}: {_short(event.content)}"
        case AgentResult():
            media = f" [{len(event.media_urls)} media]" if event.media_urls else ""
            return f"· {event.agent} result: {_short(event.content)}{media}"
        case AgentExited():
            return f"· {event.agent} exited ({event.reason})"
        case ApprovalRequested():
            names = ", ".join(f"{c.name}({_short(c.arguments, 60)}) [{c.call_id}]"
                              for c in event.calls)  # fmt: skip
            return f"? {event.agent} asks approval for {names}"
        case ApprovalDecided():
            verdict = "approved" if event.approved else "declined"
            return f"· {event.call_id} {verdict}" + (f": {event.reason}" if event.reason else "")
        case GuardFired():
            return f"! guard {event.outcome} on {event.agent}" + (
                f" ({event.tool})" if event.tool else ""
            )
        case ToolCalled() if event.agent != LEAD and event.call.name != "send_message":
            return f"· {event.agent} calls {event.call.name}"
        case ErrorEvent():
            return f"! {event.agent}: {event.message}"
        case SessionFinished():
            return f"── session {event.session} {event.status}"
        case _:
            return ""


def summary_lines(view: SessionView) -> list[str]:
    """The closing lines: every media URL, so they can be opened after the session."""
    urls = view.media_urls
    if not urls:
        return []
    return ["media:", *(f"  {url}" for url in urls)]


def _short(text: str, limit: int = 120) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
