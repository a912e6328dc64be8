"""The session's budget in process: no await between a check and its update, so atomic."""

from __future__ import annotations

from baton.bus.memory.core import MemoryCore
from baton.bus.parts.budget import Budget
from baton.bus.spend import SpendLimits, SpendRefused, SpendTotals


class MemoryBudget(Budget):
    """Totals per session on the broker."""

    def __init__(self, core: MemoryCore) -> None:
        self._core = core
        self._spend = core.broker.spend

    async def set_limits(self, session: str, limits: SpendLimits) -> None:
        self._core.check_open()
        totals = self._spend.get(session, SpendTotals())
        self._spend[session] = totals.model_copy(update={"limits": limits})

    async def reserve(self, session: str) -> SpendTotals:
        self._core.check_open()
        totals = self._spend.get(session, SpendTotals())
        cap = totals.spent()
        if cap is not None:
            raise SpendRefused(session, totals, cap)
        totals = self._spend[session] = totals.model_copy(update={"calls": totals.calls + 1})
        return totals

    async def record(self, session: str, tokens: int) -> SpendTotals:
        self._core.check_open()
        totals = self._spend.get(session, SpendTotals())
        if tokens > 0:
            update = {"tokens": totals.tokens + tokens}
            totals = self._spend[session] = totals.model_copy(update=update)
        return totals

    async def totals(self, session: str) -> SpendTotals:
        self._core.check_open()
        return self._spend.get(session, SpendTotals())
