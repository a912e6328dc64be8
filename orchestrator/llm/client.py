"""The streaming model client: :class:`OpenAIChatModel` over the official ``openai`` package.

Why it reads bytes instead of SDK chunk objects: the SDK spends ~1–4 ms per request transforming
typed parameters and ~140 µs building each chunk object, which dwarfs the engine's own work. So the
request goes through ``AsyncOpenAI.post("/chat/completions", cast_to=httpx2.Response, stream=True)``
— the SDK's documented raw-request path, which keeps its auth headers, base URL, timeouts and its
status → exception mapping (429 → ``openai.RateLimitError``, 5xx → ``InternalServerError``, …) —
and the SSE body is split and ``json.loads``-ed here, then assembled by
:class:`~baton.llm.assemble.StreamAssembler`.

**One retry policy.** The SDK's own retries are switched off (``max_retries=0``); tenacity retries
rate limits (honouring ``retry-after-ms`` / ``Retry-After``, capped), 408/409/5xx, connection
errors, timeouts and broken streams, with exponential backoff and jitter. Other 4xx fail at once.
Spent retries raise :class:`~baton.errors.ModelError` (``retryable=True, attempts=n``).

**Broken streams.** A body that ends without ``[DONE]`` or a ``finish_reason``, or whose connection
drops or stalls mid-way, raises :class:`~baton.errors.StreamBroken` — never a partial
reply. It is retried only while no text has reached ``on_text``: once the user has seen some of the
answer, a retry would show it twice, so the error is raised at once with ``text_delivered=True``.
"""

from __future__ import annotations

import email.utils
import json
import time
from collections.abc import Sequence
from typing import Any, Self

import anyio
import httpx2
import openai
from pydantic import BaseModel, ConfigDict, Field, SecretStr
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential_jitter,
)

from baton.bus.errors import ConfigError
from baton.errors import ModelError, StreamBroken
from baton.llm.assemble import StreamAssembler
from baton.llm.guard import check_model_endpoint
from baton.llm.types import (
    Message,
    ModelReply,
    RetractSink,
    RetrySink,
    TextSink,
    ToolChoice,
    ToolSchema,
)

_RETRYABLE_STATUS = frozenset({408, 409, 429})
_NO_ACCOUNT_HEADERS = {"OpenAI-Organization": openai.Omit(), "OpenAI-Project": openai.Omit()}
_REQUEST_OPTIONS: Any = {"security": {"bearer_auth": True}, "headers": _NO_ACCOUNT_HEADERS}
_KEYLESS_REQUEST_OPTIONS: Any = {
    "security": {"bearer_auth": True},
    "headers": {**_NO_ACCOUNT_HEADERS, "Authorization": openai.Omit()},
}
"""A keyless endpoint (a local vLLM or Ollama) gets no ``Authorization`` header at all, rather than
an empty or made-up bearer token."""
OPENAI_API_URL = "https://api.openai.com/v1"
"""Where requests go when :class:`ModelSettings` names no ``base_url``: OpenAI's public endpoint."""


class ModelSettings(BaseModel):
    """How to reach one OpenAI-compatible endpoint, and how hard to try."""

    model_config = ConfigDict(frozen=True)

    model: str
    base_url: str | None = Field(None, description=f"None means OpenAI's own, {OPENAI_API_URL}")
    api_key: SecretStr | None = Field(None, description="None or empty: no Authorization header")
    timeout: float = Field(60.0, gt=0, description="read/write timeout per request, seconds")
    connect_timeout: float = Field(10.0, gt=0)
    max_retries: int = Field(3, ge=0, description="retries after the first attempt")
    backoff_initial: float = Field(0.5, ge=0)
    backoff_max: float = Field(20.0, ge=0)
    retry_after_cap: float = Field(60.0, ge=0, description="longest server-asked wait honoured")
    include_usage: bool = Field(True, description="send stream_options.include_usage")
    extra_body: dict[str, Any] = Field(default_factory=dict, description="e.g. temperature")


class _AttemptFailed(Exception):
    """One request failed; decides whether tenacity tries again. Never escapes the client."""

    def __init__(
        self,
        reason: str,
        *,
        retryable: bool,
        broken: bool = False,
        retry_after: float | None = None,
        status_code: int | None = None,
    ) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retryable = retryable
        self.broken = broken
        self.retry_after = retry_after
        self.status_code = status_code


class OpenAIChatModel:
    """:class:`~baton.llm.types.ChatModel` over any OpenAI-compatible endpoint.

    Give it ``settings`` and optionally one of: ``client`` (an ``AsyncOpenAI`` you keep owning; a
    copy with ``max_retries=0`` is used), ``http_client`` or ``transport`` (an ``httpx2`` client or
    transport, owned and closed by this model — e.g. the scripted server's). An async context
    manager; after :meth:`aclose` it refuses new requests.
    """

    def __init__(
        self,
        settings: ModelSettings,
        *,
        client: openai.AsyncOpenAI | None = None,
        http_client: httpx2.AsyncClient | None = None,
        transport: httpx2.AsyncBaseTransport | None = None,
    ) -> None:
        self.settings = settings
        self._owns_client = client is None
        self._closed = False
        if client is not None:
            self._client = client.with_options(max_retries=0)
            self._request_options: Any = {"security": {"bearer_auth": True}}  # the caller's own
        else:
            if transport is not None:
                http_client = httpx2.AsyncClient(transport=transport)
            key = settings.api_key.get_secret_value() if settings.api_key else ""
            self._request_options = _REQUEST_OPTIONS if key else _KEYLESS_REQUEST_OPTIONS
            try:
                # Every value the SDK would otherwise take from OPENAI_* variables is passed, empty
                # where unset: a library object reads no environment (only baton.settings does).
                self._client = openai.AsyncOpenAI(
                    api_key=key,
                    admin_api_key="",
                    organization="",
                    project="",
                    webhook_secret="",
                    base_url=settings.base_url or OPENAI_API_URL,
                    timeout=httpx2.Timeout(settings.timeout, connect=settings.connect_timeout),
                    max_retries=0,
                    http_client=http_client,
                )
            except openai.OpenAIError as exc:
                raise ConfigError(
                    f"cannot set up the model client for {settings.model!r}: {exc}"
                ) from exc
        self._backoff = wait_exponential_jitter(
            multiplier=settings.backoff_initial,
            max=settings.backoff_max,
            jitter=settings.backoff_initial,
        )

    @property
    def model(self) -> str:
        return self.settings.model

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the HTTP client (unless it was injected as an ``AsyncOpenAI``). Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._owns_client:
            await self._client.close()

    async def complete(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSchema] = (),
        *,
        on_text: TextSink | None = None,
        tool_choice: ToolChoice | None = None,
        on_retry: RetrySink | None = None,
        on_retract: RetractSink | None = None,
    ) -> ModelReply:
        """One streamed completion, retried as the module docstring says."""
        if self._closed:
            raise ModelError(f"the model client for {self.model!r} is closed; open a new one")
        check_model_endpoint(self._client.base_url)  # tests confine requests to this machine
        body: dict[str, Any] = {"model": self.model, "messages": list(messages), "stream": True}
        if tools:
            body["tools"] = list(tools)
            if tool_choice is not None:
                body["tool_choice"] = tool_choice
        if self.settings.include_usage:
            body["stream_options"] = {"include_usage": True}
        if self.settings.extra_body:
            body.update(self.settings.extra_body)

        delivered = False
        attempts = 0

        async def sink(delta: str) -> None:
            nonlocal delivered
            delivered = True
            assert on_text is not None
            await on_text(delta)

        def should_retry(exc: BaseException) -> bool:
            return isinstance(exc, _AttemptFailed) and exc.retryable and not delivered

        retrying = AsyncRetrying(
            stop=stop_after_attempt(self.settings.max_retries + 1),
            wait=self._wait,
            retry=retry_if_exception(should_retry),
            sleep=anyio.sleep,
            reraise=True,
        )
        reply: ModelReply | None = None
        try:
            async for attempt in retrying:
                with attempt:
                    attempts += 1
                    reply = await self._stream_once(body, sink if on_text is not None else None)
        except _AttemptFailed as failure:
            raise self._give_up(failure, attempts, delivered) from failure.__cause__
        assert reply is not None
        return reply

    def _wait(self, state: RetryCallState) -> float:
        failure = state.outcome.exception() if state.outcome else None
        if isinstance(failure, _AttemptFailed) and failure.retry_after is not None:
            return min(failure.retry_after, self.settings.retry_after_cap)
        return float(self._backoff(state))

    def _give_up(self, failure: _AttemptFailed, attempts: int, delivered: bool) -> ModelError:
        where = f"model {self.model!r}"
        if failure.broken:
            if delivered:
                note = "text was already shown, so it was not retried"
            else:
                note = f"gave up after {attempts} attempt(s)"
            return StreamBroken(
                f"{where}: {failure.reason}; {note}",
                retryable=failure.retryable,
                attempts=attempts,
                text_delivered=delivered,
            )
        if failure.retryable:
            note = f"gave up after {attempts} attempt(s); try again later"
        else:
            note = "not retried; fix the request or the settings"
        return ModelError(
            f"{where}: {failure.reason}; {note}",
            retryable=failure.retryable,
            attempts=attempts,
            status_code=failure.status_code,
        )

    async def _stream_once(self, body: dict[str, Any], sink: TextSink | None) -> ModelReply:
        try:
            response = await self._client.post(
                "/chat/completions",
                cast_to=httpx2.Response,
                body=body,
                options=self._request_options,
                stream=True,
            )
        except openai.APIStatusError as exc:
            raise _status_failure(exc) from exc
        except openai.APITimeoutError as exc:
            raise _AttemptFailed("timed out waiting for the response", retryable=True) from exc
        except openai.APIConnectionError as exc:
            reason = f"cannot reach the endpoint: {exc.__cause__ or exc}"
            raise _AttemptFailed(reason, retryable=True) from exc
        try:
            return await _read_stream(response, sink)
        except httpx2.TimeoutException as exc:
            reason = "the stream stalled past the read timeout"
            raise _AttemptFailed(reason, retryable=True, broken=True) from exc
        except httpx2.TransportError as exc:
            reason = f"the connection dropped mid-stream ({exc})"
            raise _AttemptFailed(reason, retryable=True, broken=True) from exc
        finally:
            with anyio.CancelScope(shield=True):
                await response.aclose()


async def _read_stream(response: httpx2.Response, sink: TextSink | None) -> ModelReply:
    """Split the SSE body into ``data:`` payloads and assemble them; see the module docstring."""
    assembler = StreamAssembler()
    decoder = SseDecoder()
    done = False
    async for raw in response.aiter_bytes():
        for payload in decoder.feed(raw):
            if done:
                continue
            if payload == b"[DONE]":
                done = True
                continue
            delta = assembler.feed(_parse_chunk(payload))
            if delta and sink is not None:
                await sink(delta)
    for payload in decoder.flush():
        if payload == b"[DONE]":
            done = True
        elif not done:
            delta = assembler.feed(_parse_chunk(payload))
            if delta and sink is not None:
                await sink(delta)
    if not done and assembler.finish_reason is None:
        raise _AttemptFailed(
            "the stream ended before the server said it was done (no finish_reason, no [DONE])",
            retryable=True,
            broken=True,
        )
    return assembler.reply()


def _parse_chunk(payload: bytes) -> dict[str, Any]:
    try:
        chunk = json.loads(payload)
    except ValueError as exc:
        reason = f"the server sent a chunk that is not JSON: {payload[:80]!r}"
        raise _AttemptFailed(reason, retryable=False) from exc
    if not isinstance(chunk, dict):
        raise _AttemptFailed(
            f"the server sent a chunk that is not an object: {payload[:80]!r}", retryable=False
        )
    error = chunk.get("error")
    if error:
        message = error.get("message", error) if isinstance(error, dict) else error
        raise _AttemptFailed(
            f"the server reported an error mid-stream: {message}", retryable=True, broken=True
        )
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


def _status_failure(exc: openai.APIStatusError) -> _AttemptFailed:
    status = exc.status_code
    headers = exc.response.headers
    should = headers.get("x-should-retry")
    if should in ("true", "false"):
        retryable = should == "true"
    else:
        retryable = status in _RETRYABLE_STATUS or status >= 500
    message = exc.message
    return _AttemptFailed(
        f"the endpoint answered HTTP {status}: {message}",
        retryable=retryable,
        retry_after=_retry_after(headers) if retryable else None,
        status_code=status,
    )


def _retry_after(headers: httpx2.Headers) -> float | None:
    """The server-asked wait in seconds: ``retry-after-ms`` first, then ``Retry-After`` given as
    seconds or as an HTTP date."""
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())
