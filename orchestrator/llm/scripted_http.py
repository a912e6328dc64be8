"""The scripted server on a real loopback socket: a minimal HTTP/1.1 server written on anyio.

Only what an OpenAI client needs: ``POST`` with a ``Content-Length`` (or chunked) JSON body,
keep-alive so the client's pool reuses connections, responses as ``Transfer-Encoding: chunked``
SSE or a sized JSON error. A "cut" stream closes the socket without the terminating chunk, which is
exactly what a dropped connection looks like to ``httpx2`` (a ``RemoteProtocolError``).

Hand-written rather than a dependency because it is ~150 lines and the fault injection (stall before
headers, drop mid-body) needs control over every byte.
"""

from __future__ import annotations

import http
import math
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

import anyio
from anyio.abc import SocketAttribute, SocketStream
from anyio.streams.buffered import BufferedByteReceiveStream

from baton.llm.script import Rendered

Handler = Callable[[str, str, dict[str, str], bytes], Rendered]

_MAX_HEAD = 64 * 1024
_MAX_BODY = 64 * 1024 * 1024
_CLOSED = (
    anyio.EndOfStream,
    anyio.IncompleteRead,
    anyio.BrokenResourceError,
    anyio.ClosedResourceError,
)


@dataclass(slots=True)
class LoopbackServer:
    """A running loopback server. ``base_url`` ends in ``/v1`` like the real API's."""

    host: str
    port: int
    connections: int = 0

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"


@asynccontextmanager
async def serve_http(
    handler: Handler, host: str = "127.0.0.1", port: int = 0
) -> AsyncIterator[LoopbackServer]:
    """Listen on ``host:port`` (0 = a free port) until the block exits; every connection is a child
    task of this scope, so leaving it closes them all (stalled ones included)."""
    listener = await anyio.create_tcp_listener(local_host=host, local_port=port)
    state = LoopbackServer(host=host, port=listener.extra(SocketAttribute.local_port))

    async def connection(stream: SocketStream) -> None:
        state.connections += 1
        async with stream:
            await _serve_connection(stream, handler)

    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, connection)
        try:
            yield state
        finally:
            tg.cancel_scope.cancel()


async def _serve_connection(stream: SocketStream, handler: Handler) -> None:
    reader = BufferedByteReceiveStream(stream)
    while True:
        try:
            head = await reader.receive_until(b"\r\n\r\n", _MAX_HEAD)
        except (*_CLOSED, anyio.DelimiterNotFound):
            return
        request_line, *lines = head.decode("latin-1").split("\r\n")
        method, target, _version = request_line.split(" ", 2)
        headers: dict[str, str] = {}
        for line in lines:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        try:
            body = await _read_body(reader, headers)
        except _CLOSED:
            return
        rendered = handler(method, target.split("?", 1)[0], headers, body)
        try:
            keep_alive = await _respond(stream, rendered)
        except _CLOSED:
            return
        if not keep_alive or headers.get("connection", "").lower() == "close":
            return


async def _read_body(reader: BufferedByteReceiveStream, headers: dict[str, str]) -> bytes:
    if "chunked" in headers.get("transfer-encoding", "").lower():
        parts: list[bytes] = []
        while True:
            size = int((await reader.receive_until(b"\r\n", 1024)).split(b";")[0], 16)
            if size == 0:
                await reader.receive_until(b"\r\n", _MAX_HEAD)
                return b"".join(parts)
            parts.append(await reader.receive_exactly(size))
            await reader.receive_exactly(2)
    length = int(headers.get("content-length", "0"))
    if length > _MAX_BODY:
        raise anyio.BrokenResourceError(f"request body of {length} bytes is over the limit")
    return await reader.receive_exactly(length) if length else b""


async def _respond(stream: SocketStream, rendered: Rendered) -> bool:
    """Send one response; return whether the connection may serve another request."""
    if rendered.stall is not None:
        await _sleep(rendered.stall)
    reason = http.HTTPStatus(rendered.status).phrase
    head = [f"HTTP/1.1 {rendered.status} {reason}"]
    head.extend(f"{name}: {value}" for name, value in rendered.headers)
    head.append("connection: keep-alive")
    if rendered.status != 200:
        payload = b"".join(rendered.frames)
        head.append(f"content-length: {len(payload)}")
        await stream.send(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + payload)
        return True
    head.append("transfer-encoding: chunked")
    await stream.send(("\r\n".join(head) + "\r\n\r\n").encode("latin-1"))
    for index, frame in enumerate(rendered.frames):
        if index == rendered.hold_after:
            await _sleep(rendered.hold)
        if rendered.delay:
            await anyio.sleep(rendered.delay)
        await stream.send(b"%x\r\n%s\r\n" % (len(frame), frame))
    if rendered.cut:
        return False
    await stream.send(b"0\r\n\r\n")
    return True


async def _sleep(seconds: float) -> None:
    if math.isinf(seconds):
        await anyio.sleep_forever()
    await anyio.sleep(seconds)
