"""Every question an agent asks a person, as one list, and one way to answer any of them.

An agent asks three kinds of question (docs/protocol.md, *Questions*): may these gated calls run
(``approval.requested``), give me a file (``request_file_upload``), show me an image
(``describe_image``) — the last two logged as ``question.asked``. Each surface that shows questions
to a person (``baton watch``, the HTTP API and page, AG-UI interrupts, MCP elicitations, an
embedder) needs the same two things: what is open now, and how to answer one. Both are read from
the session's event log, the one record every process shares, so a question asked on a worker of
another machine is answered from any process on the bus.

For an approval the question id *is* the gated call's id (each call is decided on its own); an
upload or image question has an id of its own. An answer is typed by kind (:data:`Reply`): a
:class:`Decision` for an approval, :class:`Provided` (a URL) or :class:`Cancelled` for the others.
A reply that does not fit its question, comes after the question was answered or expired, or names
none is refused with a one-line reason, and nothing is sent.
"""

from __future__ import annotations

import mimetypes
import re
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

import anyio
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from baton.bus.base import Bus
from baton.bus.events import (
    AgentClaimed,
    AgentExited,
    ApprovalDecided,
    ApprovalRequested,
    QuestionAnswered,
    QuestionAsked,
    SessionFinished,
    SessionStarted,
    asked_for,
    utc_now,
)
from baton.bus.messages import Envelope
from baton.bus.payloads import MEDIA_URL_MAX, QuestionReply
from baton.engine.bus_channel import (
    ANSWER_TYPE,
    answer_approval,
    approvals_inbox,
    claim_answer,
    release_answer,
)
from baton.errors import BatonError, ExitCode
from baton.media.store import MediaStore, extension_for

QuestionKindName = Literal["approval", "upload", "image"]

UPLOAD_MAX_BYTES = 20 * 1024 * 1024
"""The largest file a person may upload in answer to a question, unless the surface sets less."""

ANSWER_SCHEMES = ("http", "https", "data")
"""The URLs a person may give as an answer: ones the asking agent's model can open. A ``file:``
URL names a path on the answering machine, which may not be the agent's, and would let whoever
answers point an agent at any file there: files are uploaded (:func:`store_upload`) instead."""


Unanswerable = Literal["unknown", "answered", "expired"]
"""Why a question cannot be answered: none of that id was asked, it was answered, or its agent
stopped waiting. A surface tells them apart (HTTP: 404 for the first, 409 for the others)."""


class QuestionNotFound(BatonError):
    """No open question with that id in the session: unknown, already answered, or expired."""

    exit_code = ExitCode.USAGE

    def __init__(
        self, session: str, question_id: str, detail: str, why: Unanswerable = "unknown"
    ) -> None:
        super().__init__(f"session {session}: {detail} (question {question_id!r})")
        self.session = session
        self.question_id = question_id
        self.why: Unanswerable = why


class AnswerRefused(BatonError):
    """The answer does not fit its question (a decision to an upload, a type it does not accept,
    a file too large): nothing was sent, and the question stays open."""

    exit_code = ExitCode.USAGE


class OpenQuestion(BaseModel):
    """A question that waits for a person now: what every surface shows."""

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    id: str
    kind: QuestionKindName
    agent: str
    call_id: str
    tool: str
    """The gated tool (approvals), or the asking one (``request_file_upload``,
    ``describe_image``)."""
    message: str
    """What the person is asked, in one line."""
    arguments: str = ""
    """The gated call's arguments (approvals), as the model wrote them."""
    accept: list[str] = Field(default_factory=list)
    expires_at: datetime | None = None


class Decision(BaseModel):
    """An approval's answer: approved, or declined with a reason."""

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    kind: Literal["decision"] = "decision"
    approved: bool
    reason: str = ""
    nobody: bool = False
    """No person could be asked: the runtime declines on their behalf (``approved`` false)."""


class Provided(BaseModel):
    """A file or an image, at a URL the asking agent can open (see :data:`ANSWER_SCHEMES`)."""

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    kind: Literal["provided"] = "provided"
    url: str
    name: str = ""
    media_type: str = ""


class Cancelled(BaseModel):
    """The person will not answer: the tool is declined for the rest of the agent's turn."""

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    kind: Literal["cancelled"] = "cancelled"
    reason: str = ""
    nobody: bool = False
    """No person could be asked: the runtime declines on their behalf (and says so to the
    model, never "the user cancelled")."""


Reply = Decision | Provided | Cancelled

_TOOLS = {"upload": "request_file_upload", "image": "describe_image"}


def _approval_questions(event: ApprovalRequested) -> list[OpenQuestion]:
    return [
        OpenQuestion(
            id=call.call_id,
            kind="approval",
            agent=event.agent,
            call_id=call.call_id,
            tool=call.name,
            message=f"may {event.agent} run {call.name}?",
            arguments=call.arguments,
            expires_at=event.expires_at,
        )
        for call in event.calls
    ]


def _media_question(event: QuestionAsked) -> OpenQuestion:
    if event.kind == "upload":
        message = event.prompt or f"{event.agent} asks for a file"
    else:
        what = f" ({event.reference})" if event.reference else ""
        message = event.prompt or f"{event.agent} asks for an image{what}"
    return OpenQuestion(
        id=event.question_id,
        kind=event.kind,
        agent=event.agent,
        call_id=event.call_id,
        tool=_TOOLS[event.kind],
        message=message,
        accept=list(event.accept),
        expires_at=event.expires_at,
    )


class QuestionBook:
    """The questions of a log read so far: fold events in order, then ask what is open.

    One fold serves a whole read (:func:`open_questions`) and a live view that keeps folding as
    events arrive."""

    def __init__(self) -> None:
        self._open: dict[str, OpenQuestion] = {}
        self._closed: set[str] = set()
        self._media_closed: set[str] = set()

    def fold(self, event: object) -> None:
        match event:
            case ApprovalRequested(policy=None):
                for question in _approval_questions(event):
                    self._open[question.id] = question
                    self._closed.discard(question.id)
            case ApprovalRequested():  # the session's policy answers it: nobody is asked
                self._closed.update(call.call_id for call in event.calls)
            case ApprovalDecided(call_id=call_id, agent=agent):
                asked = self._open.get(call_id)
                if asked is not None and asked.agent == agent:
                    del self._open[call_id]
                    self._closed.add(call_id)
            case QuestionAsked():
                self._open[event.question_id] = _media_question(event)
            case QuestionAnswered(question_id=question_id):
                self._open.pop(question_id, None)
                self._closed.add(question_id)
                self._media_closed.add(question_id)
            case AgentExited(agent=agent) | AgentClaimed(agent=agent):
                self._forget(agent)  # it left, or another instance took over: nobody waits
            case SessionStarted(resumed=True, agent=agent):
                self._forget(agent)  # a resumed lead asks anew
            case SessionFinished():
                self._forget(None)  # the session ended (a cancel included): nobody waits
            case _:
                pass

    def _forget(self, agent: str | None) -> None:
        """Close the questions ``agent`` asked (None: every question)."""
        for question in [q for q in self._open.values() if agent in (None, q.agent)]:
            del self._open[question.id]
            self._closed.add(question.id)
            if question.kind != "approval":
                self._media_closed.add(question.id)

    def open(self, now: datetime | None = None) -> list[OpenQuestion]:
        """The questions still waiting, oldest first (an expired one is left out: its agent has
        stopped waiting, whether or not its closing event is logged yet)."""
        moment = now or utc_now()
        return [q for q in self._open.values() if q.expires_at is None or q.expires_at > moment]

    def asks_for_media(self, question_id: str) -> bool:
        """Whether ``question_id`` is (or was) a question for a file or an image."""
        question = self._open.get(question_id)
        return (question is not None and question.kind != "approval") or (
            question_id in self._media_closed
        )

    def has_expired(self, question_id: str) -> bool:
        """Whether ``question_id`` is open in the log but its agent has stopped waiting."""
        question = self._open.get(question_id)
        return bool(question and question.expires_at and question.expires_at <= utc_now())

    def find(self, session: str, question_id: str) -> OpenQuestion:
        """The open question ``question_id``; raises :class:`QuestionNotFound` saying why not."""
        question = self._open.get(question_id)
        if question is None:
            if question_id in self._closed:
                raise QuestionNotFound(
                    session, question_id, "this question was already answered", "answered"
                )
            raise QuestionNotFound(session, question_id, "no such question was asked")
        if question.expires_at is not None and question.expires_at <= utc_now():
            raise QuestionNotFound(session, question_id, "this question has expired", "expired")
        return question


async def question_book(bus: Bus, session: str) -> QuestionBook:
    """The session's questions as its log stands now."""
    book = QuestionBook()
    async for logged in bus.log.tail(session, follow=False):
        book.fold(logged.event)
    return book


async def open_questions(bus: Bus, session: str) -> list[OpenQuestion]:
    """Every question of the session that waits for a person now, oldest first."""
    return (await question_book(bus, session)).open()


async def find_question(bus: Bus, session: str, question_id: str) -> OpenQuestion:
    """The open question ``question_id``; raises :class:`QuestionNotFound`."""
    return (await question_book(bus, session)).find(session, question_id)


def accepts(accept: list[str], media_type: str, name: str) -> bool:
    """Whether a file of ``media_type`` named ``name`` is among ``accept`` (empty: anything).

    An entry is a media type (``image/png``, parameters ignored), a family (``image/*``) or an
    extension (``.csv``, matched against the name, case-insensitively)."""
    if not accept:
        return True
    bare = media_type.split(";", 1)[0].strip().lower()
    lowered = name.lower()
    for entry in (item.strip().lower() for item in accept):
        if entry.startswith("."):
            if lowered.endswith(entry):
                return True
        elif entry.endswith("/*"):
            if bare.startswith(entry[:-1]):
                return True
        elif entry == bare or entry == "*/*":
            return True
    return False


VISION_TYPES = ("image/png", "image/jpeg", "image/webp", "image/gif")
"""The images a vision model reads: what an image question takes (an SVG or HEIC would reach
the model's server and fail there, after the person was told it was sent)."""

NAME_MAX = 200
"""The longest file name an answer carries (the store keeps a shorter, safe one)."""


def check_reply(question: OpenQuestion, reply: Reply) -> None:
    """Raise :class:`AnswerRefused` unless ``reply`` answers ``question``."""
    if question.kind == "approval":
        if not isinstance(reply, Decision):
            raise AnswerRefused(
                f"question {question.id} asks whether {question.tool} may run: answer it with "
                "approve or decline"
            )
        return
    if isinstance(reply, Decision):
        raise AnswerRefused(
            f"question {question.id} asks for {asked_for(question.kind)}: answer it with a "
            "file, a URL, or cancel"
        )
    if isinstance(reply, Provided):
        _check_provided(question, reply)


def _check_provided(question: OpenQuestion, reply: Provided) -> None:
    scheme = urlsplit(reply.url).scheme.lower()
    if scheme not in ANSWER_SCHEMES and scheme != "file":
        raise AnswerRefused(
            f"the URL {reply.url[:80]!r} is not http(s) or data: (upload a file instead)"
        )
    if len(reply.url) > MEDIA_URL_MAX:
        raise AnswerRefused(
            f"the URL is {len(reply.url)} characters; an answer's URL is at most "
            f"{MEDIA_URL_MAX} (upload the file instead)"
        )
    media_type = _type_of(reply)
    if not accepts(question.accept, media_type, reply.name or urlsplit(reply.url).path):
        raise AnswerRefused(
            f"question {question.id} accepts {', '.join(question.accept)}; "
            f"{reply.name or reply.url[:80]!r} is {media_type or 'of an unknown type'}"
        )
    if question.kind == "image" and media_type and media_type not in VISION_TYPES:
        raise AnswerRefused(
            f"question {question.id} asks for an image a model can look at (PNG, JPEG, WebP or "
            f"GIF), not {media_type}"
        )


def _type_of(reply: Provided) -> str:
    return reply.media_type or media_type_of(reply.url) or media_type_of(reply.name)


def media_type_of(name: str) -> str:
    """The media type a file name, URL path or ``data:`` URL says (``""`` when none)."""
    if name[:5].lower() == "data:":  # data:[<type>][;base64],<data>; no type is text/plain
        declared = name[5:].split(",", 1)[0].split(";", 1)[0].strip().lower()
        return declared or "text/plain"
    guessed, _ = mimetypes.guess_type(urlsplit(name).path or name, strict=False)
    return guessed or ""


def sniff_image(data: bytes) -> str:
    """The image type ``data`` is by its first bytes (``""`` for none a model reads): what an
    uploaded image is, whatever the person's browser or file name says."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return ""


def _base_name(filename: str) -> str:
    """The last part of a name a person's system gave (never a path), at most :data:`NAME_MAX`."""
    base = filename.replace("\\", "/").rsplit("/", 1)[-1].strip()
    return base[-NAME_MAX:]


def _payload(question: OpenQuestion, reply: Provided | Cancelled) -> QuestionReply:
    """The wire form of a reply; one the wire would refuse is an :class:`AnswerRefused`."""
    try:
        if isinstance(reply, Provided):
            return QuestionReply(
                question_id=question.id,
                outcome="provided",
                url=reply.url,
                name=_base_name(reply.name),
                media_type=_type_of(reply),
            )
        return QuestionReply(
            question_id=question.id, outcome="cancelled", reason=reply.reason[:1000],
            nobody=reply.nobody,
        )  # fmt: skip
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(part) for part in first["loc"]) or "answer"
        raise AnswerRefused(f"the answer cannot be sent: {where}: {first['msg']}") from exc


async def answer_question(bus: Bus, session: str, question_id: str, reply: Reply) -> str:
    """Answer the open question ``question_id`` of ``session``; returns the agent that asked.

    Raises :class:`QuestionNotFound` (unknown, answered, expired) or :class:`AnswerRefused` (the
    reply does not fit), sending nothing then; a :class:`Decision` for no question for a file
    is an approval's, and :func:`~baton.engine.bus_channel.answer_approval` decides it (raising
    its ``ApprovalNotFound``). A ``file:`` URL is refused from a person (:data:`ANSWER_SCHEMES`);
    :func:`store_upload` makes the URL of an uploaded file. Of two answers sent at once, one is
    sent and the other refused as already answered (:func:`_claimed`)."""
    book = await question_book(bus, session)
    if isinstance(reply, Decision) and not book.asks_for_media(question_id):
        if book.has_expired(question_id):  # its agent declined it already: say so, send nothing
            raise QuestionNotFound(session, question_id, "this question has expired", "expired")
        return await answer_approval(
            bus, session, question_id, reply.approved, reply.reason, nobody=reply.nobody
        )
    question = book.find(session, question_id)
    if isinstance(reply, Provided) and urlsplit(reply.url).scheme.lower() == "file":
        raise AnswerRefused(
            f"the URL {reply.url[:80]!r} is a path on this machine: upload the file instead"
        )
    check_reply(question, reply)
    assert not isinstance(reply, Decision)  # refused for a file or an image just above
    payload = _payload(question, reply)
    async with _claimed(bus, session, question):
        return await _send_reply(bus, session, question, payload)


@asynccontextmanager
async def _claimed(bus: Bus, session: str, question: OpenQuestion) -> AsyncIterator[None]:
    """Hold the one answer ``question`` may have while the block stores and sends it
    (:func:`~baton.engine.bus_channel.claim_answer`); handed back if the block fails, so a
    store or bus fault leaves the question open for another try."""
    if not await claim_answer(bus, session, question.id, question.agent):
        raise QuestionNotFound(
            session, question.id, "this question was already answered", "answered"
        )
    try:
        yield
    except BaseException:
        await release_answer(bus, session, question.id)
        raise


async def _send_reply(
    bus: Bus, session: str, question: OpenQuestion, payload: QuestionReply
) -> str:
    content = (
        f"provided {payload.name or payload.url[:200]}"
        if payload.outcome == "provided"
        else payload.reason or "cancelled"
    )
    envelope = Envelope(
        session=session,
        sender="user",
        recipient=approvals_inbox(question.agent),
        type=ANSWER_TYPE,
        content=content,
        meta=payload.to_meta(),
    )
    await bus.inboxes.send(envelope)
    return question.agent


_UNSAFE = re.compile(r"[^A-Za-z0-9_.\-]+")


def upload_name(session: str, question: OpenQuestion, filename: str, media_type: str = "") -> str:
    """The media name of an uploaded file: under the session, the asking agent and a fresh id,
    keeping what is safe of the person's file name (never a path), with the extension of
    ``media_type`` when it is an image (what a reader of the store goes by)."""
    safe = _UNSAFE.sub("-", _base_name(filename)).lstrip("._-")[:100] or "upload"
    if media_type in VISION_TYPES:
        extension = extension_for(media_type)
        if not safe.lower().endswith(_EXTENSIONS.get(media_type, (extension,))):
            safe = f"{safe.rsplit('.', 1)[0] if '.' in safe else safe}{extension}"
    return f"{session}/{question.agent}-upload-{uuid.uuid4().hex[:12]}-{safe}"


_EXTENSIONS = {"image/jpeg": (".jpg", ".jpeg")}
"""A type's extensions where it has more than the one :func:`extension_for` gives."""


async def read_upload(path: Path, max_bytes: int = UPLOAD_MAX_BYTES) -> bytes:
    """A person's file to upload, read whole only when within ``max_bytes``; else, or when it
    cannot be read, :class:`AnswerRefused` saying so."""

    def read() -> bytes:
        with path.open("rb") as file:
            data = file.read(max_bytes + 1)
        if len(data) > max_bytes:
            raise AnswerRefused(f"{path} is over {max_bytes} bytes, the most an upload may be")
        return data

    try:
        return await anyio.to_thread.run_sync(read)
    except OSError as exc:
        raise AnswerRefused(f"cannot read {path}: {exc.strerror or exc}") from exc


async def store_upload(
    store: MediaStore,
    bus: Bus,
    session: str,
    question_id: str,
    *,
    data: bytes,
    filename: str,
    media_type: str = "",
    max_bytes: int = UPLOAD_MAX_BYTES,
) -> tuple[str, str]:
    """Store a person's file for the open question, then answer it with the file's URL.

    The checks come first, so a refused file is neither stored nor sent: the question must be
    open, the file at most ``max_bytes`` and of a type it accepts, and for an image question an
    image a model reads by its own first bytes (whatever its name or the sender says), stored
    under that type's extension. The answer is claimed before the file is stored, so a second
    answer stores nothing. Returns (the asking agent, the URL). Raises
    :class:`QuestionNotFound`, :class:`AnswerRefused`, or ``MediaError`` when the store refuses
    it (the question then stays open)."""
    question = await find_question(bus, session, question_id)
    if len(data) > max_bytes:
        raise AnswerRefused(
            f"{filename or 'the file'} is {len(data)} bytes; the most an upload may be is "
            f"{max_bytes}"
        )
    kind = media_type or media_type_of(filename) or "application/octet-stream"
    if question.kind == "image":
        sniffed = sniff_image(data)
        if not sniffed:
            raise AnswerRefused(
                f"{filename or 'the file'} is not a PNG, JPEG, WebP or GIF image (by its "
                "content), which is what a model can look at"
            )
        kind = sniffed
    check_reply(question, Provided(url="data:,", name=filename, media_type=kind))
    name = upload_name(session, question, filename, kind)
    async with _claimed(bus, session, question):
        url = await store.put(data, name, kind)
        payload = _payload(question, Provided(url=url, name=filename, media_type=kind))
        return await _send_reply(bus, session, question, payload), url


async def upload_file(
    store: MediaStore, bus: Bus, session: str, question_id: str, path: Path, max_bytes: int
) -> tuple[str, str]:
    """A person's file at ``path``, read (within ``max_bytes``), stored and sent as the answer
    to ``question_id`` (:func:`store_upload`): what ``baton upload`` and ``Session.answer`` do
    with a path. Returns (the asking agent, the URL)."""
    data = await read_upload(path, max_bytes)
    return await store_upload(
        store, bus, session, question_id, data=data, filename=path.name, max_bytes=max_bytes
    )
