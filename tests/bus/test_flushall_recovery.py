"""A Redis that comes back empty (``FLUSHALL``, or a restart without persistence) stops nothing.

As reported, a ``baton worker`` then exited 1 with a 130-line ExceptionGroup ending in ``NOGROUP
No such key 'baton:spawn'``: inboxes made their group again, the spawn queue did not. Now every
stream baton reads through a group comes back by itself, and the loss is logged once, as one line.
"""

from __future__ import annotations

import logging
import signal
from pathlib import Path

import pytest
from redis.asyncio import Redis

from baton.bus.base import BusOptions, SpawnQueue
from baton.bus.messages import DEFAULT_POOL, LOCAL_POOL, SpawnRequest, make_envelope
from baton.bus.redis import RedisBus
from baton.llm.offline import offline_reply
from baton.testing import RedisServer
from tests.subagents.helpers import SESSION, Lead, task
from tests.subagents.test_processes import cluster

LOSS = "came back without baton's data"


def loss_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if LOSS in r.getMessage()]


async def test_every_stream_comes_back_and_the_loss_is_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING)
    pool = SpawnQueue.of_pool(DEFAULT_POOL, ["painter"])
    own = SpawnQueue.of_session("s1")
    with RedisServer() as server:
        async with RedisBus(server.url, BusOptions(lease_s=60)) as bus:
            await bus.spawns.submit(SpawnRequest(session="s1", agent="a1", profile="painter"))
            held = await bus.claims.claim(pool, timeout=5)  # an agent running at the flush
            assert held is not None
            assert await bus.claims.claim(own, timeout=0) is None
            hello = make_envelope(session="s1", sender="lead", recipient="a1", type="task")
            await bus.inboxes.send(hello)
            assert await bus.inboxes.read("s1", "a1") == [hello]
            await bus.inboxes.ack("s1", "a1", [hello.id])
            assert loss_lines(caplog) == []  # making the groups the first time is no loss

            async with Redis.from_url(server.url) as admin:
                await admin.flushall()

            # The request went with its group: its agent stops, nobody else can take it over.
            assert await bus.claims.renew([held.receipt]) == []
            await bus.claims.release([held.receipt])  # nothing left to hand back; no error
            await bus.claims.ack([held.receipt])
            # New work flows again, on every kind of stream.
            await bus.spawns.submit(SpawnRequest(session="s1", agent="a2", profile="painter"))
            await bus.spawns.submit(
                SpawnRequest(session="s1", agent="a3", profile="painter", pool=LOCAL_POOL)
            )
            claim = await bus.claims.claim(pool, timeout=5)
            assert claim is not None and claim.request.agent == "a2"
            claim = await bus.claims.claim(own, timeout=5)
            assert claim is not None and claim.request.agent == "a3"
            again = make_envelope(session="s1", sender="lead", recipient="a1", type="task")
            await bus.inboxes.send(again)
            assert await bus.inboxes.read("s1", "a1") == [again]

    [line] = loss_lines(caplog)  # one line for the whole loss, however many streams found it
    assert "FLUSHALL" in line
    assert not [r for r in caplog.records if r.exc_info is not None]


@pytest.mark.process
async def test_a_worker_process_survives_flushall_and_serves_the_next_spawn(
    tmp_path: Path,
) -> None:
    """``SCRIPT FLUSH`` too, as a restart without persistence also forgets the Lua scripts."""
    with RedisServer() as server:
        async with cluster(server, tmp_path, offline_reply) as c:
            worker = await c.start_worker()
            lead = Lead(c.bus)
            await c.bus.inboxes.send(task("a1", "paint a heron"))
            await c.bus.spawns.submit(SpawnRequest(session=SESSION, agent="a1", profile="crash"))
            await lead.until_results(1, timeout=60)

            async with Redis.from_url(server.url) as admin:
                await admin.flushall()
                await admin.script_flush()
            await c.bus.inboxes.send(task("a2", "paint a pike"))
            await c.bus.spawns.submit(SpawnRequest(session=SESSION, agent="a2", profile="crash"))
            results = await lead.until_results(2, timeout=60)

            assert [r.sender for r in results] == ["a1", "a2"]
            assert worker.proc.poll() is None  # still running
            worker.proc.send_signal(signal.SIGTERM)
            await worker.expect(" stopped ")
            assert await worker.exit_code() == 0
            log = "".join(worker.log)
            assert log.count(LOSS) == 1, log
            assert "Traceback" not in log and "NOGROUP" not in log
