"""The session's budget: one count of model calls and tokens across all its agents and processes.

The models (:class:`~baton.bus.spend.SpendLimits`, :class:`~baton.bus.spend.SpendTotals`) and
the refusal (:class:`~baton.bus.spend.SpendRefused`) are in :mod:`baton.bus.spend`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from baton.bus.spend import SpendLimits, SpendTotals


class Budget(ABC):
    """Caps and totals per session, checked and counted in one atomic step.

    Every method may raise ``BusUnreachable`` when the backend cannot be reached after its
    retries, and ``BusClosed`` after the bus was closed.
    """

    @abstractmethod
    async def set_limits(self, session: str, limits: SpendLimits) -> None:
        """Set (replace) the session's caps; what was spent so far is kept."""

    @abstractmethod
    async def reserve(self, session: str) -> SpendTotals:
        """Count one model call, atomically with the check that the budget allows it; returns
        the totals after it. Raises ``SpendRefused`` (counting nothing) once a cap is reached.

        A call retried after a lost reply may be counted twice: a budget errs on the safe side.
        """

    @abstractmethod
    async def record(self, session: str, tokens: int) -> SpendTotals:
        """Add a finished call's tokens (none when ``tokens`` ≤ 0); returns the totals after
        it."""

    @abstractmethod
    async def totals(self, session: str) -> SpendTotals:
        """The session's totals and caps (zeros and no caps for a session without any)."""
