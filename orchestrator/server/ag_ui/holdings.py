"""What a client already holds of a thread, read from the messages of its run input.

A client sends its whole history with every run; the messages that came from baton's own
stream carry baton's ids (:mod:`.mapping`), so they say which text, tool calls and results the
client has — and so where its stream stopped, when it comes back without a cursor
(:mod:`.stream`), and what a replay must not send again.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from ag_ui.core import AssistantMessage, Message


@dataclass(slots=True)
class Holdings:
    """What a client already holds of a thread, from the messages of its run input: the text of
    each assistant message, each tool call's arguments, every message id."""

    text: dict[str, int] = field(default_factory=dict)
    arguments: dict[str, str] = field(default_factory=dict)
    ids: set[str] = field(default_factory=set)
    written: set[str] = field(default_factory=set)
    """The ids of the messages the application wrote itself (user, system, developer)."""

    @property
    def witness(self) -> bool:
        """Whether the client sent anything it was sent (assistant or tool messages): one that
        sends only what it wrote itself says nothing about where its stream stopped."""
        return bool(self.text) or bool(self.ids - self.written)

    @classmethod
    def of(cls, messages: Iterable[Message]) -> Holdings:
        held = cls()
        for message in messages:
            held.ids.add(message.id)
            if message.role in ("user", "system", "developer"):
                held.written.add(message.id)
            if isinstance(message, AssistantMessage):
                held.text[message.id] = len(message.content or "")
                for call in message.tool_calls or ():
                    held.arguments[call.id] = call.function.arguments
        return held


@dataclass(slots=True)
class HeldMark:
    """Where a client's stream stopped, found as the log is folded: each event whose content
    the translation would send says whether the client holds it whole (:meth:`note`), and the
    first it lacks, with the last it holds before that, mark the place (:mod:`.stream`)."""

    cursor: str | None = None
    """The logged event being folded."""
    held_through: str | None = None
    """The cursor of the last logged event whose content the client holds whole."""
    missing_from: str | None = None
    """The cursor of the first logged event whose content the client lacks (in part)."""

    def note(self, whole: bool) -> None:
        """Whether the client holds the content of the event being folded."""
        if not whole and self.missing_from is None:
            self.missing_from = self.cursor
        elif whole and self.missing_from is None:
            self.held_through = self.cursor
