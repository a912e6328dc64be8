"""Why a turn ended: its own module so the loop and its steps share it without a cycle."""

from __future__ import annotations

from enum import StrEnum


class StopReason(StrEnum):
    """Why a turn ended."""

    ANSWERED = "answered"
    """The model answered without asking for tools."""
    TERMINAL = "terminal"
    """A terminal tool ran (e.g. a sub-agent sent its result)."""
    HARD_STOP = "hard_stop"
    """The hard round limit was passed."""
    CANCELLED = "cancelled"
    """``cancel()`` was called (or the turn was marked cancelled)."""
    ERROR = "error"
    """The model failed after its retries; see ``TurnResult.error``."""
    TRUNCATED = "truncated"
    """The output was cut (``finish_reason == "length"`` or a runaway repetition) and the
    wrap-up request was cut too; ``text`` is what came."""
    BLOCKED = "blocked"
    """Two rounds in a row in which a guard blocked every call."""
    NEWS = "news"
    """A tool ended the turn after its round (``ToolResult(ends_turn=True)``): news the model
    has not seen is waiting, and its next step should be decided with it in view."""
    BUDGET = "budget"
    """The session's budget of model calls or tokens is spent (checked before each call)."""
