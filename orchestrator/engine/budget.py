"""Keeping the next request inside the model's context budget.

Before each model call the loop estimates the request's size — cheaply, about four characters per
token, which is close enough to decide *whether* to compress — and when it would exceed the budget
it compresses the history in place, oldest first:

1. tool results of older rounds are replaced by a one-line note (they are the bulk of most
   contexts, and the model has already acted on them);
2. then whole older turns are dropped, each from one user message up to the next, so an assistant
   message and its tool results always go together.

The system prompt, the newest user message and everything of the current turn's latest round are
never touched. The caller owns the message list, so a compressed history is what gets checkpointed.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import cast

from baton.engine import messages as texts
from baton.llm.types import Message, ToolSchema

log = logging.getLogger(__name__)

MESSAGE_OVERHEAD_CHARS = 16
"""Role and separators of one message, in characters."""
IMAGE_CHARS = 3_000
"""What an attached image is counted as (a few hundred tokens at low detail)."""


@dataclass(frozen=True, slots=True)
class TokenBudget:
    """The context budget of one model: ``max_tokens`` for the prompt plus ``reserve_tokens``
    left for the reply."""

    max_tokens: int
    reserve_tokens: int = 1_024
    chars_per_token: float = 4.0

    def __post_init__(self) -> None:
        if self.max_tokens <= self.reserve_tokens:
            raise ValueError(
                f"max_tokens ({self.max_tokens}) must exceed reserve_tokens ({self.reserve_tokens})"
            )

    @property
    def limit_chars(self) -> int:
        return int((self.max_tokens - self.reserve_tokens) * self.chars_per_token)


@dataclass(frozen=True, slots=True)
class Compression:
    """What one compression did; ``keep_from`` is the protected tail's new start index."""

    bodies_dropped: int
    messages_dropped: int
    keep_from: int
    chars_before: int
    chars_after: int


def message_chars(message: Message) -> int:
    """Approximate size of one message in characters."""
    fields = cast(Mapping[str, object], message)
    size = MESSAGE_OVERHEAD_CHARS
    content = fields.get("content")
    if isinstance(content, str):
        size += len(content)
    elif isinstance(content, list):
        for part in content:
            text = part.get("text") if isinstance(part, dict) else None
            size += len(text) if isinstance(text, str) else IMAGE_CHARS
    calls = fields.get("tool_calls")
    if isinstance(calls, list):
        for call in calls:
            function = call.get("function", {}) if isinstance(call, dict) else {}
            size += len(str(function.get("name", ""))) + len(str(function.get("arguments", "")))
    return size


def tools_chars(schemas: Sequence[ToolSchema]) -> int:
    """Size of the ``tools`` parameter, which counts against the context too."""
    return len(json.dumps(list(schemas))) if schemas else 0


def _role(message: Message) -> object:
    return cast(Mapping[str, object], message).get("role")


def _last_round_start(history: Sequence[Message]) -> int:
    """Index of the latest assistant message that called tools (its results stay whole)."""
    for index in range(len(history) - 1, -1, -1):
        message = cast(Mapping[str, object], history[index])
        if message.get("role") == "assistant" and message.get("tool_calls"):
            return index
    return len(history)


def fit(
    history: list[Message], keep_from: int, budget: TokenBudget, fixed_chars: int = 0
) -> Compression | None:
    """Compress ``history`` in place until it fits ``budget``; None when it already fits.

    ``keep_from`` is the index of the newest user message: it and everything after it stay.
    """
    limit = budget.limit_chars
    sizes = [message_chars(message) for message in history]
    before = total = fixed_chars + sum(sizes)
    if total <= limit:
        return None
    bodies = 0
    latest = _last_round_start(history)  # the current turn's latest round keeps its results
    for index in range(latest if latest >= keep_from else len(history)):
        if total <= limit:
            break
        message = history[index]
        if _role(message) != "tool":
            continue
        content = cast(Mapping[str, object], message).get("content")
        if not isinstance(content, str) or content.startswith("[older tool output removed"):
            continue
        note = texts.dropped_for_budget(len(content))
        if len(note) >= len(content):
            continue
        cast(dict[str, object], message)["content"] = note
        new_size = message_chars(message)
        total -= sizes[index] - new_size
        sizes[index] = new_size
        bodies += 1
    dropped = 0
    while total > limit:
        start = next(
            (i for i in range(keep_from) if _role(history[i]) not in ("system", "developer")), None
        )
        if start is None:
            break
        end = next(
            (i for i in range(start + 1, keep_from) if _role(history[i]) == "user"), keep_from
        )
        total -= sum(sizes[start:end])
        del history[start:end], sizes[start:end]
        dropped += end - start
        keep_from -= end - start
    if total > limit:
        log.warning(
            "context still over budget after compression: about %d of %d tokens",
            int(total / budget.chars_per_token),
            budget.max_tokens - budget.reserve_tokens,
        )
    return Compression(bodies, dropped, keep_from, before, total)
