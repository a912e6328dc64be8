"""The session's budget on the bus: both backends, real Redis, and the engine's view of it."""

from __future__ import annotations

import anyio
import pytest

from baton.bus.redis import RedisBus
from baton.bus.spend import SpendLimits, SpendRefused, SpendTotals
from baton.engine.spend import BusSpend
from baton.llm.errors import BudgetExhausted
from baton.llm.types import Usage
from baton.testing import RedisServer
from tests.conftest import BusFactory
from tests.support.outages import redis_outage, retry_logged

S = "s-spend"


async def test_a_session_without_a_budget_spends_from_zero(make_bus: BusFactory) -> None:
    async with make_bus() as bus:
        assert await bus.budget.totals(S) == SpendTotals()
        assert (await bus.budget.reserve(S)).calls == 1  # counted even without caps: views show it
        totals = await bus.budget.record(S, 120)
        assert (totals.calls, totals.tokens, totals.limits.unlimited) == (1, 120, True)


async def test_the_call_cap_refuses_before_the_call_and_counts_nothing(
    make_bus: BusFactory,
) -> None:
    async with make_bus() as bus:
        await bus.budget.set_limits(S, SpendLimits(max_model_calls=2))
        assert [(await bus.budget.reserve(S)).calls for _ in range(2)] == [1, 2]
        with pytest.raises(SpendRefused) as refused:
            await bus.budget.reserve(S)
        assert refused.value.cap == "calls"
        assert refused.value.totals.calls == 2
        assert "2 of 2 model calls" in str(refused.value)
        assert (await bus.budget.totals(S)).calls == 2


async def test_the_token_cap_refuses_the_call_after_the_one_that_crossed_it(
    make_bus: BusFactory,
) -> None:
    async with make_bus() as bus:
        await bus.budget.set_limits(S, SpendLimits(max_tokens=100))
        await bus.budget.reserve(S)
        await bus.budget.record(S, 60)
        await bus.budget.reserve(S)  # 60 of 100: allowed
        assert (await bus.budget.record(S, 70)).tokens == 130
        with pytest.raises(SpendRefused) as refused:
            await bus.budget.reserve(S)
        assert refused.value.cap == "tokens"
        assert "130 of 100 tokens" in str(refused.value)
        assert await bus.budget.totals(S) == SpendTotals(
            calls=2, tokens=130, limits=SpendLimits(max_tokens=100)
        )


async def test_new_limits_keep_what_was_spent(make_bus: BusFactory) -> None:
    async with make_bus() as bus:
        await bus.budget.set_limits(S, SpendLimits(max_model_calls=1, max_tokens=50))
        await bus.budget.reserve(S)
        await bus.budget.record(S, 10)
        await bus.budget.set_limits(S, SpendLimits(max_model_calls=3))  # tokens no longer capped
        totals = await bus.budget.reserve(S)
        assert totals == SpendTotals(calls=2, tokens=10, limits=SpendLimits(max_model_calls=3))
        await bus.budget.set_limits(S, SpendLimits())
        assert (await bus.budget.totals(S)).limits.unlimited


async def test_sessions_have_separate_budgets(make_bus: BusFactory) -> None:
    async with make_bus() as bus:
        await bus.budget.set_limits("a", SpendLimits(max_model_calls=1))
        await bus.budget.reserve("a")
        with pytest.raises(SpendRefused):
            await bus.budget.reserve("a")
        assert (await bus.budget.reserve("b")).calls == 1


async def test_agents_in_many_processes_never_pass_the_cap_together(
    make_bus: BusFactory,
) -> None:
    """Four buses (four 'processes') race 60 reservations against a cap of 25: exactly 25 pass."""
    async with make_bus() as first, make_bus() as second, make_bus() as third, make_bus() as fourth:
        buses = [first, second, third, fourth]
        await first.budget.set_limits(S, SpendLimits(max_model_calls=25))
        granted: list[int] = []
        refused = 0

        async def reserve(index: int) -> None:
            nonlocal refused
            try:
                granted.append((await buses[index % 4].budget.reserve(S)).calls)
            except SpendRefused:
                refused += 1

        async with anyio.create_task_group() as group:
            for i in range(60):
                group.start_soon(reserve, i)
        assert sorted(granted) == list(range(1, 26))  # each count handed out once
        assert refused == 35
        assert (await fourth.budget.totals(S)).calls == 25


async def test_the_redis_budget_is_one_hash_under_the_sessions_hash_tag(
    redis_server: RedisServer,
) -> None:
    """docs/bus.md names the key; what is in it is what the docs say."""
    async with RedisBus(redis_server.url, prefix="spend-key") as bus:
        await bus.budget.set_limits(S, SpendLimits(max_model_calls=5))
        await bus.budget.reserve(S)
        await bus.budget.record(S, 42)
        key = bus.keys.spend(S)
        assert key == "spend-key:{s-spend}:spend"
        stored = await bus._core.one("HGETALL", key)
        assert dict(zip(stored[::2], stored[1::2], strict=True)) == {
            "calls": "1",
            "tokens": "42",
            "max_calls": "5",
        }


async def test_bus_spend_refuses_with_the_models_budget_error(make_bus: BusFactory) -> None:
    async with make_bus() as bus:
        await bus.budget.set_limits(S, SpendLimits(max_model_calls=1))
        spend = BusSpend(bus, S)
        assert (await spend.reserve("lead")).calls == 1
        usage = Usage(prompt_tokens=30, completion_tokens=12, total_tokens=42)
        assert (await spend.record("lead", usage)).tokens == 42
        assert (await spend.record("lead", None)).tokens == 42  # no usage: nothing added
        with pytest.raises(BudgetExhausted) as exhausted:
            await spend.reserve("painter")
        assert not exhausted.value.retryable
        assert isinstance(exhausted.value.__cause__, SpendRefused)
        assert "1 of 1 model calls" in str(exhausted.value)


async def test_bus_spend_rides_out_a_redis_restart(redis_server: RedisServer) -> None:
    async with RedisBus(redis_server.url, prefix="spend-outage") as bus:
        await bus.budget.set_limits(S, SpendLimits(max_model_calls=10))
        spend = BusSpend(bus, S)
        await spend.reserve("painter")
        reserved: list[SpendTotals] = []

        async def reserve() -> None:
            reserved.append(await spend.reserve("painter"))

        with (
            redis_outage(redis_server) as outage,
            retry_logged("reserve a model call for painter") as failed,
        ):
            outage.begin()
            with anyio.fail_after(30):
                async with anyio.create_task_group() as group:
                    group.start_soon(reserve)
                    await failed.wait()  # the reservation failed past the bus's own retries
                    outage.end()
        assert [t.calls for t in reserved] == [2]  # what was spent before survived (AOF)
