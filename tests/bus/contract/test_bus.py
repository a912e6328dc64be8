"""The bundle itself, on the memory bus and on real Redis: one lifecycle for every part, the
health checks, and the signing key's id."""

from __future__ import annotations

import json

import anyio
import pytest
from pydantic import SecretStr

from baton.bus.connect import open_bus
from baton.bus.errors import BusClosed, ConfigError
from baton.bus.messages import Envelope, SpawnRequest, make_envelope
from baton.bus.signing import SETUP_KEY_ID, key_id
from tests.conftest import BusFactory


def task(session: str, to: str, content: str) -> Envelope:
    return make_envelope(session=session, sender="lead", recipient=to, type="task", content=content)


async def test_closed_bus_refuses_and_wakes_waiters(make_bus: BusFactory) -> None:
    bus = make_bus()
    outcome: list[BaseException] = []
    async with bus:
        assert await bus.inboxes.read("s1", "a") == []

        async def waiter() -> None:
            try:
                await bus.inboxes.wait("s1", "a", timeout=60)
            except BusClosed as exc:
                outcome.append(exc)

        async with anyio.create_task_group() as tg:
            tg.start_soon(waiter)
            await anyio.wait_all_tasks_blocked()
            await bus.aclose()
    assert len(outcome) == 1  # the waiter was released at once, with a clear error
    with pytest.raises(BusClosed, match="closed"):
        await bus.inboxes.send(task("s1", "a", "too late"))


def test_open_bus_refuses_unknown_schemes() -> None:
    with pytest.raises(ConfigError, match="unknown bus URL 'kafka://x'"):
        open_bus("kafka://x")


async def test_every_part_refuses_once_the_bus_is_closed(make_bus: BusFactory) -> None:
    bus = make_bus()
    async with bus:
        pass
    closed = [
        bus.log.emit_once("s1", "a", [], mark="m"),
        bus.spawns.submit(SpawnRequest(session="s1", agent="a", profile="p")),
        bus.records.agent("s1", "a"),
        bus.budget.totals("s1"),
        bus.store.get("s1", "tokens", "x"),
        bus.ping(),
    ]
    for call in closed:
        with pytest.raises(BusClosed):
            await call


async def test_a_healthy_bus_answers_its_probes(make_bus: BusFactory) -> None:
    async with make_bus() as bus:
        await bus.ping()
        with anyio.fail_after(10):
            await bus.probe(5.0)


async def test_the_key_id_names_the_signing_key_and_a_session_refuses_another(
    make_bus: BusFactory,
) -> None:
    key = SecretStr("the deployment's key")
    async with make_bus(signing_key=key) as signing, make_bus() as plain:
        assert signing.key_id == key_id(key) and plain.key_id == ""
        setup = json.dumps({SETUP_KEY_ID: signing.key_id})
        await signing.records.hold_lead("s1", "lead", 60, {"setup": setup})
        assert await signing.key_problem("s1") is None
        problem = await plain.key_problem("s1", sender="baton post")
        assert problem is not None and "signing key mismatch" in problem and "baton post" in problem
