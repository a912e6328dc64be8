"""The lead's ``answer`` tool, offered when its ``tool_choice`` is ``"required"``.

Small models make a valid tool call far more often when the request says ``tool_choice="required"``
(8/8 against 2/8 on a 1.5B model), but a request that requires a tool call can never get a plain
answer: the lead would have to delegate again after delegating, and again at every turn. So a lead
that requires tool calls is also given ``answer(text)``, a terminal tool: the turn ends with that
text as the lead's reply, streamed to the viewers as the lead's text, and a plain question is
answered by calling it without delegating.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from typing import Annotated

from pydantic import Field

from baton.bus.events import TextDelta
from baton.engine import EventSink, Tool
from baton.engine.textcalls import parse_text_calls
from baton.lead.prompt import LEAD_NAME
from baton.llm.types import ToolCall

ANSWER = "answer"


def answer_tool(session: str, events: EventSink | None, taken: Collection[str]) -> Tool | None:
    """``answer(text)`` (terminal), which shows ``text`` as the lead's reply; None when another
    tool already has the name."""
    if ANSWER in taken:
        return None

    async def answer(text: str) -> str:
        if events is not None and text:
            await events(TextDelta(session=session, agent=LEAD_NAME, text=text))
        return "Answered."

    answer.__annotations__ = {
        "text": Annotated[str, Field(description="your whole reply to the user")],
        "return": str,
    }
    return Tool(
        answer,
        name=ANSWER,
        terminal=True,
        description=(
            "Reply to the user: your answer, or after delegating a short note that the work is "
            "under way. Only this text is shown to the user."
        ),
    )


def answered_text(call: ToolCall | None) -> str | None:
    """The text of a terminal ``answer`` call, or None when the turn did not end with one."""
    if call is None or call.name != ANSWER:
        return None
    try:
        args = json.loads(call.arguments or "{}")
    except ValueError:
        return None
    text = args.get("text") if isinstance(args, dict) else None
    return text if isinstance(text, str) else None


def text_answer(text: str) -> str:
    """``text`` as a reply a person can read: an ``answer`` call written out as text (``{"name":
    "answer", "arguments": {"text": ...}}``, fenced or bare) becomes its text, as a 1.5B lead
    wrote its final reply when asked without tools; calls of other tools written out as text
    (a ``send_message`` after the work was done) are no reply and are dropped."""
    found = parse_text_calls(text, lambda call: call)
    if found is None:
        return text
    answers = [answered_text(call) for call in found.calls if call.name == ANSWER]
    said = [answer for answer in answers if answer]
    return "\n\n".join(part for part in (found.rest, *said) if part)
