"""Routing a request the lead evaded: one forced choice of a profile, the request as its task.

Small models answer work they cannot do without doing it, even with the profiles listed and the
answer sent back once (lead/agent.py ``_sent_back``): a 1.5B lead answered "Make three pictures: a
fox, a heron and a cat" with "The fox, the heron, and the cat are three pictures." twice, and a
drawing request with "As an AI language model, I do not have access to...". Asked to *write* a
delegation instead, the same model runs away in the task text or invents a picture. What it does
reliably is pick one name from an enum when a tool call is required (the server then constrains
the output to the schema). So an evasive answer (:func:`evades`) is routed: one request offering
only ``route(to)``, ``to`` one of the profiles, with ``tool_choice="required"``. A request for a
picture is routed among the profiles that make media only (a 1.5B router sent "paint a
lighthouse" to the helper), and with one such profile it goes there with no request. The chosen
profile gets the person's request, exactly as written, as its task (a second profile chosen for
the same request is refused as a repeat, like any task sent twice: one agent does the whole
request). The request is self-contained by construction (a person wrote it to the lead), so no
model has to restate it.

A plain question answered plainly never gets here: an answer that says something the request did
not (Paris, for "the capital of France") is no restatement, and a refusal is one only when it says
the model cannot *do* or *make* something.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping
from typing import Annotated

from pydantic import Field, JsonValue

from baton.engine import Tool, ToolResult
from baton.lead.outcome import asks_for_media, declines

ROUTE = "route"

ROUTE_NOTE = (
    "Your answer did not do the request: it is work for your sub-agents. Choose who does it: "
    "call route once, with `to` set to the profile that fits it best. The request is passed "
    "on to it exactly as the user wrote it."
)
"""What the routing request adds to the lead's context (in a copy: the real context gets the
sends as ``send_message`` calls, lead/checkpoint.py ``turn_messages``)."""

Route = Callable[[str], Awaitable[str | ToolResult]]
"""``route(profile)`` -> what ``send_message`` answered for the request sent to that profile."""


def route_tool(profiles: Mapping[str, str], route: Route) -> Tool:
    """``route(to)`` (terminal), ``to`` an enum of the profiles, each described."""

    async def route_(to: str) -> str | ToolResult:
        return await route(to)

    listing = "; ".join(f"{name}: {description}" for name, description in profiles.items())
    to_field = Field(
        description=f"the profile that does the request ({listing})",
        json_schema_extra={"enum": list[JsonValue](profiles)},
    )
    route_.__annotations__ = {"to": Annotated[str, to_field], "return": str | ToolResult}
    return Tool(
        route_,
        name=ROUTE,
        terminal=True,
        description="Hand the user's request, as written, to a new sub-agent of a profile.",
    )


_WORD = re.compile(r"[^\W\d_][\w'-]*", re.UNICODE)
_FILLER = frozenset(
    """a an the and or but of to in on at by for with from into as is are was were be been being
    it its it's this that these those there here you your yours i me my we our they them their
    he she his her have has had do does did will would can could shall should may might must
    so such very just also too some any all each both one which what who whom whose when where
    how why not no yes please thank thanks ok okay sure now then than only""".split()
)
"""Words that carry no content of their own: what is left is what an answer *says*."""

RESTATES_MAX_NEW = 0.2
"""An answer restates the request when at most this share of its content words is new."""
RESTATES_MIN_WORDS = 3
"""Fewer content words than this ("Yes.", "4") is too little to call a restatement."""


def _content(text: str) -> list[str]:
    words = (word.casefold().strip("'-") for word in _WORD.findall(text))
    return [_stem(word) for word in words if len(word) > 1 and word not in _FILLER]


def _stem(word: str) -> str:
    """Plural and possessive endings off, so "pictures" is "picture" and "fox's" is "fox"."""
    for ending in ("'s", "es", "s"):
        if word.endswith(ending) and len(word) - len(ending) >= 3:
            return word[: -len(ending)]
    return word


def restates(answer: str, request: str) -> bool:
    """Whether ``answer`` only says back what ``request`` asked (nearly every content word of it
    is the request's): no answer, and no work done."""
    said = _content(answer)
    if len(said) < RESTATES_MIN_WORDS:
        return False
    asked = set(_content(request))
    new = [word for word in said if word not in asked]
    return len(new) <= RESTATES_MAX_NEW * len(said)


_DISCLAIMS = re.compile(
    r"\bas an? (?:ai|artificial intelligence|language model|text-based)\b"
    r"|\bI (?:do not|don't|cannot|can't|can not|am unable to|am not able to|have no way to)"
    r"(?: have the (?:ability|capability) to| directly)? "
    r"(?:create|generate|draw|paint|produce|make|render|design|display|show|see|access)\b",
    re.IGNORECASE,
)
DISCLAIM_HEAD = 300
"""Only the opening counts: a disclaimer buried in a long answer rarely means the work was left."""


def disclaims(answer: str) -> bool:
    """Whether ``answer`` opens by saying the model cannot make or do the thing ("As an AI
    language model, I cannot create images")."""
    head = answer.strip()[:DISCLAIM_HEAD].replace("\u2019", "'")
    return _DISCLAIMS.search(head) is not None


def refuses(answer: str) -> bool:
    """Whether ``answer`` says the work cannot be done: it declines or disclaims. After the
    sub-agents delivered, such a final answer is none (a 1.5B lead answered "I'm sorry, but I
    can't assist with that request" with the results in its context): it is asked for again."""
    return declines(answer) or disclaims(answer)


def evades(answer: str, request: str) -> bool:
    """Whether ``answer`` to ``request`` left the work undone while saying so, or said nothing
    new: it declines, disclaims or restates the request. A silent turn is not one: the lead is
    asked for its answer without tools then (lead/ending.py)."""
    return refuses(answer) or restates(answer, request)


def evades_work(answer: str, request: str) -> bool:
    """Whether ``answer`` evades ``request`` (:func:`evades`), or says nothing at all to a request
    for a picture (:func:`~baton.lead.outcome.asks_for_media`): a 1.5B lead "answered" a
    lighthouse painting with its own rules, which is no reply. A silent answer to anything else
    is asked for again instead (lead/ending.py)."""
    if not answer.strip():
        return asks_for_media(request)
    return evades(answer, request)
