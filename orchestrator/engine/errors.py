"""Errors of the agent loop engine, under the one root ``baton.bus.errors.BatonError``.

They carry the values involved (tool name, timeout, call ids) so a caller can act on them without
parsing messages. Most never escape the engine: governance turns them into answers to the model
(fail closed) and records them in events; they are raised where a caller misuses the API.
"""

from __future__ import annotations

from baton.errors import BatonError


class EngineError(BatonError):
    """Root of the engine's own errors."""


class ToolDefinitionError(EngineError):
    """A Python function cannot be turned into a tool (e.g. a parameter without a type hint)."""

    def __init__(self, tool_name: str, reason: str) -> None:
        super().__init__(f"cannot register tool {tool_name!r}: {reason}")
        self.tool_name = tool_name
        self.reason = reason


class ToolTimeout(EngineError):
    """A tool ran past its own timeout and was stopped; the model is told so."""

    def __init__(self, tool_name: str, timeout_s: float) -> None:
        super().__init__(
            f"tool {tool_name!r} did not finish within {timeout_s:g} s and was stopped; "
            "raise its timeout or make it faster"
        )
        self.tool_name = tool_name
        self.timeout_s = timeout_s


class InteractionError(EngineError):
    """A question to a human (approval, upload, image) got no usable answer."""


class InteractionTimeout(InteractionError):
    """Nobody answered a question to a human in time; the engine fails closed."""

    def __init__(self, kind: str, call_ids: tuple[str, ...], timeout_s: float) -> None:
        super().__init__(
            f"no answer to the {kind} question for call(s) {', '.join(call_ids)} "
            f"within {timeout_s:g} s; treated as declined"
        )
        self.kind = kind
        self.call_ids = call_ids
        self.timeout_s = timeout_s


class ApprovalTimeout(InteractionTimeout):
    """No approval decision arrived in time; the gated calls are declined (fail closed)."""

    def __init__(self, call_ids: tuple[str, ...], timeout_s: float) -> None:
        super().__init__("approval", call_ids, timeout_s)


class InteractionCancelled(InteractionError):
    """A pending question was released by ``cancel_pending()`` (turn cancelled, stream gone)."""

    def __init__(self, question_id: str) -> None:
        super().__init__(f"question {question_id} was cancelled before it was answered")
        self.question_id = question_id


class InteractionUnavailable(InteractionError):
    """No human can be asked: no channel is configured, it is closed, or nobody listens."""


class TurnInProgress(EngineError):
    """``run_turn`` was called while the same loop was already running a turn."""
