"""The seam between the agent loop engine and whatever model answers it.

The engine only ever sees :class:`ChatModel`: one streamed completion in, one assembled
:class:`ModelReply` out. The real implementation talks to any OpenAI-compatible endpoint through the
``openai`` package; tests and the offline model reach the same client through the scripted server,
so there is exactly one code path from request to reply.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from openai.types.chat import ChatCompletionMessageParam, ChatCompletionToolParam

Message = ChatCompletionMessageParam
ToolSchema = ChatCompletionToolParam
TextSink = Callable[[str], Awaitable[None]]


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
    answer is never returned as if it were whole.
    """

    @property
    def model(self) -> str: ...

    async def complete(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSchema] = (),
        *,
        on_text: TextSink | None = None,
    ) -> ModelReply: ...
