"""An honest outcome: the lead's final answer checked against what the tools really produced.

Small models leave the sub-agents' media URLs out of their answer, or invent URLs
(``https://via.placeholder.com/...``, ``example.com``) when nothing was made, and the session still
said "completed". So, on the final answer:

- every media URL a sub-agent produced that the answer leaves out is appended, exactly, under a
  ``Media:`` line;
- every ``http(s)://`` or ``file://`` URL in the answer that is no media URL a sub-agent's result
  carried and appears in no message of a person (the task, follow-ups), the system prompt or the
  lead's own tool results is *invented* (``data:`` URLs are not checked). The prose of a
  sub-agent's report does not count: its model invents ``example.com`` URLs as readily as the
  lead's, and only the media its tools produced are real;
- the status is ``incomplete`` (not ``completed``) when work was delegated and no sub-agent
  finished its work, when an agent of a media-making profile was asked and no media was produced
  at all, when the request asked for a picture (:func:`asks_for_media`) that a media-making
  profile could have made and no media was produced at all, when the answer cites invented URLs
  and no media was produced at all, or when the lead declined ("I'm sorry, but I can't...")
  without asking any sub-agent.

When the lead gives no answer (its model failed for good, or it stayed silent when asked),
:func:`composed_answer` writes one from what the sub-agents reported, so their work (and every
media URL) still reaches the session's result.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from baton.lead.roster import Roster
from baton.llm.types import Message

LeadStatus = Literal["completed", "incomplete", "failed", "cancelled", "timed_out"]
"""``incomplete``: the lead answered, but work was delegated and no sub-agent delivered a result,
media was asked of a media-making agent and none was produced, the answer cites URLs that no tool
produced while none were produced, the lead declined without delegating, or the final answer
was cut or missing (docs/protocol.md)."""


@dataclass(frozen=True, slots=True)
class LeadOutcome:
    """How the lead's work ended, its last answer and every media URL its sub-agents reported."""

    status: LeadStatus
    answer: str
    media_urls: list[str] = field(default_factory=list)
    error: str = ""
    invented_urls: list[str] = field(default_factory=list)
    """URLs in the answer that no tool, sub-agent or user message produced."""
    composed: bool = False
    """The lead gave no answer: baton composed it from the sub-agents' reports."""


_URL = re.compile(r"(?:https?|file)://[^\s<>\"'()\[\]{},|`]+", re.IGNORECASE)
_TRAILING = ".,;:!?*_'\""


@dataclass(frozen=True, slots=True)
class AnswerCheck:
    """The checked answer, what was appended and what was flagged."""

    answer: str
    missing_media: list[str] = field(default_factory=list)
    invented_urls: list[str] = field(default_factory=list)
    incomplete: str = ""
    """Why the work is not complete although the lead answered; empty when it is."""


def urls_in(text: str) -> list[str]:
    """The ``http(s)://``/``file://`` URLs in ``text``, in order, without trailing punctuation."""
    found = (match.group(0).rstrip(_TRAILING) for match in _URL.finditer(text))
    return list(dict.fromkeys(url for url in found if "://" in url and not url.endswith("://")))


_BLOCK_HEADER = re.compile(r"^\[[\w-]+ from ([^\]]+)\]", re.MULTILINE)
"""An inbox block's header (lead/prompt.py); a sub-agent's content is defused, so it cannot
write one in another's name."""


def known_text(history: Sequence[Message], agents: Collection[str] = ()) -> str:
    """What the lead was *given* by a person or a tool: the system prompt, people's messages and
    the session's notes, and tool results; not what it wrote, and not the prose of the reports
    of ``agents`` (its sub-agents; their media URLs are known from the envelopes instead)."""
    parts: list[str] = []
    for message in history:
        if message.get("role") == "assistant":
            continue
        texts = _texts(message.get("content"))
        if message.get("role") == "user" and all(_from_agents(t, agents) for t in texts):
            continue
        parts.extend(texts)
    return "\n".join(parts)


def _from_agents(text: str, agents: Collection[str]) -> bool:
    """Whether ``text`` is only inbox blocks, every one from a sub-agent."""
    senders = [match.group(1) for match in _BLOCK_HEADER.finditer(text)]
    return bool(senders) and text.startswith("[") and all(s in agents for s in senders)


def check_answer(
    answer: str,
    roster: Roster,
    history: Sequence[Message],
    *,
    media_profiles: Collection[str] = frozenset(),
    extra_known: Iterable[str] = (),
    request: str = "",
) -> AnswerCheck:
    """Append the media the answer left out, flag the URLs nobody produced, judge completeness.

    ``media_profiles``: the profiles whose tools make media; an agent of one that was asked while
    no media came back at all makes the work incomplete, and so does ``request`` (the person's
    newest) asking for a picture while one of them is on offer and no media came back.
    """
    known = "\n".join([known_text(history, roster.agents), *extra_known])
    known_urls = {_plain(url) for url in urls_in(known)}
    media = roster.media_urls
    known_urls.update(_plain(url) for url in media)
    invented = [url for url in urls_in(answer) if _plain(url) not in known_urls]
    missing = [url for url in media if url not in answer]
    checked = answer
    if missing:
        listing = "\n".join(f"- {url}" for url in missing)
        checked = f"{answer.rstrip()}\n\nMedia:\n{listing}".lstrip()
    incomplete = ""
    asked = sorted({r.profile for r in roster.agents.values()} & set(media_profiles))
    if roster.agents and not roster.delivered:
        incomplete = "work was delegated and no sub-agent delivered a result"
    elif asked and not media:
        incomplete = (
            f"no media was produced though a media-making agent was asked ({', '.join(asked)})"
        )
    elif invented and not media:
        incomplete = f"the answer cites URLs that no tool produced: {', '.join(invented)}"
    elif not media and picture_asked(request, media_profiles, roster.profiles):
        incomplete = "the request asked for a picture and no sub-agent produced any media"
    elif not roster.agents and roster.profiles and declines(answer):
        incomplete = "the lead declined the request without asking any sub-agent"
    return AnswerCheck(checked, missing, invented, incomplete)


_MEDIA_NOUN = (
    r"(?:pictures?|images?|photos?|photographs?|drawings?|paintings?|illustrations?|sketch(?:es)?"
    r"|portraits?|posters?|logos?|icons?|diagrams?|renderings?|artworks?|videos?|animations?)"
)
_ASKS_FOR_MEDIA = re.compile(
    r"(?:^|[.!?;:,]\s*|\b(?:please|can you|could you|would you|will you|you to|and|then)\s+)"
    r"(?:paint|draw|sketch|illustrate)\b"
    r"|\b(?:paint|draw|sketch|illustrate|render|generate|create|make|produce|design|get me|give me"
    r"|send me|show me|need|want|like)\b[^.?!\n]{0,40}?\b" + _MEDIA_NOUN + r"\b",
    re.IGNORECASE,
)


def asks_for_media(request: str) -> bool:
    """Whether ``request`` asks for a picture (or another medium) to be made: "paint a fox",
    "I need a picture of...", "create an image of...", "make three pictures". A question *about*
    pictures ("which image format is best?") is not. English only: a heuristic that errs towards
    "not asked", so a plain answer is never judged incomplete by it; what it misses is judged by
    the other rules."""
    return _ASKS_FOR_MEDIA.search(request.strip()) is not None


def picture_asked(request: str, media_profiles: Collection[str], offered: Iterable[str]) -> bool:
    """Whether ``request`` asks for a picture (:func:`asks_for_media`) that a profile on offer
    can make (one of ``media_profiles``): the lead routes it when it answers in words
    (lead/agent.py), and a session that made no media for it is not completed."""
    return bool(set(media_profiles) & set(offered)) and asks_for_media(request)


_DECLINE = re.compile(
    r"\b(?:sorry|unfortunately|apologi[sz]e|apologies)\b[^.!?\n]{0,40}?"
    r"\b(?:can(?:no|')t|can ?not|won't|will not|unable|not able|do not have|don't have)\b"
    r"(?P<rest>[^.!?\n]*)",
    re.IGNORECASE,
)


def declines(answer: str) -> bool:
    """Whether ``answer`` opens by declining ("I'm sorry, but I can't assist with that"): a lead
    with sub-agents that delegated nothing and declined has not done the work, although it
    answered (a 0.5B lead declined "paint a lighthouse" twice, even with its painter named). A
    decline that goes on to answer ("..., but Paris is the capital") is an answer."""
    head = answer.strip()[:200].replace("\u2019", "'")
    match = _DECLINE.search(head)
    return match is not None and not re.search(r"\bbut\b", match.group("rest"), re.IGNORECASE)


def failure_answer(error: str, roster: Roster) -> str:
    """The answer of a lead whose model failed for good: what each sub-agent reported, and every
    media URL they produced, so their work is not lost with the lead."""
    return composed_answer(f"The lead's model failed ({error or 'model error'})", roster)


def composed_answer(why: str, roster: Roster) -> str:
    """An answer written for a lead that gave none (``why``): what each sub-agent reported, and
    every media URL they produced."""
    lines = [f"{why}, so this answer was composed from the sub-agents' reports."]
    reported = [(name, r) for name, record in roster.agents.items() for r in record.results]
    if reported:
        lines += ["", "Results:"]
        lines += [f"- {name}: {_one_line(text)}" for name, text in reported]
    else:
        lines += ["", "No sub-agent reported a result."]
    missing = roster.outstanding
    if missing:
        lines.append(f"Still working when the session ended: {', '.join(missing)}.")
    media = roster.media_urls
    if media:
        lines += ["", "Media:", *(f"- {url}" for url in media)]
    return "\n".join(lines)


def _plain(url: str) -> str:
    return url.rstrip("/")


def _one_line(text: str, limit: int = 400) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _texts(content: object) -> list[str]:
    """The text of a message's content: a string, or the text parts of a list of parts."""
    if isinstance(content, str):
        return [content]
    if isinstance(content, list):
        texts: list[str] = []
        for part in content:
            if isinstance(part, dict):
                for key in ("text", "image_url"):
                    value = part.get(key)
                    if isinstance(value, str):
                        texts.append(value)
                    elif isinstance(value, dict) and isinstance(value.get("url"), str):
                        texts.append(value["url"])
        return texts
    return []
