"""The session's budget on Redis: one hash per session (``baton:{S}:spend``), changed only by
``scripts/spend.lua`` so that the check and the count of a call are one atomic step across every
process of the session."""

from __future__ import annotations

from typing import Any

from baton.bus.parts.budget import Budget
from baton.bus.redis.core import RedisCore
from baton.bus.redis.scripts import SPEND
from baton.bus.spend import SpendLimits, SpendRefused, SpendTotals


def _cap(value: Any) -> int | None:
    return int(value) if value not in ("", b"", None) else None


class RedisBudget(Budget):
    """Set, reserve, record and read one session's spend."""

    __slots__ = ("_core",)

    def __init__(self, core: RedisCore) -> None:
        self._core = core

    async def _run(self, session: str, *args: str | int) -> tuple[bool, SpendTotals]:
        reply = await self._core.one(*SPEND.call(self._core.keys.spend(session), *args))
        granted, calls, tokens, max_calls, max_tokens = reply
        limits = SpendLimits(max_model_calls=_cap(max_calls), max_tokens=_cap(max_tokens))
        return bool(int(granted)), SpendTotals(calls=int(calls), tokens=int(tokens), limits=limits)

    async def set_limits(self, session: str, limits: SpendLimits) -> None:
        calls = "" if limits.max_model_calls is None else limits.max_model_calls
        tokens = "" if limits.max_tokens is None else limits.max_tokens
        await self._run(session, "limits", calls, tokens)

    async def reserve(self, session: str) -> SpendTotals:
        granted, totals = await self._run(session, "reserve")
        if not granted:
            raise SpendRefused(session, totals, totals.spent() or "calls")
        return totals

    async def record(self, session: str, tokens: int) -> SpendTotals:
        return (await self._run(session, "record", max(tokens, 0)))[1]

    async def totals(self, session: str) -> SpendTotals:
        return (await self._run(session, "read"))[1]
