"""The streaming model client: :class:`OpenAIChatModel` over the official ``openai`` package.

Why it reads bytes instead of SDK chunk objects: the SDK spends ~1–4 ms per request transforming
typed parameters and ~140 µs building each chunk object, which dwarfs the engine's own work. So the
request goes through ``AsyncOpenAI.post("/chat/completions", cast_to=httpx2.Response, stream=True)``
— the SDK's documented raw-request path, which keeps its auth headers, base URL, timeouts and its
status → exception mapping (429 → ``openai.RateLimitError``, 5xx → ``InternalServerError``, …) —
and the SSE body is read by :mod:`baton.llm.stream`.

**Every request is bounded.** ``max_tokens`` (default 1024) goes on every request, so a model that
repeats itself stops at a known length and says so with ``finish_reason == "length"``, which the
reply carries for the engine to act on. Sampling settings are sent only when set; ``extra_body``
is applied last and wins over everything.

**One retry policy.** The SDK's own retries are switched off (``max_retries=0``); tenacity (the
project's retry library, as in :mod:`baton.bus.retry`) retries rate limits (honouring
``retry-after-ms`` / ``Retry-After``, capped), 408/409/5xx, connection errors, timeouts and broken
streams, with exponential backoff and jitter. Other 4xx fail at once. Spent retries raise
:class:`~baton.llm.errors.ModelError` (``retryable=True, attempts=n``). ``on_retry`` hears of each
retry (attempt, reason, the exact wait) before the wait, so it is never invisible.

**Who saw what.** A stream that breaks (ends without ``[DONE]`` or a ``finish_reason``, drops,
stalls, or carries an error event) raises :class:`~baton.llm.errors.StreamBroken` — never a partial
reply. If some of its text already reached ``on_text``, a retry would show that text twice: so the
retry happens only when the caller gave ``on_retract`` (awaited first, to take the text back);
without it the error is raised at once with ``text_delivered=True``. Text nobody is shown (no
``on_text``) never blocks a retry.

**Parse errors.** When the server says it could not parse the model's output as a call of an
offered tool (llama.cpp: HTTP 500, or an error event mid-stream), the retry tells the model so in
one extra user message naming the valid tools, and asks ``tool_choice="required"`` when the call
left the choice free (``ModelSettings.escalate_tool_choice``); see :mod:`baton.llm.correction`.

**The caller's sink is the caller's.** An exception raised by ``on_text`` ends the request (the
response is closed) and propagates unchanged, never retried: the engine uses that to stop a
runaway answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Self

import anyio
import httpx2
import openai
from pydantic import BaseModel, ConfigDict, Field, SecretStr

from baton.errors import ConfigError
from baton.llm.correction import correction_message, retry_tool_choice, tool_names
from baton.llm.errors import ModelError, StreamBroken
from baton.llm.failures import (
    AttemptFailed,
    Attempts,
    SinkRaised,
    retried_failure,
    status_failure,
)
from baton.llm.guard import check_model_endpoint
from baton.llm.stream import SseDecoder, read_stream
from baton.llm.types import (
    CallDeltaSink,
    Message,
    ModelReply,
    RetractSink,
    RetrySink,
    TextSink,
    ToolChoice,
    ToolSchema,
)

if TYPE_CHECKING:
    from tenacity import RetryCallState

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

__all__ = ["OPENAI_API_URL", "ModelSettings", "OpenAIChatModel", "SseDecoder"]


class ModelSettings(BaseModel):
    """How to reach one OpenAI-compatible endpoint, what to ask of it, and how hard to try."""

    model_config = ConfigDict(defer_build=True, frozen=True)

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
    temperature: float | None = Field(None, ge=0, le=2, description="None: the server's default")
    top_p: float | None = Field(None, gt=0, le=1, description="None: the server's default")
    max_tokens: int | None = Field(
        1024, ge=1, description="longest reply, sent on every request; None: not sent (unbounded)"
    )
    parallel_tool_calls: bool | None = Field(
        None, description="sent only with tools; None: the server's default"
    )
    escalate_tool_choice: bool = Field(
        True, description='ask tool_choice="required" on the retry after a parse error'
    )
    extra_body: dict[str, Any] = Field(
        default_factory=dict, description="more request fields; they win over everything"
    )


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
        self._fields = _request_fields(settings)

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
        on_call_delta: CallDeltaSink | None = None,
    ) -> ModelReply:
        """One streamed completion, retried as the module docstring says."""
        if self._closed:
            raise ModelError(f"the model client for {self.model!r} is closed; open a new one")
        check_model_endpoint(self._client.base_url)  # tests confine requests to this machine

        def corrected(detail: str) -> dict[str, Any]:
            return self._corrected(messages, tools, tool_choice, detail)

        body = self._body(messages, tools, tool_choice)
        call = Attempts(
            body, self._stream_once, corrected, on_text, on_retry, on_retract, on_call_delta
        )
        try:
            try:
                return await call.attempt()  # the common case, without building retry machinery
            except AttemptFailed as failure:
                call.first_failure = failure
            # tenacity only once a request failed: a session whose requests all succeed never
            # imports it (its import is a few per cent of the first token's)
            from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt

            retrying = AsyncRetrying(
                stop=stop_after_attempt(self.settings.max_retries + 1),
                wait=self._wait,
                retry=retry_if_exception(call.may_retry),
                before_sleep=call.before_sleep,
                sleep=anyio.sleep,
                reraise=True,
            )
            return await retrying(call.attempt)
        except SinkRaised as raised:
            error = raised.error
        except AttemptFailed as failure:
            stuck = call.stuck
            raise self._give_up(failure, call.attempts, call.shown, stuck) from failure.__cause__
        raise error  # what on_text raised, unchanged and unretried

    def _body(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSchema],
        tool_choice: ToolChoice | None,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "messages": list(messages), "stream": True}
        body.update(self._fields)
        if tools:
            body["tools"] = list(tools)
            if tool_choice is not None:
                body["tool_choice"] = tool_choice
            if self.settings.parallel_tool_calls is not None:
                body["parallel_tool_calls"] = self.settings.parallel_tool_calls
        if self.settings.extra_body:
            body.update(self.settings.extra_body)
        return body

    def _corrected(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSchema],
        tool_choice: ToolChoice | None,
        detail: str,
    ) -> dict[str, Any]:
        """The request of a retry after a parse error (see :mod:`baton.llm.correction`): built
        from the caller's messages each time, so it carries one correction, never a pile."""
        choice = retry_tool_choice(tool_choice, escalate=self.settings.escalate_tool_choice)
        note = correction_message(detail, tool_names(tools), required=choice == "required")
        retry: list[Message] = [*messages, {"role": "user", "content": note}]
        return self._body(retry, tools, choice)

    def _wait(self, state: RetryCallState) -> float:
        """The server-asked wait (capped), else exponential backoff with jitter."""
        retry_after = retried_failure(state).retry_after
        if retry_after is not None:
            return min(retry_after, self.settings.retry_after_cap)
        from tenacity import wait_exponential_jitter

        initial = self.settings.backoff_initial
        backoff = wait_exponential_jitter(
            multiplier=initial, max=self.settings.backoff_max, jitter=initial
        )
        return backoff(state)

    def _give_up(
        self, failure: AttemptFailed, attempts: int, shown: bool, stuck: bool
    ) -> ModelError:
        """The error to raise; ``shown``: this attempt's text reached ``on_text``; ``stuck``: and
        could not be taken back, which is why it was not retried."""
        where = f"model {self.model!r}"
        if failure.broken:
            if stuck:
                note = "text was already shown and cannot be taken back, so it was not retried"
            elif failure.retryable:
                note = f"gave up after {attempts} attempt(s)"
            else:
                note = "not retried"
            return StreamBroken(
                f"{where}: {failure.reason}; {note}",
                retryable=failure.retryable,
                attempts=attempts,
                text_delivered=shown,
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

    async def _stream_once(
        self, body: dict[str, Any], sink: TextSink | None, call_sink: CallDeltaSink | None
    ) -> ModelReply:
        try:
            response = await self._client.post(
                "/chat/completions",
                cast_to=httpx2.Response,
                body=body,
                options=self._request_options,
                stream=True,
            )
        except openai.APIStatusError as exc:
            raise status_failure(exc) from exc
        except openai.APITimeoutError as exc:
            raise AttemptFailed("timed out waiting for the response", retryable=True) from exc
        except openai.APIConnectionError as exc:
            reason = f"cannot reach the endpoint: {exc.__cause__ or exc}"
            raise AttemptFailed(reason, retryable=True) from exc
        try:
            return await read_stream(response, sink, call_sink)
        except httpx2.TimeoutException as exc:
            reason = "the stream stalled past the read timeout"
            raise AttemptFailed(reason, retryable=True, broken=True) from exc
        except httpx2.TransportError as exc:
            reason = f"the connection dropped mid-stream ({exc})"
            raise AttemptFailed(reason, retryable=True, broken=True) from exc
        finally:
            with anyio.CancelScope(shield=True):
                await response.aclose()


def _request_fields(settings: ModelSettings) -> dict[str, Any]:
    """The request fields every call of these settings sends (computed once, not per request)."""
    fields: dict[str, Any] = {}
    if settings.include_usage:
        fields["stream_options"] = {"include_usage": True}
    if settings.max_tokens is not None:
        fields["max_tokens"] = settings.max_tokens
    if settings.temperature is not None:
        fields["temperature"] = settings.temperature
    if settings.top_p is not None:
        fields["top_p"] = settings.top_p
    return fields
