"""``POST /sessions/{id}/questions/{question_id}``: one route answers any question an agent asks.

The questions are the bus's (docs/questions.md): an approval, a file (``request_file_upload``)
or an image (``describe_image``), asked by the lead or by a sub-agent on any worker of the bus.
The route only turns a request into one of the engine's typed replies and hands it to
:func:`~baton.engine.questions.answer_question` or :func:`~baton.engine.questions.store_upload`,
which refuse what does not fit the question before anything is stored or sent. The bodies:

- JSON ``{"approved": bool, "reason": str}`` — an approval's decision;
- JSON ``{"url": str, "name": str}`` — a file or an image at an ``http(s)`` or ``data:`` URL;
- JSON ``{"media": "/media/<session>/<name>"}`` — a file of this session's own media (the page's
  image picker), copied into the store as an upload so the agent gets a URL it can open;
- JSON ``{"cancel": true, "reason": str}`` — no: the tool is declined for the agent's turn;
- ``multipart/form-data`` with one ``file`` part — an upload, stored in the server's media store.

An upload is read as it arrives and refused past ``upload_max_bytes`` (``413``), so a large body
never reaches the disk; a browser may send it only from this server's own pages when the cookie
is what authorises it (:func:`baton.server.security.refuse_cross_site_upload`).
"""

from __future__ import annotations

import anyio
from starlette.datastructures import UploadFile
from starlette.exceptions import HTTPException
from starlette.formparsers import MultiPartException
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Message

from baton.engine.bus_channel import ApprovalNotFound
from baton.engine.questions import (
    AnswerRefused,
    Cancelled,
    Decision,
    OpenQuestion,
    Provided,
    QuestionNotFound,
    Reply,
    answer_question,
    find_question,
    media_type_of,
    store_upload,
)
from baton.media import DirectoryStore, MediaError, MediaStore
from baton.server.context import ServerContext
from baton.server.media import MEDIA_PREFIX, resolve_media
from baton.server.routes import refuse_other_keys
from baton.server.schemas import Answered, QuestionAnswer
from baton.server.security import read_body, read_model, refuse_cross_site_upload

MULTIPART_SLACK = 64 * 1024
"""What a multipart body may carry beyond its file: boundaries, part headers, a reason field."""


def _store(ctx: ServerContext) -> MediaStore:
    return ctx.config.media or DirectoryStore(ctx.media_root)


async def answer(request: Request) -> Response:
    ctx = ServerContext.of(request)
    session = ctx.session_id(request)
    question_id = str(request.path_params["question_id"])
    media_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    await refuse_other_keys(ctx, session)
    try:
        if media_type == "multipart/form-data":
            refuse_cross_site_upload(request)
            return await _upload(ctx, request, session, question_id)
        if media_type != "application/json":
            raise HTTPException(415, "send the answer as JSON, or a file as multipart/form-data")
        body = await read_model(request, QuestionAnswer, ctx.config.max_body_bytes)
        reply = await _reply(ctx, session, question_id, body)
        if isinstance(reply, tuple):  # a picked medium, stored as an upload
            agent, url = reply
            return _answered(question_id, agent, "provided", url)
        agent = await answer_question(ctx.bus, session, question_id, reply)
    except QuestionNotFound as exc:
        raise HTTPException(404 if exc.why == "unknown" else 409, str(exc)) from exc
    except ApprovalNotFound as exc:
        raise HTTPException(409 if exc.decided else 404, str(exc)) from exc
    except AnswerRefused as exc:
        raise HTTPException(422, str(exc)) from exc
    except MediaError as exc:  # the store failed, not the answer: the question stays open
        raise HTTPException(502, f"the media store refused the file: {exc}") from exc
    return _answered(question_id, agent, _outcome(reply), getattr(reply, "url", ""))


def _outcome(reply: Reply) -> str:
    match reply:
        case Decision(approved=True):
            return "approved"
        case Decision():
            return "declined"
        case Provided():
            return "provided"
        case _:
            return "cancelled"


def _answered(question_id: str, agent: str, outcome: str, url: str = "") -> Response:
    body = Answered(question_id=question_id, agent=agent, outcome=outcome, url=url)
    return Response(body.model_dump_json(), media_type="application/json")


async def _reply(
    ctx: ServerContext, session: str, question_id: str, body: QuestionAnswer
) -> Reply | tuple[str, str]:
    if body.approved is not None:
        return Decision(approved=body.approved, reason=body.reason)
    if body.cancel:
        return Cancelled(reason=body.reason)
    if body.url is not None:
        return Provided(url=body.url, name=body.name)
    assert body.media is not None  # the schema asks for exactly one of the four
    return await _picked(ctx, session, question_id, body.media)


async def _picked(ctx: ServerContext, session: str, question_id: str, path: str) -> tuple[str, str]:
    """A file of the session's own media, stored again as the answer (its ``file://`` URL
    would be refused from a person, and another session's media is not this one's to give)."""
    prefix = f"{MEDIA_PREFIX}{session}/"
    found = resolve_media(ctx.media_root, path.removeprefix(MEDIA_PREFIX))
    if (
        not path.startswith(prefix)
        or found is None
        or not found.is_relative_to(ctx.media_root.resolve() / session)
    ):
        raise AnswerRefused(f"media: {path[:120]!r} is no file of session {session}'s media")
    limit = ctx.config.upload_max_bytes
    if (await anyio.Path(found).stat()).st_size > limit:
        raise HTTPException(413, f"{found.name} is over {limit} bytes, the most an upload may be")
    return await store_upload(
        _store(ctx), ctx.bus, session, question_id, data=await anyio.Path(found).read_bytes(),
        filename=found.name, max_bytes=limit,
    )  # fmt: skip


async def _upload(ctx: ServerContext, request: Request, session: str, question_id: str) -> Response:
    question = await find_question(ctx.bus, session, question_id)  # before reading any of it
    limit = ctx.config.upload_max_bytes
    body = await read_body(request, limit + MULTIPART_SLACK, f"an upload is at most {limit} bytes")
    data, filename, kind = await _one_file(request, body, question)
    if len(data) > limit:
        raise HTTPException(413, f"{filename} is over {limit} bytes, the most an upload may be")
    if kind == "application/octet-stream":  # what a browser says when it does not know
        kind = media_type_of(filename) or kind
    agent, url = await store_upload(
        _store(ctx), ctx.bus, session, question_id, data=data, filename=filename,
        media_type=kind, max_bytes=limit,
    )  # fmt: skip
    return _answered(question_id, agent, "provided", url)


async def _one_file(
    request: Request, body: bytes, question: OpenQuestion
) -> tuple[bytes, str, str]:
    """The body's one ``file`` part (its bytes, name and media type), parsed from the bytes
    already read and bounded; the parsed form is closed before this returns."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if sent:
            return {"type": "http.disconnect"}
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    try:
        form = await Request(request.scope, replay).form(max_files=1, max_fields=4)
    except (HTTPException, MultiPartException) as exc:  # malformed, too many parts
        said = exc.detail if isinstance(exc, HTTPException) else exc.message
        raise HTTPException(422, f"the upload is not a usable multipart body: {said}") from exc
    try:
        file = form.get("file")
        if not isinstance(file, UploadFile):
            raise HTTPException(
                422, f"file: send the {question.kind} as a multipart part named 'file'"
            )
        filename = file.filename or "upload"
        kind = file.content_type or media_type_of(filename)
        return await file.read(), filename, kind
    finally:
        await form.close()
