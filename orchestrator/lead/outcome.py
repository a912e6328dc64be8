"""An honest outcome: the lead's final answer checked against what the tools really produced.

Every check here reads structure, never the words: the URLs an answer carries against the URLs the
tools and people gave, the sub-agents' exits, the sends the caps refused. So it holds for any model
and any language. On the final answer:

- every media URL a sub-agent produced that the answer leaves out is appended, exactly, under a
  ``Media:`` line (:func:`check_answer`);
- every ``http(s)://`` or ``file://`` URL in the answer (its text, and the ``media`` it presents)
  that is no media URL a sub-agent's result carried and appears in no message of a person (the
  task, follow-ups), the system prompt or the lead's own tool results is *invented* (``data:``
  URLs are not checked). The prose of a sub-agent's report does not count: its model invents
  ``example.com`` URLs as readily as the lead's, and only the media its tools produced are real.
  Of those, the ones the answer *presents as media* (its ``media`` argument, or a URL naming a
  media file: ``.png``, ``.mp4``, ...) are *invented media*, which a policy judges
  (lead/policy.py); a link to documentation is reported, not judged;
- why the work is not complete (:func:`structural_reasons`): work delegated that a sub-agent did
  not deliver (its exit and its last words named), sends the delegation caps refused, invented
  media, and an answer whose typed ``status`` is ``cannot``.

When the lead gives no answer (its model failed for good, or it stayed silent when asked),
:func:`composed_answer` writes one from what the sub-agents reported, so their work (and every
media URL) still reaches the session's result.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal
from urllib.parse import urlsplit

from baton.lead.roster import Roster
from baton.llm.types import Message

LeadStatus = Literal["completed", "incomplete", "failed", "cancelled", "timed_out"]
"""``incomplete``: the lead answered, but the work is not done as asked: a sub-agent did not
deliver, the caps refused sends, the answer presents media no tool made, the lead answered that it
cannot, or the final answer was cut or missing (docs/protocol.md, the policy's own reasons
besides: docs/small-models.md)."""


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
MEDIA_SUFFIXES = frozenset(
    ".png .jpg .jpeg .gif .webp .svg .bmp .tif .tiff .avif .heic .mp4 .webm .mov .mkv .avi .mp3 "
    ".wav .ogg .flac .m4a .pdf".split()
)
"""What a URL's path ends with when it names a media file (an answer citing one presents media)."""


@dataclass(frozen=True, slots=True)
class AnswerCheck:
    """The checked answer, what was appended and what was flagged."""

    answer: str
    missing_media: list[str] = field(default_factory=list)
    invented_urls: list[str] = field(default_factory=list)
    """Every URL of the answer that nobody gave (reported)."""
    invented_media: list[str] = field(default_factory=list)
    """Those of them the answer presents as media (judged)."""


def urls_in(text: str) -> list[str]:
    """The ``http(s)://``/``file://`` URLs in ``text``, in order, without trailing punctuation."""
    found = (match.group(0).rstrip(_TRAILING) for match in _URL.finditer(text))
    return list(dict.fromkeys(url for url in found if "://" in url and not url.endswith("://")))


def names_media_file(url: str) -> bool:
    """Whether ``url``'s path ends like a media file (``.../fox.png``, ``...clip.mp4?x=1``)."""
    path = urlsplit(url).path.casefold()
    dot = path.rfind(".")
    return dot > path.rfind("/") and path[dot:] in MEDIA_SUFFIXES


_BLOCK_HEADER = re.compile(r"^\[[\w-]+ from ([^\]]+)\]", re.MULTILINE)
"""An inbox block's header (lead/prompt.py); a sub-agent's content is defused, so it cannot
write one in another's name."""


def known_text(history: Sequence[Message], agents: Collection[str] = ()) -> str:
    """What the lead was *given* by a person or a tool: the system prompt, people's messages, and
    tool results; not what it wrote, not the session's own notes (one quotes the URLs it calls
    invented), and not the prose of the reports of ``agents`` (its sub-agents; their media URLs
    are known from the envelopes instead)."""
    parts: list[str] = []
    unknown = {*agents, "session"}
    for message in history:
        if message.get("role") == "assistant":
            continue
        texts = _texts(message.get("content"))
        if message.get("role") == "user" and all(_from_agents(t, unknown) for t in texts):
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
    presented: Iterable[str] = (),
    extra_known: Iterable[str] = (),
) -> AnswerCheck:
    """Append the media the answer left out, and flag the URLs nobody gave: all of them
    (``invented_urls``), and those presented as media (``presented``, the answer's ``media``
    argument, and media-file URLs in its text: ``invented_media``)."""
    media = roster.media_urls
    claimed = [url for url in presented if "://" in url]
    cited = list(dict.fromkeys([*urls_in(answer), *claimed]))
    known_urls = {_plain(url) for url in media}
    if any(_plain(url) not in known_urls for url in cited):  # only then read what it was given
        known = "\n".join([known_text(history, roster.agents), *extra_known])
        known_urls.update(_plain(url) for url in urls_in(known))
    invented = [url for url in cited if _plain(url) not in known_urls]
    as_media = [url for url in invented if url in claimed or names_media_file(url)]
    missing = [url for url in media if url not in answer]
    checked = answer
    if missing:
        listing = "\n".join(f"- {url}" for url in missing)
        checked = f"{answer.rstrip()}\n\nMedia:\n{listing}".lstrip()
    return AnswerCheck(checked, missing, invented, as_media)


def structural_reasons(
    check: AnswerCheck,
    roster: Roster,
    *,
    cannot: bool,
    unsent: bool = False,
    refused: Sequence[str] = (),
    media_profiles: Collection[str] = frozenset(),
) -> list[str]:
    """Why the work is not complete although the lead answered, from structure alone (empty when
    it is): the default policy's whole judgement (lead/policy.py)."""
    reasons: list[str] = []
    if refused:
        reasons.append(f"{len(refused)} send(s) to sub-agents were refused by the delegation caps")
    for name, record in roster.agents.items():
        if name in roster.successors or record.exit_reason in ("finished", ""):
            continue
        if roster.redone(name):  # its work was sent again and done
            continue
        said = _one_line(record.results[-1], 200) if record.results else "no report"
        reasons.append(f"{name} did not deliver ({record.exit_reason}): {said}")
    for name, record in roster.agents.items():
        if record.exit_reason == "finished" and record.tool_errors and not roster.redone(name):
            failed = "; ".join(_one_line(error, 200) for error in record.tool_errors)
            reasons.append(f"{name}'s tools failed: {failed}")
    asked = sorted({r.profile for r in roster.agents.values()} & set(media_profiles))
    if asked and not roster.media_urls and roster.delivered:
        reasons.append(
            f"no media was produced though a media-making agent was asked ({', '.join(asked)})"
        )
    if check.invented_media:
        reasons.append(
            f"the answer presents media that no tool produced: {', '.join(check.invented_media)}"
        )
    if cannot:
        reasons.append("the lead answered that it cannot do this")
    if unsent:
        reasons.append("the lead answered that the work is delegated, but it sent nothing")
    return reasons


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
