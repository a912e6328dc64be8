"""The ``Budget`` contract (:class:`baton.bus.parts.budget.Budget`), on the memory bus and on
real Redis: one count per session across processes, checked and counted in one step."""

from __future__ import annotations

import pytest

from baton.bus.spend import SpendLimits, SpendRefused, SpendTotals
from tests.conftest import BusFactory


async def test_calls_are_counted_against_their_cap_across_processes(make_bus: BusFactory) -> None:
    async with make_bus() as one, make_bus() as two:
        assert await one.budget.totals("s1") == SpendTotals()
        await one.budget.set_limits("s1", SpendLimits(max_model_calls=2))
        assert (await one.budget.reserve("s1")).calls == 1
        assert (await two.budget.reserve("s1")).calls == 2
        with pytest.raises(SpendRefused):
            await one.budget.reserve("s1")
        totals = await two.budget.totals("s1")
        assert totals.calls == 2 and totals.limits.max_model_calls == 2  # the refusal counted none
        assert (await two.budget.reserve("s2")).calls == 1  # another session: its own count


async def test_tokens_add_up_and_new_limits_keep_them(make_bus: BusFactory) -> None:
    async with make_bus() as bus:
        assert (await bus.budget.record("s1", 120)).tokens == 120
        assert (await bus.budget.record("s1", 0)).tokens == 120  # nothing to add
        await bus.budget.set_limits("s1", SpendLimits(max_tokens=100))
        totals = await bus.budget.totals("s1")
        assert totals.tokens == 120 and totals.limits == SpendLimits(max_tokens=100)
        with pytest.raises(SpendRefused):  # the cap is already crossed: the next call is refused
            await bus.budget.reserve("s1")
