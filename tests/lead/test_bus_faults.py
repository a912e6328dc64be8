"""A lead rides out a bus blip as its sub-agents do: Redis dies while the lead is about to read
its inbox, comes back, and the session finishes as if nothing happened."""

from __future__ import annotations

import anyio

from baton.bus.events import AgentSpawned, Event
from baton.bus.messages import Envelope
from baton.bus.payloads import ResultReport
from baton.bus.redis import RedisBus
from baton.lead.agent import Lead, LeadOutcome
from baton.llm.script import Reply
from baton.testing import RedisServer
from tests.support.models import call, scripted
from tests.support.outages import redis_outage, retry_logged

SESSION = "s-blip"


async def test_lead_rides_out_a_redis_restart_while_waiting_for_results(
    redis_server: RedisServer,
) -> None:
    _, model = scripted(
        [
            call("send_message", to="painter", content="paint a heron", type="task"),
            Reply(text="The painter is on it."),
            Reply(text="Here is the heron."),
        ],
        fallback=False,
    )

    async with RedisBus(redis_server.url, prefix="lead-blip") as bus:
        # As after the lead's first wait, its inbox is watched: the read after the kill goes
        # straight to Redis (a first read would wait up to 30 s for its SUBSCRIBE to be confirmed).
        assert await bus.read_inbox(SESSION, "lead") == []
        # No Redis from the spawn on: the lead's next bus call is its inbox read.
        with redis_outage(redis_server) as outage, retry_logged("read lead") as read_failed:

            async def on_event(event: Event) -> None:
                if isinstance(event, AgentSpawned):
                    outage.begin()

            lead = Lead(
                bus, model, session=SESSION, profiles={"painter": "Paints."}, events=on_event
            )
            outcomes: list[LeadOutcome] = []

            async def run() -> None:
                outcomes.append(await lead.run("paint a heron"))

            async with anyio.create_task_group() as group:
                group.start_soon(run)
                with anyio.fail_after(30):
                    await read_failed.wait()  # past the bus's own retries: before, the lead failed
                outage.end()
                result = Envelope(
                    session=SESSION,
                    sender="painter",
                    recipient="lead",
                    type="result",
                    content="a heron, painted",
                    meta=ResultReport(reason="finished", steps=1).to_meta(),
                )
                await bus.send(result)
    [outcome] = outcomes
    assert (outcome.status, outcome.answer) == ("completed", "Here is the heron.")
    assert lead.roster.agents["painter"].state == "done"
    assert any("a heron, painted" in str(m.get("content")) for m in lead.history)
