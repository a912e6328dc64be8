"""A session's shared budget of model calls and tokens, as the bus keeps it.

The lead and every sub-agent of a session — in this process or in a ``baton worker`` elsewhere —
count their model calls against one set of caps, so the totals live on the bus beside the
session's other state: a check-and-count that is atomic across processes (one Lua script on
Redis), read by whoever reserves next. The engine reaches it through
:class:`baton.engine.spend.BusSpend`, which turns a :class:`SpendRefused` into the model error
the engine already handles; the bus cannot raise that error itself because it sits below the
model layer.

Tokens are known only once a reply's usage arrives, so a cap on tokens is checked before each call
against what was recorded so far: the call that crosses it still finishes (bounded by the
request's ``max_tokens``), and the next one is refused.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from baton.errors import BatonError

SpendCap = Literal["calls", "tokens"]


class SpendLimits(BaseModel):
    """The caps of one session; None means no cap."""

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    max_tokens: int | None = Field(
        None, ge=1, description="total tokens (from usage) of all agents"
    )
    max_model_calls: int | None = Field(None, ge=1, description="model requests of all agents")

    @property
    def unlimited(self) -> bool:
        return self.max_tokens is None and self.max_model_calls is None


class SpendTotals(BaseModel):
    """What the session spent so far, and its caps."""

    model_config = ConfigDict(defer_build=True, frozen=True)

    calls: int = 0
    tokens: int = 0
    limits: SpendLimits = Field(default_factory=SpendLimits)

    def spent(self) -> SpendCap | None:
        """The cap these totals reached (calls first), or None while another call may be made."""
        limits = self.limits
        if limits.max_model_calls is not None and self.calls >= limits.max_model_calls:
            return "calls"
        if limits.max_tokens is not None and self.tokens >= limits.max_tokens:
            return "tokens"
        return None


class SpendRefused(BatonError):
    """A model call was refused because the session's budget is spent; nothing was counted.

    ``totals`` are the session's spend at the refusal, ``cap`` the limit it reached.
    """

    def __init__(self, session: str, totals: SpendTotals, cap: SpendCap) -> None:
        limits = totals.limits
        if cap == "calls":
            what = f"{totals.calls} of {limits.max_model_calls} model calls"
        else:
            what = f"{totals.tokens} of {limits.max_tokens} tokens"
        super().__init__(
            f"the budget of session {session} is spent ({what}); "
            "raise the session's budget to let its agents call the model again"
        )
        self.session = session
        self.totals = totals
        self.cap = cap
