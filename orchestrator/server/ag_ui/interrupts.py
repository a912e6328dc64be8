"""Every question to a person as an AG-UI interrupt, and a run's ``resume`` entries as answers.

An agent asks a person three things (docs/questions.md): may these gated calls run, give me a
file, show me an image. Each open question becomes one :class:`~ag_ui.core.Interrupt` whose id
is ``<session>:<question id>`` (for an approval, the question's id is the gated call's id, which
``baton approve``/``baton upload`` and the HTTP API take): the sessions of a thread number their
questions anew, and the session in the id keeps them apart (:mod:`.ledger`). Its
``responseSchema`` asks for what the question needs:

- an approval (``reason`` ``tool_approval``): ``{approved: boolean, reason: string}``;
- a file (``file_upload``) or an image (``image_pick``): ``{url, name, mediaType}``, ``url``
  being an ``http(s)`` URL the agent can open or a ``data:`` URL carrying the bytes (stored in
  the server's media store first, as ``baton upload`` stores a file, and checked the same way:
  size, the types the question accepts).

A ``resume`` entry answers by id a question of the thread's live session: ``resolved`` with
``approved: true`` approves, ``resolved`` with ``approved: false`` declines with its ``reason``,
``cancelled`` declines (an approval) or cancels (a file). Every entry is checked before any is
sent, so a run whose resume does not fit is refused whole (422) and nothing is answered. An
entry for a question that is no longer open — of any session of the thread — is not an error (a
resume is safe to send again): it is reported in the stream (``CUSTOM``
``baton.resume.ignored``) with why — already answered (and how), closed unanswered when its
session ended, never asked, or *expired*: a question nobody answered in time declined itself
when it expired, which is an expiry, never the person's decline, even where the session has
ended since.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote_to_bytes, urlsplit

from ag_ui.core import Interrupt, ResumeEntry
from pydantic import JsonValue

from baton.engine.questions import (
    UPLOAD_MAX_BYTES,
    AnswerRefused,
    Cancelled,
    Decision,
    OpenQuestion,
    Provided,
    QuestionNotFound,
    check_reply,
    media_type_of,
)
from baton.media import extension_for
from baton.server.ag_ui.ledger import Ledger, split_interrupt_id

APPROVAL_REASON = "tool_approval"
REASONS = {"approval": APPROVAL_REASON, "upload": "file_upload", "image": "image_pick"}
CANCELLED_REASON = "cancelled from the AG-UI client"

APPROVAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "approved": {"type": "boolean", "description": "true lets the call run; false declines it"},
        "reason": {"type": "string", "description": "why (shown to the agent)", "maxLength": 2000},
    },
    "required": ["approved"],
}


def media_schema(question: OpenQuestion) -> dict[str, Any]:
    """What a question for a file or an image asks for: where the file is, or its bytes."""
    what = "the file" if question.kind == "upload" else "the image"
    accept = f" It must be one of: {', '.join(question.accept)}." if question.accept else ""
    return {
        "type": "object",
        "properties": {
            "url": {
                "type": "string",
                "description": f"an http(s) URL of {what}, or a data: URL with its bytes "
                f"(base64, at most {UPLOAD_MAX_BYTES} bytes).{accept}",
            },
            "name": {"type": "string", "description": f"{what}'s name, e.g. notes.txt"},
            "mediaType": {"type": "string", "description": "its media type, e.g. image/png"},
        },
        "required": ["url"],
    }


def to_interrupt(
    question: OpenQuestion, interrupt: str, tool_call_id: str | None, subagent_run_id: str | None
) -> Interrupt:
    """The interrupt a client sees for an open question (``interrupt``: its id)."""
    if question.kind == "approval":
        message = f"{question.agent} asks to run {question.tool}({question.arguments})"
        schema = APPROVAL_SCHEMA
    else:
        message = question.message
        schema = media_schema(question)
    meta: dict[str, JsonValue] = {"agent": question.agent, "kind": question.kind,
                                  "tool": question.tool}  # fmt: skip
    if question.kind == "approval":
        meta["arguments"] = question.arguments
    if question.accept:
        meta["accept"] = list[JsonValue](question.accept)
    return Interrupt(
        id=interrupt,
        reason=REASONS[question.kind],
        message=message,
        tool_call_id=tool_call_id,
        subagent_run_id=subagent_run_id,
        response_schema=schema,
        expires_at=question.expires_at.isoformat() if question.expires_at is not None else None,
        metadata={"baton": meta},
    )


class ResumeRefused(ValueError):
    """A ``resume`` entry that cannot answer its question: the run is refused, nothing sent."""


@dataclass(frozen=True, slots=True)
class Upload:
    """A file given inline (a ``data:`` URL), to store before it answers its question."""

    data: bytes
    name: str
    media_type: str


Reply = Decision | Provided | Cancelled | Upload


@dataclass(frozen=True, slots=True)
class Answer:
    """One resume entry, checked: the open question it answers, and with what."""

    question: OpenQuestion
    reply: Reply


@dataclass(frozen=True, slots=True)
class Ignored:
    """A resume entry for no open question, and why (reported in the stream)."""

    interrupt_id: str
    why: str
    expired: bool


def read_resume(
    entries: Sequence[ResumeEntry], ledgers: Mapping[str, Ledger], newest: str, *, live: bool
) -> tuple[list[Answer], list[Ignored]]:
    """The answers ``entries`` give to the open questions of the thread's ``newest`` session
    (when it is ``live``), each checked against its question; entries for no open question are
    returned apart, with why (``ledgers``: each session of the thread the entries name, folded).
    Raises :class:`ResumeRefused` naming the first entry that does not fit (``resume[i]...``)."""
    answers: list[Answer] = []
    ignored: list[Ignored] = []
    seen: set[tuple[str, str]] = set()
    for index, entry in enumerate(entries):
        where = f"resume[{index}]"
        session, question_id = split_interrupt_id(entry.interrupt_id, newest)
        if (session, question_id) in seen:
            raise ResumeRefused(f"{where}.interruptId: {entry.interrupt_id!r} is answered twice")
        seen.add((session, question_id))
        ledger = ledgers.get(session)
        if ledger is None:
            why = f"interrupt {entry.interrupt_id}: session {session} is not of this thread"
            ignored.append(Ignored(entry.interrupt_id, why, expired=False))
            continue
        answering = live and session == newest
        question = _open(ledger, session, question_id) if answering else None
        if question is None:
            closed = ledger.closed(session, question_id, entry.interrupt_id, live=answering)
            ignored.append(Ignored(entry.interrupt_id, closed.why, expired=closed.expired))
            continue
        reply = _reply(question, entry, where)
        if not isinstance(reply, Upload | Decision):
            try:
                check_reply(question, reply)
            except AnswerRefused as exc:
                raise ResumeRefused(f"{where}.payload: {exc}") from exc
        answers.append(Answer(question, reply))
    return answers, ignored


def _open(ledger: Ledger, session: str, question_id: str) -> OpenQuestion | None:
    try:
        return ledger.book.find(session, question_id)
    except QuestionNotFound:
        return None


def _reply(question: OpenQuestion, entry: ResumeEntry, where: str) -> Reply:
    payload = entry.payload
    if question.kind == "approval":
        if entry.status == "cancelled":
            return Decision(approved=False, reason=CANCELLED_REASON)
        if not isinstance(payload, dict) or not isinstance(payload.get("approved"), bool):
            raise ResumeRefused(f"{where}.payload.approved: must be true or false")
        reason = payload.get("reason", "")
        if not isinstance(reason, str) or len(reason) > 2000:
            raise ResumeRefused(f"{where}.payload.reason: must be text of at most 2000 characters")
        return Decision(approved=payload["approved"], reason=reason)
    if entry.status == "cancelled":
        return Cancelled(reason=CANCELLED_REASON)
    if not isinstance(payload, dict) or not isinstance(payload.get("url"), str):
        raise ResumeRefused(f"{where}.payload.url: must be an http(s) or data: URL")
    name, media_type = payload.get("name", ""), payload.get("mediaType", "")
    if not isinstance(name, str) or not isinstance(media_type, str):
        raise ResumeRefused(f"{where}.payload: name and mediaType must be text")
    url = payload["url"]
    scheme = urlsplit(url).scheme.lower()
    if scheme == "data":
        return _inline(question, url, name, media_type, where)
    if scheme not in ("http", "https"):
        raise ResumeRefused(f"{where}.payload.url: {url[:80]!r} is not an http(s) or data: URL")
    return Provided(url=url, name=name, media_type=media_type)


def _inline(question: OpenQuestion, url: str, name: str, media_type: str, where: str) -> Upload:
    """A ``data:`` URL's bytes, checked as an uploaded file is (size, the accepted types)."""
    head, comma, body = url[5:].partition(",")
    if not comma:
        raise ResumeRefused(f"{where}.payload.url: a data: URL needs a comma before its data")
    params = head.split(";")
    declared = params[0].strip().lower()
    try:
        data = (
            base64.b64decode(body, validate=True)
            if "base64" in (p.strip().lower() for p in params[1:])
            else unquote_to_bytes(body)
        )
    except (binascii.Error, ValueError) as exc:
        raise ResumeRefused(f"{where}.payload.url: its base64 data does not decode") from exc
    if len(data) > UPLOAD_MAX_BYTES:
        raise ResumeRefused(
            f"{where}.payload.url: {len(data)} bytes; the most a file may be is {UPLOAD_MAX_BYTES}"
        )
    kind = media_type or declared or media_type_of(name) or "application/octet-stream"
    filename = name or f"{question.kind}{extension_for(kind)}"
    try:
        check_reply(question, Provided(url="data:,", name=filename, media_type=kind))
    except AnswerRefused as exc:
        raise ResumeRefused(f"{where}.payload: {exc}") from exc
    return Upload(data=data, name=filename, media_type=kind)
