"""The scripted OpenAI-compatible server: tests drive exact scenarios with it, and the offline
model is built on it.

One :class:`ScriptedServer` holds a :class:`~baton.llm.script.Script`; made with ``record=True``
it records every request it got (parsed JSON body and headers), so a test can assert what the model
saw. It can be mounted two ways, both reached through the real ``openai`` client:

* in-process: ``AsyncOpenAI(base_url=IN_PROCESS_URL, http_client=server.http_client())`` — an
  ``httpx2`` transport, no socket; read timeouts are emulated from the request's timeout settings,
  and a cut stream raises the same ``httpx2.RemoteProtocolError`` a dropped socket gives;
* loopback: ``async with server.serve() as http: AsyncOpenAI(base_url=http.base_url)`` — a real
  HTTP/1.1 server on 127.0.0.1 on a free port (see :mod:`baton.llm.scripted_http`).

To replay what real small-model servers do, the script has the faults of llama.cpp's
``llama-server`` too: ``Script(strict_tools=True)`` rejects a call of a tool the request did not
offer as that server does (:func:`~baton.llm.script.parse_failure`: an HTTP 500, or the leading text
and then an error event), ``Reply(hold_after=n)`` holds output back past the read timeout, and
:func:`~baton.llm.script.runaway` repeats itself until ``finish_reason: "length"``.

Recording is opt-in: with ``record=True`` every request body is kept (``requests`` here,
``script.bodies``) to assert ``tool_choice``, ``max_tokens`` and what the model was told. By default
nothing is kept, since the offline model is this server too and serves a worker for its whole life:
a body per request would grow it with every session (issue 12: ~2.9 MB per 100 sessions). Reading
``requests`` of a server that does not record raises, so a test that forgot to opt in fails loudly
instead of asserting on an empty list.

Example::

    server = ScriptedServer(
        [tool_calls(Call("search", pieces('{"q":"cats"}', 4))), text("Done")], record=True
    )
    model = OpenAIChatModel(ModelSettings(model="m", base_url=IN_PROCESS_URL, api_key="k"),
                            http_client=server.http_client())
"""

from __future__ import annotations

import json
import math
from collections.abc import AsyncIterator, Iterable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any

import anyio
import httpx2

from baton.llm.script import (
    HttpError,
    Json,
    Rendered,
    Responder,
    Script,
    ScriptItem,
    render,
)
from baton.llm.scripted_http import LoopbackServer, serve_http
from baton.llm.scripted_images import ScriptedImages

IN_PROCESS_URL = "http://scripted.invalid/v1"
"""Base URL to give the ``openai`` client when it talks to the in-process transport."""


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """One request as the server received it; header names are lower-case."""

    method: str
    path: str
    headers: dict[str, str]
    body: Json

    @property
    def messages(self) -> list[Json]:
        return list(self.body.get("messages", []))

    @property
    def tool_names(self) -> list[str]:
        return [tool["function"]["name"] for tool in self.body.get("tools", [])]


class ScriptedServer:
    """Answers Chat Completions requests from a script (and records them when ``record``), and
    Images API requests as ``images`` says.

    ``script`` may be a :class:`Script` or just an iterable of replies; ``responder`` answers once
    the queued replies are spent. A responder that raises is answered with a non-retryable 400
    naming the error (kept in ``errors``), so a bug in a scenario fails the test, not the server.
    ``record=True`` keeps every request (``requests``) and makes the script keep every body it
    answered (``script.bodies``); ``request_count`` counts requests either way.
    """

    def __init__(
        self,
        script: Script | Iterable[ScriptItem] = (),
        *,
        responder: Responder | None = None,
        record: bool = False,
        images: ScriptedImages | None = None,
    ) -> None:
        self.script = script if isinstance(script, Script) else Script(script, responder)
        self.images = images if images is not None else ScriptedImages()
        """The Images API it serves (``POST /v1/images/generations``; see
        :mod:`baton.llm.scripted_images`)."""
        if responder is not None:
            self.script.responder = responder
        if record:
            self.script.record = True
        self.record = record
        self.request_count = 0
        self._requests: list[RecordedRequest] = []
        self.errors: list[Exception] = []

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received, in order; raises ``RuntimeError`` unless made with
        ``record=True`` (an empty list would pass a test that forgot to opt in)."""
        if not self.record:
            raise RuntimeError(
                "this ScriptedServer records no requests: make it with ScriptedServer(..., "
                "record=True) to read them"
            )
        return self._requests

    def add(self, *items: ScriptItem) -> None:
        """Queue more replies."""
        self.script.add(*items)

    def handle(self, method: str, path: str, headers: dict[str, str], raw: bytes) -> Rendered:
        """Record the request and render the script's answer (shared by both mounts)."""
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            return render(HttpError(400, "request body is not JSON", "invalid_request_error"), {})
        self.request_count += 1
        if self.record:
            self._requests.append(RecordedRequest(method, path, headers, body))
        if self.images.handles(method, path):
            return self.images.handle(method, path, headers, body)
        if method != "POST" or not path.endswith("/chat/completions"):
            return render(
                HttpError(404, f"no route for {method} {path}", "invalid_request_error"), {}
            )
        if body.get("stream") is not True:
            message = "the scripted server only serves streamed completions (stream=true)"
            return render(HttpError(400, message, "invalid_request_error"), body)
        try:
            item = self.script.next(body)
        except Exception as exc:  # a responder bug must not take the server down
            self.errors.append(exc)
            message = f"scripted responder failed: {type(exc).__name__}: {exc}"
            return render(HttpError(400, message, "invalid_request_error"), body)
        return render(item, body)

    def transport(self) -> ScriptedTransport:
        """An ``httpx2`` transport that serves this script in-process."""
        return ScriptedTransport(self)

    def http_client(self, **options: Any) -> httpx2.AsyncClient:
        """An ``httpx2.AsyncClient`` over :meth:`transport`, for ``AsyncOpenAI(http_client=)``."""
        return httpx2.AsyncClient(transport=self.transport(), **options)

    def serve(
        self, host: str = "127.0.0.1", port: int = 0
    ) -> AbstractAsyncContextManager[LoopbackServer]:
        """Serve this script over real HTTP on loopback for the duration of the ``async with``."""
        return serve_http(self.handle, host, port)


class ScriptedTransport(httpx2.AsyncBaseTransport):
    """In-process mount: plays rendered frames as an ``httpx2`` response stream."""

    def __init__(self, server: ScriptedServer) -> None:
        self._server = server

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        raw = await request.aread()
        headers = {name.lower(): value for name, value in request.headers.items()}
        rendered = self._server.handle(request.method, request.url.path, headers, raw)
        read_timeout = _read_timeout(request)
        if rendered.stall is not None:
            await _wait(rendered.stall, read_timeout, request)
        if rendered.status != 200:
            return httpx2.Response(
                rendered.status, headers=rendered.headers, content=b"".join(rendered.frames)
            )
        stream = _FrameStream(rendered, read_timeout, request)
        return httpx2.Response(rendered.status, headers=rendered.headers, stream=stream)


class _FrameStream(httpx2.AsyncByteStream):
    def __init__(self, rendered: Rendered, read_timeout: float | None, request: httpx2.Request):
        self._rendered = rendered
        self._read_timeout = read_timeout
        self._request = request

    async def __aiter__(self) -> AsyncIterator[bytes]:
        delay = self._rendered.delay
        hold_after = self._rendered.hold_after
        for index, frame in enumerate(self._rendered.frames):
            if index == hold_after:
                await _wait(self._rendered.hold, self._read_timeout, self._request)
            if delay:
                await _wait(delay, self._read_timeout, self._request)
            yield frame
        if self._rendered.cut:
            raise httpx2.RemoteProtocolError(
                "peer closed connection without sending complete message body "
                "(scripted stream cut)",
                request=self._request,
            )


def _read_timeout(request: httpx2.Request) -> float | None:
    timeout = request.extensions.get("timeout") or {}
    value = timeout.get("read")
    return float(value) if value is not None else None


async def _wait(seconds: float, read_timeout: float | None, request: httpx2.Request) -> None:
    """Sleep like a slow server would, turning a wait past the read timeout into ``ReadTimeout``."""
    if read_timeout is not None and seconds > read_timeout:
        await anyio.sleep(read_timeout)
        raise httpx2.ReadTimeout("scripted server stalled past the read timeout", request=request)
    if math.isinf(seconds):
        await anyio.sleep_forever()
    await anyio.sleep(seconds)
