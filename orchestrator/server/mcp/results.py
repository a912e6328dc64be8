"""A session's end as ``run``'s result: the final answer as text, the media as links (and small
pictures inline, :mod:`.media`), and ``structuredContent`` ``{session, status, answer,
media_urls, notes}``.

A session that did not complete is still a result, not an error: ``isError`` is false and
``status`` (with ``notes``) says why — incomplete work, a timeout, a cancel. Only a ``failed``
session (no sub-agent could run, the lead's model failed for good) is ``isError: true``, so a
host's model sees the failure as such.
"""

from __future__ import annotations

from mcp_types import CallToolResult, ContentBlock, TextContent

from baton.bus.events import SessionFinished
from baton.server.mcp.fold import LogFold
from baton.server.mcp.media import MediaView
from baton.server.mcp.schemas import RunResult


async def run_result(fold: LogFold, notes: list[str], media: MediaView) -> CallToolResult:
    """``run``'s result from the fold of a session that finished."""
    finished = fold.finished
    assert finished is not None, "a result needs the session's end"
    return await finished_result(finished, [*notes, *fold.notes()], media)


async def finished_result(
    finished: SessionFinished, notes: list[str], media: MediaView
) -> CallToolResult:
    structured = RunResult(
        session=finished.session,
        status=finished.status,
        answer=finished.answer,
        media_urls=[media.openable(url) for url in finished.media_urls],
        notes=list(dict.fromkeys(notes)),
    )
    content: list[ContentBlock] = [TextContent(text=finished.answer or "(the lead gave no answer)")]
    content.extend(await media.content(finished.media_urls))
    content.append(TextContent(text=summary(structured)))
    return CallToolResult(
        content=content,
        structured_content=structured.model_dump(mode="json"),
        is_error=finished.status == "failed",
    )


def summary(result: RunResult) -> str:
    """The closing line: the session, its status, its media, and the notes."""
    status = result.status.replace("_", " ")
    media = f", {len(result.media_urls)} media" if result.media_urls else ""
    notes = "".join(f"\n- {note}" for note in result.notes)
    return f"[session {result.session} {status}{media}]{notes}"
