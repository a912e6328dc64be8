"""Per-turn governance state and the verdict each round starts with.

One :class:`AgentTurn` lives for one user message (or one inbox batch of a sub-agent) and is shared
by every round of that turn: it counts rounds, counts repeated calls, remembers which tools were
declined, holds the round's budget of human interactions, and carries the cancelled flag. Keeping
this memory on the turn object — not in globals or on the interceptors — is what lets many agents
run in one process and lets ``cancel()`` arrive from any task.
"""

from __future__ import annotations

import json
import string
import threading
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

import anyio

IDLE_MARGIN_S = 5.0
"""How far below the stream idle timeout every human wait is clamped."""


class Verdict(StrEnum):
    """What the turn allows at the start of a tool round (reference table, DESIGN §3)."""

    CONTINUE = "continue"
    """Normal: the round goes through the interceptor chain."""
    WRAP_UP = "wrap-up"
    """Past the soft limit: every call is answered "the budget is spent, answer now" (or "send
    your result now" to an agent with a terminal tool) and does not run — except a terminal call,
    which runs and ends the turn."""
    HARD_STOP = "hard-stop"
    """Past the hard limit: the same, and the loop ends after this round."""
    CANCELLED = "cancelled"
    """The turn was cancelled: nothing runs and the loop ends."""


@dataclass(frozen=True, slots=True)
class LoopLimits:
    """The tunables of governance. Defaults follow DESIGN §3.

    Human waits are clamped to ``stream_idle_timeout_s - 5 s`` so a person thinking never makes the
    user's stream look dead.
    """

    soft_max_rounds: int = 16
    hard_max_rounds: int = 18
    max_repeats: int = 3
    """A call (name + normalised arguments, see :func:`fingerprint`) runs at most this many times
    per turn; so do calls with the same ``repeat_key`` of their tool."""
    interactions_per_round: int = 1
    """Human dialogs (an approval batch, an upload, an image pick) one round may open."""
    approval_timeout_s: float = 120.0
    upload_timeout_s: float = 180.0
    image_timeout_s: float = 180.0
    stream_idle_timeout_s: float = 300.0
    tool_timeout_s: float | None = 120.0
    """Default per-tool timeout; a tool's own ``timeout_s`` wins. None: no limit."""
    max_result_chars: int = 16_000
    """Default cut-off of a tool result; a tool's own ``max_result_chars`` wins."""

    def __post_init__(self) -> None:
        if not 0 <= self.soft_max_rounds <= self.hard_max_rounds:
            raise ValueError(
                f"need 0 <= soft_max_rounds ({self.soft_max_rounds}) <= hard_max_rounds "
                f"({self.hard_max_rounds})"
            )
        if self.max_repeats < 1 or self.interactions_per_round < 0 or self.max_result_chars < 1:
            raise ValueError("max_repeats and max_result_chars must be >= 1 and budgets >= 0")
        if self.stream_idle_timeout_s <= IDLE_MARGIN_S:
            raise ValueError(f"stream_idle_timeout_s must exceed {IDLE_MARGIN_S} s")

    def _clamp(self, wait_s: float) -> float:
        return min(wait_s, self.stream_idle_timeout_s - IDLE_MARGIN_S)

    @property
    def approval_wait_s(self) -> float:
        return self._clamp(self.approval_timeout_s)

    @property
    def upload_wait_s(self) -> float:
        return self._clamp(self.upload_timeout_s)

    @property
    def image_wait_s(self) -> float:
        return self._clamp(self.image_timeout_s)


_EDGE_PUNCTUATION = (
    string.punctuation + string.whitespace + "\u201c\u201d\u2018\u2019\u2026\u00bf\u00a1"
)


def normalise_text(text: str) -> str:
    """A string as the repeat guard compares it: casefolded, whitespace collapsed, surrounding
    punctuation stripped — "Paint a fox." and "paint  a fox" are the same request."""
    return " ".join(text.casefold().split()).strip(_EDGE_PUNCTUATION)


def _normalised(value: object) -> object:
    if isinstance(value, str):
        return normalise_text(value)
    if isinstance(value, dict):
        return {key: _normalised(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_normalised(item) for item in value]
    return value


def fingerprint(name: str, arguments: str) -> str:
    """Identity of a call for repeat detection: tool name + canonical JSON of its arguments.

    Key order, whitespace, letter case and punctuation around string values do not make two calls
    different (a small model retrying "Paint a fox." as "paint a fox" is repeating itself);
    unparseable arguments are compared as normalised text.
    """
    if arguments in ("", "{}"):
        return f"{name}\x00{{}}"
    try:
        canonical = json.dumps(
            _normalised(json.loads(arguments)),
            sort_keys=True,
            separators=(",", ":"),
            ensure_ascii=False,
        )
    except ValueError:
        canonical = normalise_text(arguments)
    return f"{name}\x00{canonical}"


def repeat_fingerprint(name: str, key: str) -> str:
    """Identity of a call by its tool's ``repeat_key`` (kept apart from argument fingerprints)."""
    return f"{name}\x01{normalise_text(key)}"


class AgentTurn:
    """The state one turn's rounds share. Safe to use from several tasks and threads.

    ``cancel()`` may be called from any task of the event loop that runs the turn: it sets the flag
    (so the next verdict is ``CANCELLED``), cancels the turn's scope (so the loop stops at its next
    checkpoint, mid-model-call, mid-tool or mid-dialog) and runs the ``on_cancel`` hook (the loop
    uses it to release every pending human wait).
    """

    __slots__ = (
        "_calls",
        "_cancelled",
        "_declined",
        "_interactions_left",
        "_lock",
        "_on_cancel",
        "_scope",
        "limits",
        "rounds",
    )

    def __init__(
        self, limits: LoopLimits | None = None, *, on_cancel: Callable[[], None] | None = None
    ) -> None:
        self.limits = limits or LoopLimits()
        self.rounds = 0
        self._scope: anyio.CancelScope | None = None
        self._calls: dict[str, int] = {}
        self._declined: set[str] = set()
        self._interactions_left = self.limits.interactions_per_round
        self._cancelled = False
        self._on_cancel = on_cancel
        self._lock = threading.Lock()

    # -- verdict --------------------------------------------------------------------------------

    def begin_round(self) -> Verdict:
        """Count a new tool round, refill its interaction budget, and say what it may do."""
        with self._lock:
            self.rounds += 1
            self._interactions_left = self.limits.interactions_per_round
            return self.verdict

    @property
    def verdict(self) -> Verdict:
        """The verdict for the current round count (``CANCELLED`` wins over the limits)."""
        if self._cancelled:
            return Verdict.CANCELLED
        if self.rounds > self.limits.hard_max_rounds:
            return Verdict.HARD_STOP
        if self.rounds > self.limits.soft_max_rounds:
            return Verdict.WRAP_UP
        return Verdict.CONTINUE

    # -- repeats and declines -------------------------------------------------------------------

    def count_call(self, key: str) -> int:
        """Record one more call with this fingerprint; returns how many there have been."""
        with self._lock:
            count = self._calls.get(key, 0) + 1
            self._calls[key] = count
            return count

    def decline(self, tool: str) -> None:
        """Remember that ``tool`` was declined: re-requests this turn are declined unasked."""
        with self._lock:
            self._declined.add(tool)

    def is_declined(self, tool: str) -> bool:
        return tool in self._declined

    @property
    def declined(self) -> frozenset[str]:
        return frozenset(self._declined)

    # -- human interaction budget ---------------------------------------------------------------

    def take_interaction(self) -> bool:
        """Use one of this round's human dialogs; False when the budget is spent."""
        with self._lock:
            if self._interactions_left <= 0:
                return False
            self._interactions_left -= 1
            return True

    # -- cancellation ---------------------------------------------------------------------------

    @property
    def scope(self) -> anyio.CancelScope:
        """The cancel scope the loop runs the turn in (made on first use, inside the event loop;
        already cancelled when ``cancel()`` came first)."""
        if self._scope is None:
            self._scope = anyio.CancelScope()
            if self._cancelled:
                self._scope.cancel()
        return self._scope

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    def cancel(self) -> None:
        """Stop the turn promptly; idempotent. See the class docstring."""
        with self._lock:
            first = not self._cancelled
            self._cancelled = True
        if self._scope is not None:
            self._scope.cancel()
        if first and self._on_cancel is not None:
            self._on_cancel()
