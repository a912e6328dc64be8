"""The session-wide budget of model calls and tokens, as the engine sees it.

A recursive delegation loop can burn a great many tokens before any per-agent limit notices, so a
session may cap the model calls and tokens of *all* its agents together — the lead and every
sub-agent, wherever they run. The engine asks :meth:`Spend.reserve` before each model call (a
refusal is :class:`~baton.errors.BudgetExhausted`, raised before the request is made) and tells
:meth:`Spend.record` the usage after it. Implementations keep the totals where every process of the
session sees them (the bus).
"""

from __future__ import annotations

from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field

from baton.llm.types import Usage


class SpendLimits(BaseModel):
    """The caps of one session; None means no cap."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_tokens: int | None = Field(
        None, ge=1, description="total tokens (from usage) of all agents"
    )
    max_model_calls: int | None = Field(None, ge=1, description="model requests of all agents")

    @property
    def unlimited(self) -> bool:
        return self.max_tokens is None and self.max_model_calls is None


class SpendTotals(BaseModel):
    """What the session spent so far, and its caps."""

    model_config = ConfigDict(frozen=True)

    calls: int = 0
    tokens: int = 0
    limits: SpendLimits = Field(default_factory=SpendLimits)


class Spend(Protocol):
    """One session's shared budget."""

    async def reserve(self, agent: str) -> SpendTotals:
        """Count one model call of ``agent``; raises ``BudgetExhausted`` (counting nothing) when
        the calls or tokens are spent."""
        ...

    async def record(self, agent: str, usage: Usage | None) -> SpendTotals:
        """Add a finished call's tokens (``usage.total_tokens``; nothing when None)."""
        ...
