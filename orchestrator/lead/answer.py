"""The lead's typed answer: ``answer(text, status, media)``, the call that ends a request's turn.

The lead decides by structure, not by reading its model's prose: a turn ends with a call the
runtime reads without understanding language. ``send_message`` delegates; ``answer`` replies, with

- ``text``, the reply itself, shown to every view token by token while the call's arguments
  stream (``Tool.shows``, :mod:`baton.engine.visible`), so a typed answer costs no latency;
- ``status``: ``done`` (answered), ``delegated`` (the work is sent to sub-agents and under way)
  or ``cannot`` (neither the lead nor a sub-agent on offer can do it): a decline is a field, not a
  regex hit, and a claim that work is under way is one the runtime checks against what was sent;
- ``media``: the media URLs the answer presents, which the runtime checks against what the tools
  produced (a URL no tool made is *invented*, whatever language the text is in).

Both are offered together under the lead's ``tool_choice`` (``required`` by default), so
"delegate" and "answer" are both typed calls, and a reply given as plain text (a model asked with
``tool_choice="auto"``, or a turn asked without tools) is read as ``answer(text)``: ``done``, with
the URLs its text cites. docs/lead.md says why this shape was chosen over the alternatives.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Collection
from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import Field

from baton.engine import Tool
from baton.engine.textcalls import parse_text_calls
from baton.llm.types import ToolCall

ANSWER = "answer"

AnswerStatus = Literal["done", "delegated", "cannot"]
STATUSES: tuple[AnswerStatus, ...] = ("done", "delegated", "cannot")


@dataclass(frozen=True, slots=True)
class Answer:
    """What a turn of the lead answered, typed."""

    text: str
    status: AnswerStatus = "done"
    media: tuple[str, ...] = ()
    """The URLs the answer presents as media (its ``media`` argument)."""
    typed: bool = False
    """Given through the ``answer`` tool (False: a plain-text reply read as one)."""

    @property
    def silent(self) -> bool:
        """No words at all: no answer a person can read."""
        return not self.text.strip()


def answer_tool(taken: Collection[str]) -> Tool | None:
    """``answer(text, status, media)`` (terminal; ``text`` shown as it streams); None when another
    tool already has the name."""
    if ANSWER in taken:
        return None
    return _answer_tool()


async def answer(
    text: Annotated[str, Field(description="your whole reply to the user")],
    status: Annotated[
        AnswerStatus,
        Field(
            description=(
                "'done': you answered the request yourself; 'delegated': you sent the work "
                "to sub-agents with send_message and it is under way; 'cannot': neither you "
                "nor any sub-agent can do it (say why in text)"
            )
        ),
    ] = "done",
    media: Annotated[
        list[str] | None,
        Field(
            description=(
                "the media URLs your sub-agents reported that this answer presents, exactly "
                "as given; never a URL you made up"
            )
        ),
    ] = None,
) -> str:
    return "Answered."


@functools.cache
def _answer_tool() -> Tool:
    """The one ``answer`` tool of the process: it is the same for every lead (its calls are read
    by the lead, never run for an effect), and building a tool builds its argument model and
    schema, which each lead paid for again."""
    return Tool(
        answer,
        name=ANSWER,
        terminal=True,
        shows="text",
        description=(
            "Reply to the user: your answer, or after delegating a short note that the work is "
            "under way. Only `text` is shown to the user."
        ),
    )


def answer_of(call: ToolCall | None) -> Answer | None:
    """The typed answer of a turn that ended with an ``answer`` call; None for any other end.
    Arguments a lenient reader can use are used (a missing ``status`` is ``done``; a ``media``
    entry that is not a string is skipped): a small model's slightly-off call is still its
    answer, and the checks that matter (URLs, delegation) are made on what it says."""
    if call is None or call.name != ANSWER:
        return None
    try:
        args = json.loads(call.arguments or "{}")
    except ValueError:
        return None
    if not isinstance(args, dict) or not isinstance(args.get("text"), str):
        return None
    status: AnswerStatus = next((s for s in STATUSES if s == args.get("status")), "done")
    media = args.get("media")
    presented = (
        tuple(url for url in media if isinstance(url, str)) if isinstance(media, list) else ()
    )
    return Answer(args["text"], status, presented, typed=True)


def written_answer(text: str) -> Answer:
    """A plain-text reply as an answer: an ``answer`` call written out as text (``{"name":
    "answer", "arguments": {"text": ...}}``, fenced or bare) is read as the call it is, as a 1.5B
    lead wrote its final reply when asked without tools; calls of other tools written out as text
    (a ``send_message`` after the work was done) are no reply and are dropped."""
    found = parse_text_calls(text, lambda call: call)
    if found is None:
        return Answer(text)
    answers = [answer for call in found.calls if (answer := answer_of(call)) is not None]
    said = "\n\n".join(part for part in (found.rest, *(a.text for a in answers)) if part)
    status: AnswerStatus = next(
        (s for s in ("cannot", "delegated") if any(a.status == s for a in answers)), "done"
    )
    media = tuple(dict.fromkeys(url for answer in answers for url in answer.media))
    return Answer(said, status, media, typed=bool(answers))
