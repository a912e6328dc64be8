"""The calls one model reply makes: what the loop runs after a reply, and what its history records.

A reply's native calls pass the call rewriter (the model sees the calls that really ran); a reply
with none, when tools were offered, is read for calls written as text
(:mod:`baton.engine.textcalls`); a reply that looped repeating its calls runs each of them once,
up to its first terminal call. Apart from :class:`~baton.engine.model_step.ModelStep`, which asks
the model and decides when a reply is an answer, because this only reads replies: it asks
nothing, counts nothing and reports nothing but one log line.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Callable, Sequence

from baton.engine.textcalls import parse_text_calls
from baton.engine.tools import ToolRegistry
from baton.engine.turn import fingerprint
from baton.engine.visible import RunawayText, VisibleText
from baton.llm.types import ModelReply, ToolCall, ToolChoice

log = logging.getLogger(__name__)

CallRewriter = Callable[[ToolCall], ToolCall | None]
"""Maps a call the model made to the call to run (None: keep it as it is)."""


class ReplyCalls:
    """The calls of one agent's replies, under its tools, tool choice and call rewriter.

    ``label`` (``session/agent``) names the agent in the log line a reply with calls written as
    text gets.
    """

    __slots__ = ("call_rewriter", "label", "tool_choice", "tools")

    def __init__(
        self,
        tools: ToolRegistry,
        tool_choice: ToolChoice | None = None,
        call_rewriter: CallRewriter | None = None,
        *,
        label: str = "",
    ) -> None:
        self.tools = tools
        self.tool_choice = tool_choice
        self.call_rewriter = call_rewriter
        self.label = label

    @property
    def read_from_text(self) -> bool:
        """Whether a reply's text may hold calls that run: tools are offered, and not refused."""
        return bool(self.tools) and self.tool_choice != "none"

    async def settle(self, reply: ModelReply, visible: VisibleText) -> ModelReply:
        """The reply with its final calls: native ones rewritten, or calls read from its text."""
        if reply.tool_calls:
            await visible.finish(drop_held=True)
            await visible.finish_calls(reply.tool_calls)
            return self.rewritten(reply)
        found = parse_text_calls(reply.text, self._resolve) if self.read_from_text else None
        if found is None:
            await visible.finish(drop_held=False)
            return reply
        await visible.keep_only(found.rest)
        await visible.finish_calls(found.calls)
        log.info(
            "%s wrote %d tool call(s) as text: %s",
            self.label,
            len(found.calls),
            ", ".join(call.name for call in found.calls),
        )
        return dataclasses.replace(reply, text=found.rest, tool_calls=found.calls)

    def looped(self, runaway: RunawayText, visible: VisibleText) -> tuple[ToolCall, ...]:
        """The calls a reply made before it looped, each once (the repeat guard's identity of a
        call, :func:`~baton.engine.turn.fingerprint`), up to
        its first terminal call (where the model meant to stop: a 1.5B lead looped over an
        answer and sends that parroted a receipt): the native calls that streamed whole, or,
        when nothing was shown, calls written as text. The call the loop was found in never
        closed, so it is not among them."""
        if runaway.ended or not self.read_from_text:
            return ()
        calls: Sequence[ToolCall] = runaway.calls
        if not calls and not visible.shown:
            found = parse_text_calls(runaway.text, self._resolve)
            calls = found.calls if found is not None else ()
        once: dict[str, ToolCall] = {}
        for call in calls:
            once.setdefault(fingerprint(call.name, call.arguments), call)
            if self._ends_turn(call):
                break
        return tuple(once.values())

    def holds_calls(self, text: str) -> bool:
        """Whether ``text`` holds calls written as text that would run (see :meth:`settle`)."""
        return self.read_from_text and parse_text_calls(text, self._resolve) is not None

    def rewritten(self, reply: ModelReply) -> ModelReply:
        """Apply the call rewriter before the history records the calls, so the model sees the
        calls that really ran (e.g. ``send_message``, not the profile name it used as a tool)."""
        rewriter = self.call_rewriter
        if rewriter is None:
            return reply
        calls = tuple(rewriter(call) or call for call in reply.tool_calls)
        return dataclasses.replace(reply, tool_calls=calls)

    def _ends_turn(self, call: ToolCall) -> bool:
        tool = self.tools.get(call.name)
        if tool is None:
            return False
        try:
            arguments = json.loads(call.arguments or "{}")
        except ValueError:
            return False
        return isinstance(arguments, dict) and tool.is_terminal(arguments)

    def _resolve(self, call: ToolCall) -> ToolCall | None:
        """A call read from text runs when its tool is offered or the rewriter maps it."""
        rewritten = self.call_rewriter(call) if self.call_rewriter is not None else None
        if rewritten is not None:
            return rewritten
        return call if call.name in self.tools else None
