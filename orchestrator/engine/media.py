"""The interactive tools: asking the user for a file, and looking at an image.

``request_file_upload`` and ``describe_image`` are ordinary tools in the model's eyes, but their
calls never run as functions: the :class:`FileUpload` and :class:`ImageReference` interceptors claim
them and wait on a person through the interaction channel (180 s by default, clamped below the
stream idle timeout, within the round's interaction budget). A cancel or timeout declines the tool
for the rest of the turn and tells the model to ask the user to supply the file in a new message —
so the model does not reopen the dialog in a loop.

``describe_image`` first tries to resolve the reference itself (a URL, a media URL produced earlier
this turn, or the embedder's resolver) and only asks the user when that fails. The image reaches the
model as a follow-up *user* message with image content, since tool messages cannot carry images.
"""

from __future__ import annotations

import base64
import functools
import logging
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit

import anyio

if TYPE_CHECKING:
    from openai.types.chat import ChatCompletionUserMessageParam

from baton.bus.events import QuestionAnswered, QuestionAsked, QuestionOutcome, utc_now
from baton.engine import messages
from baton.engine.calls import Answer, PendingCall, RoundContext
from baton.engine.channels import new_question_id
from baton.engine.errors import InteractionCancelled, InteractionTimeout
from baton.engine.interaction import (
    ImageQuestion,
    InteractionChannel,
    ProvidedMedia,
    UploadQuestion,
)
from baton.engine.questions import UPLOAD_MAX_BYTES, accepts
from baton.engine.tools import Tool

log = logging.getLogger(__name__)

REQUEST_FILE_UPLOAD = "request_file_upload"
DESCRIBE_IMAGE = "describe_image"
MEDIA_SCHEMES = ("http://", "https://", "data:", "file:")
CLOSING_EMIT_S = 5.0
"""How long logging a question's end may take while its turn is being cancelled."""


def request_file_upload(prompt: str, accept: list[str] | None = None) -> str:
    """Ask the user to upload a file, and wait until they do (or cancel).

    Args:
        prompt: what to upload and why, in one sentence shown to the user
        accept: accepted media types or file extensions, e.g. ["image/png", ".csv"]
    """
    raise RuntimeError("request_file_upload is answered by the engine, never run directly")


def describe_image(image: str = "", prompt: str = "") -> str:
    """Look at an image: it is attached to the conversation so that you can see it.

    Args:
        image: the image's URL, or the name of an image produced earlier; empty to ask the user
        prompt: what to look for in the image
    """
    raise RuntimeError("describe_image is answered by the engine, never run directly")


@functools.cache
def file_upload_tool() -> Tool:
    """The ``request_file_upload`` tool, to register with an agent that may ask for files.

    One, shared, like every tool (its calls are claimed by the engine, never run): building a
    tool builds its argument model and schema, which every profile and agent paid for again."""
    return Tool(request_file_upload, name=REQUEST_FILE_UPLOAD)


@functools.cache
def image_tool() -> Tool:
    """The ``describe_image`` tool, to register with an agent backed by a vision model (one,
    shared, as :func:`file_upload_tool`)."""
    return Tool(describe_image, name=DESCRIBE_IMAGE)


def is_media_url(url: str) -> bool:
    return url.startswith(MEDIA_SCHEMES)


async def _wait_for_media(
    ctx: RoundContext, question: UploadQuestion | ImageQuestion, wait_s: float
) -> tuple[ProvidedMedia | None, str]:
    """The media a person supplied, or None and why not (cancelled, timed out, failed).

    The question and how it ended are logged (``question.asked``, ``question.answered``): that
    is how a person on another process finds it, and how every view closes its dialog."""
    channel = ctx.channel
    if channel is None:
        return None, "nobody can be asked: no interaction channel is configured"
    await ctx.emit(
        QuestionAsked(
            session=ctx.session,
            agent=ctx.agent,
            question_id=question.id,
            kind=question.kind,
            call_id=question.call_id,
            prompt=question.prompt,
            accept=list(question.accept) if isinstance(question, UploadQuestion) else [],
            reference=question.reference if isinstance(question, ImageQuestion) else "",
            expires_at=utc_now() + timedelta(seconds=wait_s),
        )
    )
    outcome: QuestionOutcome = "closed"
    media: ProvidedMedia | None = None
    why = "the agent's turn ended first"
    try:
        media, outcome, why = await _ask(channel, question, wait_s)
    finally:
        with anyio.CancelScope(shield=True), anyio.move_on_after(CLOSING_EMIT_S):
            await ctx.emit(
                QuestionAnswered(
                    session=ctx.session,
                    agent=ctx.agent,
                    question_id=question.id,
                    outcome=outcome,
                    url=media.url if media else "",
                    name=media.name if media else "",
                    media_type=media.media_type if media else "",
                    reason=why,
                )
            )
    return media, why


async def _ask(
    channel: InteractionChannel, question: UploadQuestion | ImageQuestion, wait_s: float
) -> tuple[ProvidedMedia | None, QuestionOutcome, str]:
    try:
        with anyio.fail_after(wait_s):
            if isinstance(question, UploadQuestion):
                media = await channel.request_upload(question)
            else:
                media = await channel.request_image(question)
    except TimeoutError:
        log.warning("%s", InteractionTimeout(question.kind, (question.call_id,), wait_s))
        return None, "expired", f"no answer within {wait_s:g} s"
    except InteractionCancelled:
        return None, "closed", "the question was withdrawn (the agent's turn was cancelled)"
    except Exception as exc:  # fail closed on any channel fault; cancellation still propagates
        log.warning("media question failed: %s", exc)
        return None, "failed", f"the question could not be answered: {exc}"
    if media is None:
        return None, "cancelled", "the user cancelled"
    if not is_media_url(media.url):
        why = f"the supplied URL {media.url[:80]!r} is not http(s), data: or file:"
        return None, "failed", why
    if isinstance(question, UploadQuestion) and not accepts(
        list(question.accept), media.media_type, media.name or media.url
    ):
        why = f"the supplied file is {media.media_type or 'of an unknown type'}, not one of " + (
            ", ".join(question.accept)
        )
        return None, "failed", why
    return media, "provided", ""


class FileUpload:
    """Claims ``request_file_upload`` calls and waits for the user's file."""

    async def intercept(self, calls: Sequence[PendingCall], ctx: RoundContext) -> dict[str, Answer]:
        answers: dict[str, Answer] = {}
        for call in calls:
            if call.name != REQUEST_FILE_UPLOAD or call.args is None:
                continue
            if not ctx.turn.take_interaction():
                answers[call.id] = await ctx.guard(
                    "interaction-budget",
                    call,
                    messages.interaction_budget(call.name, ctx.limits.interactions_per_round),
                )
                continue
            accept = call.args.get("accept") or ()
            question = UploadQuestion(
                id=new_question_id(),
                session=ctx.session,
                agent=ctx.agent,
                call_id=call.id,
                prompt=str(call.args.get("prompt", "")),
                accept=tuple(str(item) for item in accept) if isinstance(accept, list) else (),
            )
            media, why = await _wait_for_media(ctx, question, ctx.limits.upload_wait_s)
            if media is None:
                ctx.turn.decline(call.name)
                answers[call.id] = Answer(messages.upload_missing(call.name, why))
            else:
                said = messages.upload_received(
                    call.name, media.name or media.url, media.url, media.media_type
                )
                answers[call.id] = Answer(said, media_urls=(media.url,))
        return answers


class ImageReference:
    """Claims ``describe_image`` calls: resolves or asks for the image, then attaches it."""

    async def intercept(self, calls: Sequence[PendingCall], ctx: RoundContext) -> dict[str, Answer]:
        answers: dict[str, Answer] = {}
        for call in calls:
            if call.name != DESCRIBE_IMAGE or call.args is None:
                continue
            reference = str(call.args.get("image") or "").strip()
            prompt = str(call.args.get("prompt") or "").strip()
            url = await _resolve(ctx, reference) if reference else None
            if url is None:
                if not ctx.turn.take_interaction():
                    answers[call.id] = await ctx.guard(
                        "interaction-budget",
                        call,
                        messages.interaction_budget(call.name, ctx.limits.interactions_per_round),
                    )
                    continue
                question = ImageQuestion(
                    id=new_question_id(),
                    session=ctx.session,
                    agent=ctx.agent,
                    call_id=call.id,
                    prompt=prompt,
                    reference=reference,
                )
                media, why = await _wait_for_media(ctx, question, ctx.limits.image_wait_s)
                if media is None:
                    ctx.turn.decline(call.name)
                    answers[call.id] = Answer(messages.image_missing(call.name, why))
                    continue
                url = media.url
                shown = await viewable(url)
                if shown is None:
                    ctx.turn.decline(call.name)
                    why = "the supplied image cannot be read here (a PNG, JPEG, WebP or GIF file)"
                    answers[call.id] = Answer(messages.image_missing(call.name, why))
                    continue
                ctx.followups.append(image_message(call.name, url, prompt, content_url=shown))
                answers[call.id] = Answer(messages.image_attached(call.name, url))
                continue
            ctx.followups.append(image_message(call.name, url, prompt))
            answers[call.id] = Answer(messages.image_attached(call.name, url))
        return answers


def image_message(
    tool: str, url: str, prompt: str, *, content_url: str | None = None
) -> ChatCompletionUserMessageParam:
    """The follow-up user message that shows the image to a vision model (``content_url``, when
    the model is sent the image itself rather than ``url``)."""
    return {
        "role": "user",
        "content": [
            {"type": "text", "text": messages.image_followup(tool, url, prompt)},
            {"type": "image_url", "image_url": {"url": content_url or url}},
        ],
    }


IMAGE_TYPES = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg",
               ".webp": "image/webp", ".gif": "image/gif"}  # fmt: skip
"""The image files a ``file:`` answer may name: what vision models read."""


async def viewable(url: str, max_bytes: int = UPLOAD_MAX_BYTES) -> str | None:
    """The URL a vision model is sent for an image a person supplied: as it is, unless it is a
    ``file:`` one (an upload to a media directory), which the model's server cannot open: then
    the image itself, as a ``data:`` URL. None when such a file is no image, too large or gone."""
    parts = urlsplit(url)
    if parts.scheme.lower() != "file":
        return url
    path = Path(unquote(parts.path))
    kind = IMAGE_TYPES.get(path.suffix.lower())
    if kind is None:
        return None
    try:
        data = await anyio.to_thread.run_sync(_read_at_most, path, max_bytes)
    except OSError as exc:
        log.warning("cannot read the supplied image %s: %s", path, exc)
        return None
    return f"data:{kind};base64,{base64.b64encode(data).decode('ascii')}"


def _read_at_most(path: Path, max_bytes: int) -> bytes:
    with path.open("rb") as file:
        data = file.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise OSError(f"larger than {max_bytes} bytes")
    return data


async def _resolve(ctx: RoundContext, reference: str) -> str | None:
    """A URL for the reference without asking anyone, or None."""
    if is_media_url(reference):
        return reference
    for url in reversed(ctx.media_seen):
        if url == reference or url.rsplit("/", 1)[-1] == reference:
            return url
    if ctx.image_resolver is not None:
        return await ctx.image_resolver(reference)
    return None
