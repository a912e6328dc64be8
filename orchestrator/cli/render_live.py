"""The live terminal view: the lead's text as it streams, one panel per sub-agent, approvals.

Kept apart from :mod:`baton.cli.render` because rich's live machinery is only needed on a
terminal. The view redraws from a :class:`~baton.session.view.SessionView` a dozen times a
second, so a burst of tiny deltas costs one redraw, not one per token. An approval question is
drawn inside the live region, with the keys typed so far (the terminal's own echo is off while it
asks), so the panels keep updating while the person decides.
"""

from __future__ import annotations

import os
import sys
import termios
import tty
from collections.abc import Sequence

import anyio
from rich.columns import Columns
from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.markup import escape
from rich.panel import Panel
from rich.text import Text

from baton.bus.events import Event, QuestionAsked, ToolCallInfo
from baton.cli.render import (
    agent_status,
    budget_tenths,
    describe_budget,
    describe_check,
    describe_retry,
    summary_lines,
)
from baton.session.view import SessionView, describe_question

_STATUS_STYLE = {"spawned": "cyan", "working": "yellow", "done": "green"}


class LiveRenderer:
    """A rich ``Live`` region on stdout; use :meth:`close` to leave the final frame in place."""

    def __init__(self, console: Console | None = None, *, model_label: str = "") -> None:
        self.view = SessionView()
        self.console = console or Console()
        self._model_label = model_label  # the endpoint too, where this process runs the session
        self._question: list[str] = []  # the question being asked, as markup lines
        self._prompt = ""
        self._typed = ""  # the keys typed in answer so far
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

    def join(self, history: Sequence[Event], present: Sequence[Event]) -> None:
        for event in history:  # the panels are the present: the whole fold shows it
            self.view.apply(event)

    def close(self) -> None:
        self._live.stop()
        for line in summary_lines(self.view):
            self.console.print(line, highlight=False, soft_wrap=True)

    async def ask(self, agent: str, calls: list[ToolCallInfo]) -> bool:
        """Ask the person at the terminal to approve ``calls``; True only for a typed yes.

        The question and the keys typed so far are drawn inside the live region, so the panels
        keep updating while the person thinks (stopping the region instead froze it and left its
        last frame above the question). Once answered, the question and its answer are printed
        once above the region, as a record.
        """
        question = [
            f"[bold yellow]?[/] [bold]{escape(agent)}[/] wants to run "
            f"[bold]{escape(call.name)}[/]({escape(call.arguments)})"
            for call in calls
        ]
        self._question, self._prompt, self._typed = question, "approve? [y/n]", ""
        try:
            while True:
                answer = (await self._read_answer()).strip().lower()
                if answer in {"y", "yes"} or answer in {"n", "no", ""}:
                    approved = answer in {"y", "yes"}
                    break
                self._typed = ""
        finally:
            self._question = []
            self._live.refresh()
        self._record(question, f"approve? [y/n] {'y' if approved else 'n'}")
        return approved

    async def ask_for(self, question: QuestionAsked) -> str:
        """Ask the person at the terminal for the file or image ``question`` wants: a path, an
        http(s)/data: URL, or nothing (a cancel). Drawn in the live region as :meth:`ask` is."""
        lines = [
            f"[bold yellow]?[/] [bold]{escape(question.agent)}[/] asks for "
            f"{escape(describe_question(question))}"
        ]
        self._question, self._prompt, self._typed = lines, UPLOAD_PROMPT, ""
        try:
            answer = (await self._read_answer()).strip()
        finally:
            self._question = []
            self._live.refresh()
        self._record(lines, f"{UPLOAD_PROMPT} {answer}")
        return answer

    def _record(self, question: list[str], answered: str) -> None:
        """The question and its answer, printed once above the region."""
        for line in question:
            self.console.print(line, soft_wrap=True)
        self.console.print(answered, markup=False)

    async def _read_answer(self) -> str:
        """One answer, key by key with the terminal's echo off (the frame shows the keys)."""
        fd = sys.stdin.fileno()
        if not os.isatty(fd):
            return await read_line()
        saved = termios.tcgetattr(fd)
        # No echo, no line buffering; Ctrl-C still signals. TCSANOW: what was typed before the
        # prompt (a paste, a fast typist after a refused answer) is kept, not flushed.
        tty.setcbreak(fd, termios.TCSANOW)
        try:
            while True:
                self._live.refresh()
                await anyio.wait_readable(fd)  # cancellable, and the event loop runs meanwhile
                keys = os.read(fd, 1024).decode(errors="replace")
                if not keys:
                    return self._typed  # end of input: what was typed (or a decline)
                for key in keys:
                    if key in "\r\n":
                        return self._typed
                    if key in "\x7f\b":
                        self._typed = self._typed[:-1]
                    elif key == "\x04":
                        return self._typed
                    elif key.isprintable():
                        self._typed += key
        finally:
            termios.tcsetattr(fd, termios.TCSADRAIN, saved)

    def _frame(self) -> RenderableType:
        view = self.view
        parts: list[RenderableType] = []
        label = "offline model" if view.offline else (self._model_label or view.model)
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
        for question_id, asked in view.questions.items():
            said = f"? {asked.agent} waits for {describe_question(asked)} [{question_id}]"
            parts.append(Text(said, "yellow"))
        parts.extend(Text(f"· {decision}", style="dim") for decision in view.decisions[-3:])
        parts.extend(Text(f"! {error}", style="red") for error in view.errors[-3:])
        parts.extend(_model_lines(view))
        if view.finished is not None:
            parts.append(Text(f"session {view.finished.status}", style="bold"))
        if self._question:
            parts.extend(Text.from_markup(line) for line in self._question)
            parts.append(Text(f"{self._prompt} {self._typed}▏"))
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


UPLOAD_PROMPT = "file path or URL (empty: cancel):"


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
