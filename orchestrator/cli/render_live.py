"""The live terminal view: the lead's text as it streams, one panel per sub-agent, approvals.

Kept apart from :mod:`baton.cli.render` because rich's live machinery is only needed on a
terminal. The view redraws from a :class:`~baton.view.SessionView` a dozen times a
second, so a burst of tiny deltas costs one redraw, not one per token. An approval question stops
the live region, asks on a plain line (so the typed answer echoes normally), and starts it again.
"""

from __future__ import annotations

import os
import sys

import anyio
from rich.columns import Columns
from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.markup import escape
from rich.panel import Panel
from rich.text import Text

from baton.bus.events import Event, ToolCallInfo
from baton.cli.render import (
    agent_status,
    budget_tenths,
    describe_budget,
    describe_check,
    describe_retry,
    summary_lines,
)
from baton.view import SessionView

_STATUS_STYLE = {"spawned": "cyan", "working": "yellow", "done": "green"}


class LiveRenderer:
    """A rich ``Live`` region on stdout; use :meth:`close` to leave the final frame in place."""

    def __init__(self, console: Console | None = None) -> None:
        self.view = SessionView()
        self.console = console or Console()
        self._live = Live(
            self,
            console=self.console,
            refresh_per_second=12,
            vertical_overflow="visible",
        )
        self._live.start()

    def __rich__(self) -> RenderableType:
        return self._frame()

    def show(self, event: Event) -> None:
        self.view.apply(event)

    def close(self) -> None:
        self._live.stop()
        for line in summary_lines(self.view):
            self.console.print(line, highlight=False, soft_wrap=True)

    async def ask(self, agent: str, calls: list[ToolCallInfo]) -> bool:
        """Ask the person at the terminal to approve ``calls``; True only for a typed yes."""
        self._live.stop()
        try:
            for call in calls:
                self.console.print(
                    f"[bold yellow]?[/] [bold]{escape(agent)}[/] wants to run "
                    f"[bold]{escape(call.name)}[/]({escape(call.arguments)})",
                    soft_wrap=True,
                )
            while True:
                self.console.print("approve? [y/n] ", end="", markup=False)
                answer = (await read_line()).strip().lower()
                if answer in {"y", "yes"}:
                    return True
                if answer in {"n", "no", ""}:
                    return False
        finally:
            self._live.start(refresh=True)  # redraw now: what streamed meanwhile shows at once

    def _frame(self) -> RenderableType:
        view = self.view
        parts: list[RenderableType] = []
        label = "offline model" if view.offline else view.model
        if view.session:
            parts.append(Text(f"session {view.session} · {label}", style="dim"))
        parts.append(
            Panel(
                Text(view.lead_text or "…"), title="lead", title_align="left", border_style="blue"
            )
        )
        if view.agents:
            panels = [
                Panel(
                    Text(_clip(agent.latest) or agent_status(agent)),
                    title=f"{name} · {agent.profile or '?'}",
                    subtitle=agent_status(agent)
                    + (f" · {agent.retries} retries" if agent.retries else ""),
                    title_align="left",
                    border_style=_STATUS_STYLE.get(agent_status(agent), "dim"),
                    width=44,
                )
                for name, agent in view.agents.items()
            ]
            parts.append(Columns(panels))
        for (agent, call_id), call in view.pending.items():
            parts.append(Text(f"? {agent} waits for approval of {call.name} [{call_id}]", "yellow"))
        parts.extend(Text(f"· {decision}", style="dim") for decision in view.decisions[-3:])
        parts.extend(Text(f"! {error}", style="red") for error in view.errors[-3:])
        parts.extend(_model_lines(view))
        if view.finished is not None:
            parts.append(Text(f"session {view.finished.status}", style="bold"))
        return Group(*parts)


def _model_lines(view: SessionView) -> list[Text]:
    """The spend against the caps, the model's retries, and the answer's check, when known."""
    lines: list[Text] = []
    if view.budget is not None:
        tenths = budget_tenths(view.budget)
        style = "bold red" if tenths >= 10 else "yellow" if tenths >= 8 else "dim"
        lines.append(Text(f"budget: {describe_budget(view.budget)}", style=style))
    if view.last_retry is not None:
        last = view.last_retry
        said = f"model retries: {view.retries} · last {last.agent}: {describe_retry(last)}"
        lines.append(Text(said, style="yellow"))
    if view.answer_check is not None and (check := describe_check(view.answer_check)):
        lines.append(Text(check, style="red" if view.answer_check.invented_urls else "yellow"))
    return lines


async def read_line() -> str:
    """One line from stdin without blocking the event loop (cancellable, unlike ``input()``)."""
    fd = sys.stdin.fileno()
    buffer = b""
    while not buffer.endswith(b"\n"):
        await anyio.wait_readable(fd)
        chunk = os.read(fd, 1024)
        if not chunk:
            break
        buffer += chunk
    return buffer.decode(errors="replace")


def _clip(text: str, limit: int = 160) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
