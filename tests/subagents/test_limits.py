"""A sub-agent's rounds ask for its profile's tool choice, end at the turn's hard limit as
``round_limit`` (not ``max_steps``), and stop as ``budget`` once the session's shared budget is
spent — a budget the agent finds on the bus itself, as a remote worker's agent must."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from baton.bus.events import BudgetUpdated
from baton.engine import LoopLimits
from baton.engine.spend import SpendLimits
from tests.conftest import BusFactory
from tests.subagents.helpers import SESSION, profile, seated, task
from tests.subagents.test_loop import assert_one_final, exit_events, image
from tests.support.models import scripted


async def budget_events(bus: object) -> list[BudgetUpdated]:
    found: list[BudgetUpdated] = []
    async for logged in bus.log.tail(SESSION, follow=False):  # type: ignore[attr-defined]
        if isinstance(logged.event, BudgetUpdated):
            found.append(logged.event)
    return found


async def test_every_request_asks_for_the_profiles_tool_choice(
    make_bus: BusFactory, tmp_path: Path
) -> None:
    for choice in ("required", "auto", None):
        server, model = scripted()
        chosen = dataclasses.replace(profile("generate_image"), tool_choice=choice)
        async with make_bus() as bus, model:
            await bus.inboxes.send(task("painter", "a red fox"))
            agent = seated(bus, chosen, model, "painter", tmp_path)
            assert await agent.run() == "finished"
        assert len(server.requests) >= 2
        assert [r.body.get("tool_choice") for r in server.requests] == [choice] * len(
            server.requests
        )


async def test_the_hard_limit_of_tool_rounds_is_round_limit(
    make_bus: BusFactory, tmp_path: Path
) -> None:
    endless = [image(f"picture {n}", f"c{n}") for n in range(8)]
    _, model = scripted(endless, fallback=False)
    limits = LoopLimits(soft_max_rounds=1, hard_max_rounds=2)
    async with make_bus() as bus, model:
        await bus.inboxes.send(task("painter", "paint and paint"))
        agent = seated(bus, profile("generate_image", loop=limits), model, "painter", tmp_path)
        assert await agent.run() == "round_limit"
        # round 1 paints; round 2, past the soft limit, is asked to wrap up; round 3 is too many
        content = await assert_one_final(bus, "painter", "round_limit", media=1)
        assert "hard limit of tool rounds" in content and "step limit" not in content


async def test_the_sessions_budget_on_the_bus_stops_the_agent_before_the_next_call(
    make_bus: BusFactory, tmp_path: Path
) -> None:
    server, model = scripted()  # offline: generate_image, then send_message(result)
    async with make_bus() as bus, model:
        await bus.budget.set_limits(SESSION, SpendLimits(max_model_calls=1))
        await bus.inboxes.send(task("painter", "a red fox"))
        agent = seated(bus, profile("generate_image"), model, "painter", tmp_path)
        assert await agent.run() == "budget"
        content = await assert_one_final(bus, "painter", "budget", media=1)
        assert "budget of model calls or tokens is spent" in content
        assert len(server.requests) == 1  # the second call was refused before it was made
        spent = await bus.budget.totals(SESSION)
        assert spent.calls == 1 and spent.tokens > 0
        assert [(e.calls, e.max_calls) for e in await budget_events(bus)] == [(1, 1)]


async def test_without_caps_nothing_is_counted(make_bus: BusFactory, tmp_path: Path) -> None:
    _, model = scripted()
    async with make_bus() as bus, model:
        await bus.inboxes.send(task("painter", "a red fox"))
        agent = seated(bus, profile("generate_image"), model, "painter", tmp_path)
        assert await agent.run() == "finished"
        assert agent.spend is None
        assert (await bus.budget.totals(SESSION)).calls == 0
        assert await budget_events(bus) == []
        _, exits = await exit_events(bus, "painter")
        assert [e.reason for e in exits] == ["finished"]
