"""The seam between the agent loop engine and whatever model answers it.

The engine only ever sees :class:`ChatModel`: one streamed completion in, one assembled
:class:`ModelReply` out. The real implementation talks to any OpenAI-compatible endpoint through the
``openai`` package; tests and the offline model reach the same client through the scripted server,
so there is exactly one code path from request to reply.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

if TYPE_CHECKING:
    from openai.types.chat import ChatCompletionMessageParam, ChatCompletionToolParam

    Message = ChatCompletionMessageParam
    ToolSchema = ChatCompletionToolParam
else:
    # At run time a message and a tool schema are plain dicts, and this module is imported by
    # processes that never call a model (``baton watch``, ``post``, ``sessions``): importing
    # ``openai`` for two type aliases cost each of them about half a second.
    Message = dict[str, Any]
    ToolSchema = dict[str, Any]
TextSink = Callable[[str], Awaitable[None]]
CallDeltaSink = Callable[[int, str, str], Awaitable[None]]
"""``on_call_delta(position, name, piece)``: the next ``piece`` of the arguments of the reply's
``position``-th tool call (0 first) named ``name`` (as far as it is known yet), as it streams."""
ToolChoice = Literal["auto", "required", "none"]
"""What a request asks of the model about tools (the Chat Completions ``tool_choice``)."""


@dataclass(frozen=True, slots=True)
class RetryNotice:
    """One failed attempt the client is about to retry (the engine turns it into an event)."""

    attempt: int
    """The attempt that failed, 1 for the first request."""
    reason: str
    delay_s: float
    parse_error: bool = False
    """The server could not parse the model's output as a call of an offered tool; the next
    attempt tells the model so and lists the valid tool names."""


RetrySink = Callable[[RetryNotice], Awaitable[None]]
RetractSink = Callable[[], Awaitable[None]]
"""Called before a retry when text of the failed attempt already reached ``on_text``."""


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call as the model asked for it; ``arguments`` is raw JSON text ("" becomes "{}")."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True, slots=True)
class Usage:
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


@dataclass(frozen=True, slots=True)
class ModelReply:
    """A whole streamed completion, assembled. ``usage`` is None when the server sent none."""

    text: str
    tool_calls: tuple[ToolCall, ...]
    finish_reason: str | None
    usage: Usage | None


class ChatModel(Protocol):
    """One streamed chat completion.

    Guarantees: ``on_text`` receives text deltas in order as they arrive, before ``complete``
    returns; tool calls are returned in the model's call order. Raises ``ModelError`` (from
    ``baton.errors``) once retries are spent or when a stream dies mid-way — a partial
    answer is never returned as if it were whole. An exception raised by ``on_text`` ends the
    request at once (the stream is closed) and propagates unchanged, never retried.

    ``tool_choice`` (None: not sent) is the first attempt's; ``on_retry`` hears of every retry
    before its wait; ``on_retract``, when given, lets a stream that broke after some text was
    delivered be retried anyway: it is awaited first, so the caller can take that text back.
    A retry after the server could not parse the output as a tool call carries one corrective
    user message (the caller's list is never changed) and may ask ``tool_choice="required"``.
    ``finish_reason == "length"`` is returned as it came: the reply was cut, not finished.
    ``on_call_delta``, when given, hears each piece of the tool calls' arguments as it arrives
    (so a tool's argument can be shown while it streams); it is treated like ``on_text``: what it
    was given counts as shown, taken back through ``on_retract`` before a retry.
    """

    @property
    def model(self) -> str: ...

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
    ) -> ModelReply: ...
