"""What the scripted model says: reply kinds, the script queue, and their rendering to wire bytes.

A scenario is a :class:`Script`: a queue of replies handed out one per request, then (when the queue
is empty) a responder callable that decides from the request body. Each reply is rendered to exactly
the bytes the real Chat Completions API streams (``data: {...chat.completion.chunk...}\\n\\n``, the
usage chunk with ``choices: []`` when ``stream_options.include_usage`` was asked for, then
``data: [DONE]\\n\\n``), so the real ``openai`` client path is what gets exercised. The quirks of
OpenAI-compatible servers (missing ids, id/name on every chunk, one index reused, no usage chunk)
and the faults (429, 5xx, a cut stream, a stall) are options on the replies.

Rendering is separate from transport: both mounts (loopback HTTP in ``scripted_http`` and the
in-process ``httpx2`` transport in ``scripted``) play the same :class:`Rendered` frames.
"""

from __future__ import annotations

import itertools
import json
import math
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from baton.llm.types import Usage

Json = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Call:
    """One tool call the scripted model makes.

    ``arguments`` is sent as given — a string in one piece, or a sequence of pieces each in its own
    chunk (use :func:`pieces` to split). Nothing is validated: malformed JSON and unknown tool names
    are scenarios too. ``id=None`` gets ``call_<n>`` (unless the reply omits ids altogether).
    """

    name: str
    arguments: str | Sequence[str] = "{}"
    id: str | None = None


@dataclass(frozen=True, slots=True)
class Reply:
    """A streamed completion: optional text deltas, then tool calls, then the finish chunk.

    Quirk switches (each one a real server's habit the client must absorb):
    ``omit_call_ids`` sends no tool-call ``id`` at all; ``repeat_id_and_name`` repeats ``id``,
    ``type`` and ``name`` on every argument chunk; ``reuse_index`` sends every call at index 0, each
    new one with a new id; ``send_usage=False`` never sends the usage chunk even when asked.
    Faults: ``cut_after=n`` stops after ``n`` data chunks — ``cut="drop"`` drops the connection
    (a transport error), ``cut="eof"`` ends the body cleanly but without finish or ``[DONE]``.
    ``error_after=n`` sends an in-stream error event (``data: {"error": {...}}``) after ``n`` data
    chunks and ends the body, as the real API does when it fails mid-generation (``error_message``
    and ``error_code`` as the server says them; see :func:`parse_failure` for llama-server's).
    ``hold_after=n`` sends nothing for ``hold`` seconds after ``n`` data chunks (headers already
    sent), then the rest: llama-server holding back output it cannot classify yet; past the
    client's read timeout the client sees a stalled stream.
    ``delay`` is slept before each chunk (for interleaving and read-timeout scenarios).
    ``finish_reason="length"`` ends the reply as a server does at ``max_tokens`` (see
    :func:`runaway`).
    """

    text: str | Sequence[str] = ()
    calls: Sequence[Call] = ()
    finish_reason: str | None = None
    usage: Usage | None = None
    send_usage: bool = True
    omit_call_ids: bool = False
    repeat_id_and_name: bool = False
    reuse_index: bool = False
    cut_after: int | None = None
    cut: Literal["drop", "eof"] = "drop"
    error_after: int | None = None
    error_message: str = "The server had an error while streaming (scripted)"
    error_code: int | None = None
    hold_after: int | None = None
    hold: float = math.inf
    delay: float = 0.0


@dataclass(frozen=True, slots=True)
class HttpError:
    """A non-streamed error response in the API's JSON error shape (e.g. 429, 500, 400)."""

    status: int
    message: str = "scripted error"
    type: str = "server_error"
    code: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Stall:
    """Send nothing — not even headers — for ``seconds`` (default: until the server closes)."""

    seconds: float = math.inf


ScriptItem = Reply | HttpError | Stall
Responder = Callable[[Json], ScriptItem]


def text(*deltas: str, **options: Any) -> Reply:
    """A text reply streamed as the given deltas."""
    return Reply(text=deltas, **options)


def tool_calls(*calls: Call, **options: Any) -> Reply:
    """A reply that makes the given (parallel) tool calls."""
    return Reply(calls=calls, **options)


def answer(
    text: str,
    *,
    status: Literal["done", "delegated", "cannot"] = "done",
    media: Sequence[str] = (),
    piece: int = 8,
    **options: Any,
) -> Reply:
    """A reply that ends the lead's turn with its typed answer, ``answer(text, status, media)``,
    the arguments streamed ``piece`` characters at a time as a real model streams them: what a
    capable model does (docs/lead.md)."""
    args = json.dumps({"text": text, "status": status, "media": list(media)}, ensure_ascii=False)
    return Reply(calls=[Call("answer", pieces(args, piece))], **options)


def pieces(value: str, size: int) -> tuple[str, ...]:
    """Split ``value`` into chunks of ``size`` characters (arguments split across chunks)."""
    return tuple(value[i : i + size] for i in range(0, len(value), size)) or ("",)


def rate_limited(
    retry_after: float | None = None, *, retry_after_ms: int | None = None
) -> HttpError:
    """HTTP 429 with ``Retry-After`` (seconds) and/or ``retry-after-ms``, as OpenAI sends them."""
    headers: dict[str, str] = {}
    if retry_after is not None:
        headers["retry-after"] = f"{retry_after:g}"
    if retry_after_ms is not None:
        headers["retry-after-ms"] = str(retry_after_ms)
    return HttpError(
        429, "Rate limit reached (scripted)", "requests", "rate_limit_exceeded", headers
    )


def server_error(status: int = 500) -> HttpError:
    """A 5xx the client should retry."""
    return HttpError(status, "The server had an error while processing your request (scripted)")


LLAMA_PARSE_ERROR = "The model produced output that does not match the expected Generic format"
"""What llama.cpp's ``llama-server`` answers when the output is not a call of an offered tool."""


def parse_failure(*leading_text: str) -> Reply | HttpError:
    """llama-server rejecting output it could not parse as a tool call: an HTTP 500 when nothing
    was streamed yet, else the leading text (e.g. a code fence) and then an error event."""
    if not leading_text:
        return HttpError(500, LLAMA_PARSE_ERROR, "server_error")
    return Reply(
        text=leading_text,
        error_after=1 + len(leading_text),  # the role chunk, then each piece of text
        error_message=LLAMA_PARSE_ERROR,
        error_code=500,
    )


def runaway(phrase: str, times: int) -> Reply:
    """A model repeating ``phrase`` until the server cuts it at ``max_tokens``."""
    return Reply(text=(phrase,) * times, finish_reason="length")


class Script:
    """Replies handed out in order, then ``responder`` for every later request.

    With neither left, the request is answered with a non-retryable 400 saying the script ran out,
    so an over-long test fails loudly at once rather than hanging or retrying. With ``record=True``
    ``bodies`` keeps every request body it answered, in order (to assert ``tool_choice``,
    ``max_tokens``, messages); by default it stays empty, so a long-lived script (the offline
    model's) does not grow with every request.

    ``strict_tools=True`` makes it as strict as llama-server: a reply that calls a tool the
    request did not offer is answered as :func:`parse_failure` (HTTP 500, or its leading text then
    an error event) instead. ``tool_choice`` is not enforced: a scripted text reply is played as
    written, whatever the request asked.
    """

    def __init__(
        self,
        replies: Iterable[ScriptItem] = (),
        responder: Responder | None = None,
        *,
        strict_tools: bool = False,
        record: bool = False,
    ) -> None:
        self._queue: deque[ScriptItem] = deque(replies)
        self.responder = responder
        self.strict_tools = strict_tools
        self.record = record
        self.bodies: list[Json] = []

    def add(self, *items: ScriptItem) -> None:
        """Append replies to the queue (a test may script the next turn after the first ran)."""
        self._queue.extend(items)

    @property
    def pending(self) -> int:
        return len(self._queue)

    def next(self, body: Json) -> ScriptItem:
        if self.record:
            self.bodies.append(body)
        if self._queue:
            item = self._queue.popleft()
        elif self.responder is not None:
            item = self.responder(body)
        else:
            return HttpError(
                400, "scripted server: the script has no reply left", "invalid_request_error"
            )
        if self.strict_tools and isinstance(item, Reply) and _calls_unoffered(item, body):
            texts = (item.text,) if isinstance(item.text, str) else tuple(item.text)
            return parse_failure(*(piece for piece in texts if piece))
        return item


def _calls_unoffered(reply: Reply, body: Json) -> bool:
    offered = {tool["function"]["name"] for tool in body.get("tools") or ()}
    return any(call.name not in offered for call in reply.calls)


@dataclass(slots=True)
class Rendered:
    """One response ready to play: status, headers, body frames and how the body ends."""

    status: int
    headers: list[tuple[str, str]]
    frames: list[bytes]
    delay: float = 0.0
    cut: bool = False
    stall: float | None = None
    hold_after: int | None = None
    """Send nothing for ``hold`` seconds before frame ``hold_after`` (headers already sent)."""
    hold: float = 0.0


_SSE_HEADERS = [("content-type", "text/event-stream; charset=utf-8"), ("cache-control", "no-cache")]
_completion_ids = itertools.count(1)


def render(item: ScriptItem, body: Json) -> Rendered:
    """Turn a script item into what the server sends for the request ``body``."""
    if isinstance(item, Stall):
        return Rendered(200, list(_SSE_HEADERS), [], stall=item.seconds)
    if isinstance(item, HttpError):
        error = {"message": item.message, "type": item.type, "param": None, "code": item.code}
        payload = json.dumps({"error": error}).encode()
        headers = [("content-type", "application/json"), *item.headers.items()]
        return Rendered(item.status, headers, [payload])
    return _render_reply(item, body)


def _render_reply(reply: Reply, body: Json) -> Rendered:
    with_usage = bool((body.get("stream_options") or {}).get("include_usage"))
    head: Json = {
        "id": f"chatcmpl-scripted{next(_completion_ids):08d}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": str(body.get("model", "scripted")),
        "service_tier": "default",
        "system_fingerprint": "fp_scripted",
    }
    deltas = _deltas(reply)
    finish = reply.finish_reason or ("tool_calls" if reply.calls else "stop")
    frames = [_frame(head, delta, None, with_usage) for delta in deltas]
    frames.append(_frame(head, {}, finish, with_usage))
    if with_usage and reply.send_usage:
        usage = reply.usage or _estimate_usage(reply, body)
        frames.append(_usage_frame(head, usage))
    frames.append(b"data: [DONE]\n\n")
    cut = False
    if reply.error_after is not None:
        error: Json = {"message": reply.error_message, "type": "server_error"}
        if reply.error_code is None:  # OpenAI's shape; llama-server's puts its status in "code"
            error.update(param=None, code=None)
        else:
            error = {"code": reply.error_code, **error}
        payload = json.dumps({"error": error}).encode()
        frames = [*frames[: reply.error_after], b"data: " + payload + b"\n\n"]
    if reply.cut_after is not None:
        frames = frames[: reply.cut_after]
        cut = reply.cut == "drop"
    return Rendered(
        200,
        list(_SSE_HEADERS),
        frames,
        delay=reply.delay,
        cut=cut,
        hold_after=reply.hold_after,
        hold=reply.hold,
    )


def _deltas(reply: Reply) -> list[Json]:
    """The ``delta`` objects of the content chunks, in the order the real API sends them."""
    texts = [reply.text] if isinstance(reply.text, str) else list(reply.text)
    deltas: list[Json] = []
    if texts:
        deltas.append({"role": "assistant", "content": "", "refusal": None})
        deltas.extend({"content": piece} for piece in texts)
    for position, call in enumerate(reply.calls):
        index = 0 if reply.reuse_index else position
        call_id = call.id or f"call_{position}"
        args = [call.arguments] if isinstance(call.arguments, str) else list(call.arguments)
        opening: Json = {"index": index}
        if not reply.omit_call_ids:
            opening["id"] = call_id
        opening["type"] = "function"
        opening["function"] = {"name": call.name, "arguments": ""}
        delta: Json = {"tool_calls": [opening]}
        if not deltas:
            delta = {"role": "assistant", "content": None, "tool_calls": [opening], "refusal": None}
        deltas.append(delta)
        for piece in args:
            entry: Json = {"index": index}
            if reply.repeat_id_and_name:
                if not reply.omit_call_ids:
                    entry["id"] = call_id
                entry["type"] = "function"
                entry["function"] = {"name": call.name, "arguments": piece}
            else:
                entry["function"] = {"arguments": piece}
            deltas.append({"tool_calls": [entry]})
    if not deltas:
        deltas.append({"role": "assistant", "content": "", "refusal": None})
    return deltas


def _frame(head: Json, delta: Json, finish: str | None, with_usage: bool) -> bytes:
    chunk = dict(head)
    chunk["choices"] = [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]
    if with_usage:
        chunk["usage"] = None
    return b"data: " + json.dumps(chunk, separators=(",", ":")).encode() + b"\n\n"


def _usage_frame(head: Json, usage: Usage) -> bytes:
    chunk = dict(head)
    chunk["choices"] = []
    chunk["usage"] = {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.total_tokens,
        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": 0,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }
    return b"data: " + json.dumps(chunk, separators=(",", ":")).encode() + b"\n\n"


def _estimate_usage(reply: Reply, body: Json) -> Usage:
    """A deterministic stand-in for token counts: about four characters a token."""
    prompt = len(json.dumps(body.get("messages", []))) // 4 + 1
    produced = "".join([reply.text] if isinstance(reply.text, str) else reply.text)
    for call in reply.calls:
        args = call.arguments if isinstance(call.arguments, str) else "".join(call.arguments)
        produced += call.name + args
    completion = len(produced) // 4 + 1
    return Usage(
        prompt_tokens=prompt, completion_tokens=completion, total_tokens=prompt + completion
    )
