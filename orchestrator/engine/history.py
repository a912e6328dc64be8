"""The chat messages the loop adds to a history, in the Chat Completions wire shape.

The history is the caller's list of plain dicts (``ChatCompletionMessageParam``), so it can be
checkpointed as JSON and sent as is. Every assistant message that calls tools must be followed by
one tool message per call in any later request — the loop keeps that true even when a turn is cut
short.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from openai.types.chat import (
        ChatCompletionAssistantMessageParam,
        ChatCompletionMessageFunctionToolCallParam,
        ChatCompletionToolMessageParam,
    )

from baton.llm.types import Message, ModelReply, ToolCall


def assistant_message(reply: ModelReply) -> ChatCompletionAssistantMessageParam:
    """The assistant message a reply adds to the history."""
    message: ChatCompletionAssistantMessageParam = {"role": "assistant", "content": reply.text}
    if reply.tool_calls:
        message["tool_calls"] = [_call_param(call) for call in reply.tool_calls]
        if not reply.text:
            message["content"] = None
    return message


def _call_param(call: ToolCall) -> ChatCompletionMessageFunctionToolCallParam:
    return {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": call.arguments},
    }


def tool_message(call_id: str, content: str) -> ChatCompletionToolMessageParam:
    """The tool message that answers one call."""
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def newest_user_index(history: Sequence[Message]) -> int:
    """Index of the last user message (the turn's question), or ``len(history)`` when none."""
    for index in range(len(history) - 1, -1, -1):
        if cast(Mapping[str, object], history[index]).get("role") == "user":
            return index
    return len(history)
