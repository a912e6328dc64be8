"""``GET /sessions/{id}/events``: a session's event log as Server-Sent Events, resumable.

Each event goes out as ``id: <cursor>``, ``event: <type>``, ``data: <event JSON>``; the first
thing sent is a ``retry:`` field (how long a browser waits before reconnecting), and a comment
line every ``heartbeat_s`` (15 s) keeps proxies from closing an idle stream. A client resumes with
the ``Last-Event-ID`` header (browsers send it themselves) or, where it cannot set headers, the
``last_event_id`` query parameter: it gets exactly the events after that cursor.

The stream ends after ``session.finished``. A reconnect after that gets ``204 No Content``, which
tells a browser's ``EventSource`` to stop reconnecting.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from sse_starlette import EventSourceResponse
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from baton.server.context import ServerContext
from baton.server.feeds import Feed, Feeds, cursor_key


class FeedResponse(EventSourceResponse):
    """An SSE response that gives its feed subscription back however the response ends
    (finished, client gone, server stopping): the stream generator alone cannot promise that,
    since a generator that never started never runs its ``finally``."""

    def __init__(self, feeds: Feeds, feed: Feed, start: int, ctx: ServerContext) -> None:
        super().__init__(
            _frames(feed, start, ctx.config.retry_ms),
            ping=ctx.config.heartbeat_s,
            headers={"Cache-Control": "no-store"},
        )
        self._feeds = feeds
        self._feed: Feed | None = feed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._give_back()

    def _give_back(self) -> None:
        feed, self._feed = self._feed, None
        if feed is not None:
            self._feeds.release(feed)


async def _frames(feed: Feed, index: int, retry_ms: int) -> AsyncIterator[bytes]:
    yield f"retry: {retry_ms}\n\n".encode()
    while True:
        await feed.wait_beyond(index)
        frames = feed.frames
        if index >= len(frames):
            return  # the feed failed or the server is stopping: the client resumes by cursor
        end = len(frames)
        if feed.finished_at is not None:
            end = min(end, feed.finished_at + 1)
        yield b"".join(frames[index:end])
        index = end
        if feed.finished_at is not None and index > feed.finished_at:
            return


async def session_events(request: Request) -> Response:
    ctx = ServerContext.of(request)
    session = ctx.session_id(request)
    after = request.headers.get("last-event-id") or request.query_params.get("last_event_id")
    if after is not None:
        try:
            cursor_key(after)
        except ValueError as exc:
            raise HTTPException(400, f"{exc}; resume with an id this stream sent") from exc
    feeds = ctx.feeds
    feed = feeds.acquire(session)
    response: FeedResponse | None = None
    try:
        await feed.caught_up.wait()
        if not feed.frames and not ctx.host.is_hosted(session) and not feed.failed:
            raise HTTPException(404, f"no session {session!r} on this server's bus")
        start = feed.start_index(after)
        if feed.finished_at is not None and start > feed.finished_at:
            return Response(status_code=204)  # finished: EventSource stops reconnecting
        feed.follow()
        response = FeedResponse(feeds, feed, start, ctx)
        return response
    finally:
        if response is None:
            feeds.release(feed)
