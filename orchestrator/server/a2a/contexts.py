"""A2A contexts over baton sessions: which context a task is in, and a context's tasks.

A context is a conversation of tasks one after the other (docs/a2a.md, *Ids*). Its first task is
a session whose id is also the context's id; a message naming only the context once its newest
task has ended starts the next task, a session with the id ``<context>.t<n>`` (n = 2, 3, ...).
So a session's context is written in its own id, and nothing more is kept on the bus: a task's
context lives exactly as long as the task (docs/bus.md, *Retention*), every server on the bus
reads it alike, and two messages racing to start task ``n`` draw the same id, so only one can
(the other finds it running and becomes its follow-up).

A context's tasks are the sessions in the bus's index whose id is the context's or has its
``.t<n>`` form, ordered by ``n``; the oldest expire first (each ended before the next began).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from baton.bus.ids import NAME_MAX

_LATER = re.compile(r"^(?P<context>.+?)\.t(?P<n>[1-9][0-9]{0,8})$")
EXCHANGE_ITEM = 2_000
"""The most characters of one earlier request or answer a new task's lead is given."""
EXCHANGE_TOTAL = 12_000
"""The most characters of earlier exchange a new task's lead is given (the newest kept)."""


def parse(task: str) -> tuple[str, int]:
    """The context of ``task`` and its number in it (1: the context's first task)."""
    found = _LATER.match(task)
    if found is None or int(found["n"]) < 2:
        return task, 1
    return found["context"], int(found["n"])


def context_of(task: str) -> str:
    """The context a task (session) is in."""
    return parse(task)[0]


def task_id(context: str, number: int) -> str:
    """The id of task ``number`` of ``context``."""
    return context if number == 1 else f"{context}.t{number}"


def id_problem(context: str, number: int) -> str | None:
    """Why the next task of ``context`` cannot have a session id (too long), or None."""
    if len(task_id(context, number)) > NAME_MAX:
        return (
            f"context {context[:80]!r}: its task ids would be over {NAME_MAX} characters; "
            "send the message without contextId to start a new context"
        )
    return None


def tasks_of(context: str, sessions: Sequence[str]) -> list[str]:
    """The tasks of ``context`` among ``sessions``, oldest first."""
    numbered = []
    for session in sessions:
        found, number = parse(session)
        if found == context:
            numbered.append((number, session))
    return [session for _, session in sorted(numbered)]


@dataclass(frozen=True, slots=True)
class Turn:
    """One earlier task of a context: what was asked, and its final answer."""

    task: str
    request: str
    answer: str


_HEAD = re.compile(
    r"^\[Earlier in this conversation \(A2A context [^\]\n]*\), oldest first: "
    r"(?P<length>[0-9]{1,6}) characters, then the new request\]\n"
)
_NEW = "\n\n[The new request]\n"


def _clip(text: str, limit: int) -> str:
    text = text.strip()
    return text if len(text) <= limit else f"{text[: limit - 15].rstrip()} ... (cut short)"


def exchange_text(turns: Sequence[Turn]) -> str | None:
    """The earlier tasks' requests and answers, oldest first, each bounded and the whole too (the
    oldest dropped first); None when there are none."""
    blocks: list[str] = []
    used = 0
    for turn in reversed(turns):
        block = (
            f"(task {turn.task}) request: {_clip(turn.request, EXCHANGE_ITEM)}\n"
            f"answer: {_clip(turn.answer, EXCHANGE_ITEM) or '(none)'}"
        )
        if blocks and used + len(block) > EXCHANGE_TOTAL:
            break
        blocks.append(block)
        used += len(block)
    if not blocks:
        return None
    left_out = len(turns) - len(blocks)
    if left_out:
        blocks.append(f"({left_out} older task(s) left out for length)")
    return "\n\n".join(reversed(blocks))


def exchange_note(context: str, exchange: str | None) -> str:
    """What a context's next session is given of the conversation so far (``SessionConfig``
    ``context``: a note the lead reads ahead of its task, which stays the new request as the
    client wrote it); empty when there was nothing before."""
    if not exchange:
        return ""
    return f"Earlier in this conversation (A2A context {context}), oldest first:\n{exchange}"


def request_of(task: str) -> str:
    """The request a session's task carries: the task itself (a session started before the
    earlier exchange became its own note carried it ahead of the request, which is read past)."""
    found = _HEAD.match(task)
    if found is None:
        return task
    rest = task[found.end() + int(found["length"]) :]
    return rest[len(_NEW) :] if rest.startswith(_NEW) else task
