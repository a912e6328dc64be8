"""English heuristics over a model's words: the small-model aids of the opt-in guided policy.

Each function here reads prose and answers a yes/no a policy can act on. None of them is right for
every model, language and request, which is why none runs by default: the default policy judges
structure only (lead/policy.py), and these serve :class:`~baton.lead.guided.GuidedPolicy`, chosen
by setting or by a model profile for small models (docs/small-models.md lists each with its
trigger, its switch and its language). They are English, and err towards "no": a heuristic that
misses leaves the model's answer as it was.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Sequence

from baton.lead.quotes import opens_a_note, quoted, told_by_the_session
from baton.llm.types import Message

_MEDIA_NOUN = (
    r"(?:pictures?|images?|photos?|photographs?|drawings?|paintings?|illustrations?|sketch(?:es)?"
    r"|portraits?|posters?|logos?|icons?|diagrams?|renderings?|artworks?|videos?|animations?)"
)
_OBJECT = (
    r"(?:an?|the|me|us|him|her|them|it|my|our|your|his|their|this|that|these|those|some|several"
    r"|one|two|three|four|five|six|seven|eight|nine|ten|\d+)"
)
"""What follows the verb of a picture asked for by the verb alone ("paint *a* fox", "draw *me* a
cat", "sketch *the* lighthouse"); "draw conclusions", "draw attention to" take no such word."""
_ASKS_FOR_MEDIA = re.compile(
    r"(?:^|[.!?;:,]\s*|\b(?:please|can you|could you|would you|will you|you to|and|then)\s+)"
    r"(?:paint|draw|sketch|illustrate)\s+" + _OBJECT + r"\b"
    r"|\b(?:paint|draw|sketch|illustrate|render|generate|create|make|produce|design|get me|give me"
    r"|send me|show me|need|want|like)\b[^.?!\n]{0,40}?\b" + _MEDIA_NOUN + r"\b",
    re.IGNORECASE,
)


def asks_for_media(request: str) -> bool:
    """Whether ``request`` asks for a picture (or another medium) to be made: "paint a fox",
    "I need a picture of...", "create an image of...", "make three pictures". A question *about*
    pictures ("which image format is best?") is not, nor is another sense of the verb ("draw
    conclusions from this": the verb alone counts only before an object such as "a", "the",
    "me"). English only: a heuristic that errs towards
    "not asked", so a plain answer is never judged incomplete by it; what it misses is judged by
    the other rules."""
    return _ASKS_FOR_MEDIA.search(request.strip()) is not None


def named_profiles(request: str, profiles: Iterable[str]) -> list[str]:
    """The profiles ``request`` names by their name as a word ("have the *writer* write …",
    "demande au *painter*"): the person asked for them. A name is a runtime identifier, so this
    holds in any language the person writes the name in; a profile named like a common word
    ("helper") matches that word too, which errs towards routing to it."""
    folded = request.casefold()
    return [
        name
        for name in profiles
        if re.search(rf"(?<![\w-]){re.escape(name.casefold())}(?![\w-])", folded)
    ]


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


def quotes_what_it_was_told(reply: str, messages: Sequence[Message]) -> bool:
    """Whether ``reply`` repeats one of the lead's tool results, its system prompt or a note
    from the session (lead/quotes.py). The lead's tools are its delegation (lead/dispatch.py):
    their results are receipts and guard notices meant for the lead alone ("...already called 3
    times with the exact same arguments"), and small models hand them to the user as the answer,
    as they do their rules ("You must call a tool in every reply: to reply to the user...") and
    the session's notes (a 0.5B lead answered "You have delegated enough for this request. All
    delegated work is in..."). The sub-agents' results reach the lead as user messages of their
    own block (``[result from painter]``), so quoting those stays an answer."""
    return quoted(reply, told_by_the_session(messages)) is not None


_TO_THE_LEAD = (
    "arrive in your inbox",
    "do not wait or poll",
    "you gave no final answer",
    "your previous reply was cut off after",
    "a few sentences at most, with no repetition",
    "through the tools interface instead of writing about it",
)
"""Phrases of what the session tells the lead (the receipt of a send, lead/dispatch.py; the notes
asking for the final answer or sending back an answer that delegated nothing, lead/agent.py; the
engine's request to reply again shorter, engine/messages.py ``reply_cut``) that no answer to a
person contains."""


def echoes_note(text: str) -> bool:
    """Whether ``text`` repeats what the session told the lead: it opens like a
    :func:`note_block` (a 1.5B lead "answered" with "[note from session] All delegated work is
    in") or quotes a send's receipt (a 0.5B lead answered "...Its result will arrive in your
    inbox: do not wait or poll"). Such a reply is no answer."""
    folded = text.casefold()
    return opens_a_note(text) or any(p in folded for p in _TO_THE_LEAD)
