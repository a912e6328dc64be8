"""The session-wide budget of model calls and tokens, as the engine sees it.

A recursive delegation loop can burn a great many tokens before any per-agent limit notices, so a
session may cap the model calls and tokens of *all* its agents together — the lead and every
sub-agent, wherever they run. The engine asks :meth:`Spend.reserve` before each model call (a
refusal is :class:`~baton.llm.errors.BudgetExhausted`, raised before the request is made) and tells
:meth:`Spend.record` the usage after it. Implementations keep the totals where every process of the
session sees them: :class:`BusSpend` keeps them on the bus.

``SpendLimits`` and ``SpendTotals`` are defined with the bus's budget store
(:mod:`baton.bus.spend`), which sits below this layer, and are the same classes here.
"""

from __future__ import annotations

from typing import Protocol

from baton.bus.base import Bus
from baton.bus.retry import persist
from baton.bus.spend import SpendLimits, SpendRefused, SpendTotals
from baton.llm.errors import BudgetExhausted
from baton.llm.types import Usage

__all__ = ["BusSpend", "Spend", "SpendLimits", "SpendTotals"]


class Spend(Protocol):
    """One session's shared budget."""

    async def reserve(self, agent: str) -> SpendTotals:
        """Count one model call of ``agent``; raises ``BudgetExhausted`` (counting nothing) when
        the calls or tokens are spent."""
        ...

    async def record(self, agent: str, usage: Usage | None) -> SpendTotals:
        """Add a finished call's tokens (``usage.total_tokens``; nothing when None)."""
        ...


class BusSpend:
    """A session's budget kept on its bus, shared by every agent of the session in any process.

    Bus calls ride out a bus blip like the agents' other bus calls (:func:`persist`): a budget
    that failed a model call because Redis restarted would turn an outage into a failed session.
    Cancellation still ends the wait at once.
    """

    __slots__ = ("bus", "session")

    def __init__(self, bus: Bus, session: str) -> None:
        self.bus = bus
        self.session = session

    async def reserve(self, agent: str) -> SpendTotals:
        try:
            return await persist(
                lambda: self.bus.budget.reserve(self.session), f"reserve a model call for {agent}"
            )
        except SpendRefused as exc:
            raise BudgetExhausted(str(exc)) from exc

    async def record(self, agent: str, usage: Usage | None) -> SpendTotals:
        tokens = usage.total_tokens if usage is not None else 0
        return await persist(
            lambda: self.bus.budget.record(self.session, tokens), f"record the spend of {agent}"
        )
