"""One failed model request, classified: may it be retried, did the stream break, and did the
server fail to parse the model's output?

The last question matters for small models behind servers that parse tool calls themselves
(llama.cpp's ``llama-server``): output that is not a call of an offered tool is answered with an
HTTP 500, or — streaming — with an ``{"error": ...}`` event after the leading text. Retrying that
request unchanged mostly gets the same output again, so such a failure is marked ``parse_error``
and the client's next attempt tells the model what went wrong (see :mod:`baton.llm.correction`).

:class:`Attempts` holds what those decisions depend on during one call (whether the attempt's text
was shown, which request the next attempt sends) and offers it to tenacity as its hooks.
"""

from __future__ import annotations

import email.utils
import re
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import httpx2
import openai

from baton.llm.types import (
    CallDeltaSink,
    ModelReply,
    RetractSink,
    RetryNotice,
    RetrySink,
    TextSink,
)

if TYPE_CHECKING:
    from tenacity import RetryCallState

StreamOnce = Callable[
    [dict[str, Any], TextSink | None, CallDeltaSink | None], Awaitable[ModelReply]
]
"""One streamed request: its body, the text sink and the call-argument sink."""

_RETRYABLE_STATUS = frozenset({408, 409, 429})
_PARSE_ERROR = re.compile(
    r"does not match the expected|failed to parse|could not be parsed|tool[ _]call",
    re.IGNORECASE,
)
"""What servers say when the model's output did not parse as a call of an offered tool; llama.cpp:
"The model produced output that does not match the expected <format> format"."""


class AttemptFailed(Exception):
    """One request failed; decides whether the client tries again. Never escapes the client."""

    def __init__(
        self,
        reason: str,
        *,
        retryable: bool,
        broken: bool = False,
        retry_after: float | None = None,
        status_code: int | None = None,
        parse_error: bool = False,
        detail: str = "",
    ) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retryable = retryable
        self.broken = broken
        self.retry_after = retry_after
        self.status_code = status_code
        self.parse_error = parse_error
        self.detail = detail
        """The server's own words (its error message), for telling the model what went wrong."""


def says_parse_error(message: str) -> bool:
    """Whether a server's error message means it could not parse the model's output."""
    return _PARSE_ERROR.search(message) is not None


def stream_error(error: object) -> AttemptFailed:
    """An ``{"error": ...}`` event in the middle of a stream: the stream is broken."""
    message = error.get("message", error) if isinstance(error, dict) else error
    text = str(message)
    return AttemptFailed(
        f"the server reported an error mid-stream: {text}",
        retryable=True,
        broken=True,
        parse_error=says_parse_error(text),
        detail=text,
    )


def status_failure(exc: openai.APIStatusError) -> AttemptFailed:
    """A refused request (non-2xx): retryable as the server's ``x-should-retry`` or the status
    says; a 5xx whose message says the output did not parse is a parse error."""
    status = exc.status_code
    headers = exc.response.headers
    should = headers.get("x-should-retry")
    if should in ("true", "false"):
        retryable = should == "true"
    else:
        retryable = status in _RETRYABLE_STATUS or status >= 500
    body = exc.body
    detail = body.get("message") if isinstance(body, dict) else None
    detail = detail if isinstance(detail, str) else exc.message
    return AttemptFailed(
        f"the endpoint answered HTTP {status}: {exc.message}",
        retryable=retryable,
        retry_after=retry_after(headers) if retryable else None,
        status_code=status,
        parse_error=status >= 500 and says_parse_error(detail),
        detail=detail,
    )


def retry_after(headers: httpx2.Headers) -> float | None:
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


def retried_failure(state: RetryCallState) -> AttemptFailed:
    """The failure tenacity is about to retry (only ``AttemptFailed`` is ever retried)."""
    assert state.outcome is not None
    failure = state.outcome.exception()
    assert isinstance(failure, AttemptFailed)
    return failure


class SinkRaised(Exception):
    """Carries what ``on_text`` raised past the stream's own error handling, to be re-raised."""

    def __init__(self, error: Exception) -> None:
        super().__init__(repr(error))
        self.error = error


class Attempts:
    """The attempts of one ``complete`` call, and the hooks tenacity drives them with: it keeps
    what the retry decisions depend on — how many attempts were made, whether the current one's
    text reached ``on_text``, and the body the next one sends."""

    def __init__(
        self,
        body: dict[str, Any],
        stream_once: StreamOnce,
        corrected: Callable[[str], dict[str, Any]],
        on_text: TextSink | None,
        on_retry: RetrySink | None,
        on_retract: RetractSink | None,
        on_call_delta: CallDeltaSink | None = None,
    ) -> None:
        self.body = body
        self._stream_once = stream_once
        self._corrected = corrected
        self._on_text = on_text
        self._text_sink = self._sink if on_text is not None else None
        self._on_call_delta = on_call_delta
        self._call_sink = self._call_delta if on_call_delta is not None else None
        self._on_retry = on_retry
        self._on_retract = on_retract
        self.attempts = 0
        self.shown = False
        """Whether the current attempt's text reached ``on_text``."""
        self.first_failure: AttemptFailed | None = None
        """The failure of the attempt made before tenacity took over, to be replayed as its
        first attempt (so a reply that needs no retry builds no retry machinery)."""

    @property
    def stuck(self) -> bool:
        """Text was shown and nobody can take it back: a retry would show it twice."""
        return self.shown and self._on_retract is None

    async def attempt(self) -> ModelReply:
        if self.first_failure is not None:
            failure, self.first_failure = self.first_failure, None
            raise failure
        self.attempts += 1
        self.shown = False
        return await self._stream_once(self.body, self._text_sink, self._call_sink)

    async def _sink(self, delta: str) -> None:
        self.shown = True
        try:
            await self._on_text(delta)  # type: ignore[misc]  # only used when on_text is set
        except Exception as exc:
            raise SinkRaised(exc) from exc

    async def _call_delta(self, position: int, name: str, piece: str) -> None:
        """Like the text sink: the caller may show a call's argument as it streams."""
        self.shown = True
        try:
            await self._on_call_delta(position, name, piece)  # type: ignore[misc]  # set
        except Exception as exc:
            raise SinkRaised(exc) from exc

    def may_retry(self, error: BaseException) -> bool:
        return isinstance(error, AttemptFailed) and error.retryable and not self.stuck

    async def before_sleep(self, state: RetryCallState) -> None:
        """Before each wait: take back the text shown, tell ``on_retry`` (with exactly the wait
        tenacity is about to sleep), and after a parse error switch to the corrected request."""
        failure = retried_failure(state)
        if self.shown and self._on_retract is not None:
            await self._on_retract()
        if self._on_retry is not None:
            delay = state.upcoming_sleep
            await self._on_retry(
                RetryNotice(self.attempts, failure.reason, delay, failure.parse_error)
            )
        if failure.parse_error:
            self.body = self._corrected(failure.detail)
