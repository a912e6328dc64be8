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

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

import anyio

if TYPE_CHECKING:
    from openai.types.chat import ChatCompletionUserMessageParam

from baton.engine import messages
from baton.engine.calls import Answer, PendingCall, RoundContext
from baton.engine.channels import new_question_id
from baton.engine.errors import InteractionTimeout
from baton.engine.interaction import ImageQuestion, ProvidedMedia, UploadQuestion
from baton.engine.tools import Tool

log = logging.getLogger(__name__)

REQUEST_FILE_UPLOAD = "request_file_upload"
DESCRIBE_IMAGE = "describe_image"
MEDIA_SCHEMES = ("http://", "https://", "data:", "file:")


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


def file_upload_tool() -> Tool:
    """The ``request_file_upload`` tool, to register with an agent that may ask for files."""
    return Tool(request_file_upload, name=REQUEST_FILE_UPLOAD)


def image_tool() -> Tool:
    """The ``describe_image`` tool, to register with an agent backed by a vision model."""
    return Tool(describe_image, name=DESCRIBE_IMAGE)


def is_media_url(url: str) -> bool:
    return url.startswith(MEDIA_SCHEMES)


async def _wait_for_media(
    ctx: RoundContext, question: UploadQuestion | ImageQuestion, wait_s: float
) -> tuple[ProvidedMedia | None, str]:
    """The media a person supplied, or None and why not (cancelled, timed out, failed)."""
    channel = ctx.channel
    if channel is None:
        return None, "nobody can be asked: no interaction channel is configured"
    try:
        with anyio.fail_after(wait_s):
            if isinstance(question, UploadQuestion):
                media = await channel.request_upload(question)
            else:
                media = await channel.request_image(question)
    except TimeoutError:
        log.warning("%s", InteractionTimeout(question.kind, (question.call_id,), wait_s))
        return None, f"no answer within {wait_s:g} s"
    except Exception as exc:  # fail closed on any channel fault; cancellation still propagates
        log.warning("media question failed: %s", exc)
        return None, f"the question could not be answered: {exc}"
    if media is None:
        return None, "the user cancelled"
    if not is_media_url(media.url):
        return None, f"the supplied URL {media.url[:80]!r} is not http(s), data: or file:"
    return media, ""


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
                answers[call.id] = Answer(
                    messages.upload_received(
                        call.name, media.name or media.url, media.url, media.media_type
                    )
                )
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
            ctx.followups.append(image_message(call.name, url, prompt))
            answers[call.id] = Answer(messages.image_attached(call.name, url))
        return answers


def image_message(tool: str, url: str, prompt: str) -> ChatCompletionUserMessageParam:
    """The follow-up user message that shows the image to a vision model."""
    return {
        "role": "user",
        "content": [
            {"type": "text", "text": messages.image_followup(tool, url, prompt)},
            {"type": "image_url", "image_url": {"url": url}},
        ],
    }


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
