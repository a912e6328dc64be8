"""Reading one streamed completion: the SSE body split into ``data:`` payloads, each parsed with
``json.loads`` and fed to :class:`~baton.llm.assemble.StreamAssembler`.

Bytes rather than SDK chunk objects because building those costs ~140 µs a chunk, which dwarfs the
engine's own work. A body that ends without ``[DONE]`` or a ``finish_reason``, or carries an
``{"error": ...}`` event, raises :class:`~baton.llm.failures.AttemptFailed` (``broken=True``):
a partial reply is never returned as if it were whole.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx2

from baton.llm.assemble import StreamAssembler
from baton.llm.failures import AttemptFailed, stream_error
from baton.llm.types import CallDeltaSink, ModelReply, TextSink


async def read_stream(
    response: httpx2.Response, sink: TextSink | None, call_sink: CallDeltaSink | None = None
) -> ModelReply:
    """Assemble the whole body of ``response``, forwarding text deltas to ``sink`` and the tool
    calls' argument pieces to ``call_sink`` as they come."""
    assembler = StreamAssembler(watch_calls=call_sink is not None)
    body = _Body()
    async for payload in body.payloads(response):
        delta = assembler.feed(parse_chunk(payload))
        if delta and sink is not None:
            await sink(delta)
        pieces = assembler.call_deltas
        if pieces and call_sink is not None:
            for position, name, piece in pieces:
                await call_sink(position, name, piece)
            pieces.clear()
    if not body.done and assembler.finish_reason is None:
        raise AttemptFailed(
            "the stream ended before the server said it was done (no finish_reason, no [DONE])",
            retryable=True,
            broken=True,
        )
    return assembler.reply()


class _Body:
    """The ``data`` payloads of a streamed body up to ``[DONE]`` (what follows it is read and
    ignored, so the connection ends cleanly); ``done`` says whether it came."""

    __slots__ = ("done",)

    def __init__(self) -> None:
        self.done = False

    async def payloads(self, response: httpx2.Response) -> AsyncIterator[bytes]:
        decoder = SseDecoder()
        async for raw in response.aiter_bytes():
            for payload in decoder.feed(raw):
                if payload == b"[DONE]":
                    self.done = True
                elif not self.done:
                    yield payload
        for payload in decoder.flush():
            if payload == b"[DONE]":
                self.done = True
            elif not self.done:
                yield payload


def parse_chunk(payload: bytes) -> dict[str, Any]:
    """One ``data:`` payload as a chunk object; an error event raises."""
    try:
        chunk = json.loads(payload)
    except ValueError as exc:
        reason = f"the server sent a chunk that is not JSON: {payload[:80]!r}"
        raise AttemptFailed(reason, retryable=False) from exc
    if not isinstance(chunk, dict):
        raise AttemptFailed(
            f"the server sent a chunk that is not an object: {payload[:80]!r}", retryable=False
        )
    error = chunk.get("error")
    if error:
        raise stream_error(error)
    return chunk


class SseDecoder:
    """Server-sent events → ``data`` payloads (bytes). Comments, ``event:``/``id:`` lines ignored;
    several ``data:`` lines in one event are joined with newlines, as the SSE spec says."""

    __slots__ = ("_data", "_pending")

    def __init__(self) -> None:
        self._pending = b""
        self._data: list[bytes] = []

    def feed(self, raw: bytes) -> list[bytes]:
        if self._pending:
            raw = self._pending + raw
        lines = raw.split(b"\n")
        self._pending = lines.pop()
        out: list[bytes] = []
        for line in lines:
            self._line(line, out)
        return out

    def flush(self) -> list[bytes]:
        out: list[bytes] = []
        if self._pending:
            self._line(self._pending, out)
            self._pending = b""
        self._line(b"", out)
        return out

    def _line(self, line: bytes, out: list[bytes]) -> None:
        if line.endswith(b"\r"):
            line = line[:-1]
        if not line:
            if self._data:
                out.append(self._data[0] if len(self._data) == 1 else b"\n".join(self._data))
                self._data = []
        elif line.startswith(b"data:"):
            value = line[5:]
            self._data.append(value[1:] if value.startswith(b" ") else value)
