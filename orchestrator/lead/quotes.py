"""Whether a text the lead wrote repeats what the runtime told it: a language-free check.

The runtime speaks to the lead in three places: its system prompt, the results of its tools (a
send's receipt, a guard's notice) and the notes it adds to the conversation (``[note from
session] ...`` blocks, lead/prompt.py ``note_block``). Which messages those are is known by their
role and block, never by their words, so the check holds whatever they say and in any language.
A text sharing :data:`QUOTE_CHARS` characters in a row (case and spacing aside) with one of them
quotes it.

Two uses: the opt-in guided policy takes a *reply* that quotes any of them as no answer
(lead/heuristics.py), and every lead refuses a *send* whose task quotes the runtime's own words
(lead/dispatch.py): a 1.5B lead passed "Did not send: helper is already working on this task..."
to a new helper as its task. For a send only the runtime's own words count: notes and the results
of the delegation tools; a result of one of the lead's own tools (a page it fetched, a sum it
computed) is data the model may rightly pass on.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from difflib import SequenceMatcher
from typing import Any, cast

from baton.llm.types import Message

QUOTE_CHARS = 40
"""A text sharing this many characters in a row with something the runtime said quotes it."""

_NOTE_OPENING = re.compile(r"\s*\[\w+ from session\]")


def opens_a_note(text: str) -> bool:
    """Whether ``text`` opens like a note of the session (lead/prompt.py ``note_block``)."""
    return _NOTE_OPENING.match(text) is not None


def _is_note(message: Mapping[str, Any]) -> bool:
    content = message.get("content")
    return message.get("role") == "user" and isinstance(content, str) and opens_a_note(content)


def told_by_the_session(messages: Sequence[Message]) -> list[str]:
    """Everything the session wrote into the lead's context: its rules, every tool result, and
    its notes."""
    entries = [cast("Mapping[str, Any]", message) for message in messages]
    return [
        content
        for entry in entries
        if isinstance(content := entry.get("content"), str)
        and (entry.get("role") in ("tool", "system") or _is_note(entry))
    ]


def runtime_words(messages: Sequence[Message], delegation_tools: Collection[str]) -> list[str]:
    """What the runtime itself said to the lead: its notes, and the results of the calls of
    ``delegation_tools`` (receipts, refusals and guard notices of ``send_message`` and the
    per-profile tools). Not the system prompt (a profile's description may rightly be quoted in
    a task) and not the results of the lead's own tools (data it may pass on)."""
    called: dict[str, str] = {}
    said: list[str] = []
    for message in messages:
        entry = cast("Mapping[str, Any]", message)
        for call in entry.get("tool_calls") or ():
            called[str(call.get("id", ""))] = str(call.get("function", {}).get("name", ""))
        content = entry.get("content")
        if not isinstance(content, str):
            continue
        if _is_note(entry):
            said.append(content)
        elif entry.get("role") == "tool":
            if called.get(str(entry.get("tool_call_id", ""))) in delegation_tools:
                said.append(content)
    return said


def quoted(text: str, sources: Iterable[str]) -> str | None:
    """The first :data:`QUOTE_CHARS` or more characters of ``text`` found in one of
    ``sources`` (case and spacing folded), or None."""
    said = _folded(text)
    if len(said) < QUOTE_CHARS:
        return None
    for source in sources:
        told = _folded(source)
        if len(told) < QUOTE_CHARS:
            continue
        match = SequenceMatcher(None, said, told, autojunk=False).find_longest_match()
        if match.size >= QUOTE_CHARS:
            return said[match.a : match.a + match.size]
    return None


def _folded(text: str) -> str:
    return " ".join(text.casefold().split())
