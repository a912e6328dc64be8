"""One byte that is not UTF-8 takes nothing down: the processes that read it, on a real Redis.

As reported, ``printf '\\377' | redis-cli -x XADD <spawn stream> '*' req`` made each ``baton
worker`` that claimed the entry exit 1 (and the next one after the lease, and the next); the same
byte failed a session from its lead's inbox, ended a sub-agent with ``error`` and left its inbox
stuck, and made ``baton watch`` and ``baton sessions`` print a traceback. Here each process meets
the byte and goes on: the worker serves the next request, the agent finishes, the session
completes, the commands print the rest of the log.
"""

from __future__ import annotations

import itertools
import json
import signal
from pathlib import Path

import anyio
import anyio.to_thread
import pytest
from redis.asyncio import Redis

from baton.bus.events import (
    AgentExited,
    AgentSpawned,
    RoundStarted,
    SessionFinished,
    SessionStarted,
)
from baton.bus.messages import SpawnRequest
from baton.bus.redis import RedisBus
from baton.bus.redis.keys import Keys
from baton.llm.offline import offline_reply
from baton.session import SessionConfig, open_session
from baton.testing import RedisServer
from tests.cli.helpers import clean_env, invoke_baton
from tests.subagents.helpers import SESSION, Lead, task
from tests.subagents.test_processes import Cluster, cluster
from tests.support.events import wait_for_event

BAD = b"\xff"
_prefixes = itertools.count()


def keys(c: Cluster) -> Keys:
    return Keys(c.args[c.args.index("--prefix") + 1])


def admin(server: RedisServer) -> Redis:
    """A client that writes and reads raw bytes, as a foreign producer would."""
    return Redis.from_url(server.url, decode_responses=False)


async def xadd_raw(url: str, key: str, field: str) -> None:
    """What ``printf '\\377' | redis-cli -u URL -x XADD KEY '*' FIELD`` of the report writes:
    one entry whose value is the byte 0xff, from a client of the test's own."""
    async with Redis.from_url(url, decode_responses=False) as client:
        await client.xadd(key, {field.encode(): BAD})


@pytest.mark.process
async def test_a_worker_survives_a_non_utf8_spawn_request_and_serves_the_next(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    async with cluster(redis_server, tmp_path, offline_reply) as c, admin(redis_server) as raw:
        worker = await c.start_worker()
        lead = Lead(c.bus)
        first = SpawnRequest(session=SESSION, agent="a1", profile="crash")
        await c.bus.inboxes.send(task("a1", "paint a heron"))
        await c.bus.spawns.submit(first)
        await lead.until_results(1, timeout=60)
        key = keys(c).spawn_stream(first)  # the stream the worker claims "crash" requests from
        await xadd_raw(redis_server.url, key, "req")

        await c.bus.inboxes.send(task("a2", "paint a pike"))
        await c.bus.spawns.submit(SpawnRequest(session=SESSION, agent="a2", profile="crash"))
        results = await lead.until_results(2, timeout=60)

        assert sorted(r.sender for r in results) == ["a1", "a2"]
        assert worker.proc.poll() is None  # still running
        [letter] = await c.bus.letters.recent()
        assert letter.reason == "not UTF-8: field 'req' has byte 0xff at character 0"
        assert letter.source == key
        # the bad entry is acked and gone, so no worker takes it over after the lease (a2's own
        # request may still be there: the worker acks it after the result the lead just read)
        left = [fields or {} for _, fields in await raw.xrange(key) or []]
        assert BAD not in [value for fields in left for value in fields.values()]
        worker.proc.send_signal(signal.SIGTERM)
        assert await worker.exit_code() == 0
        assert "Traceback" not in "".join(worker.log)


@pytest.mark.process
async def test_an_agent_whose_inbox_holds_a_non_utf8_entry_finishes_and_leaves_it_empty(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    async with cluster(redis_server, tmp_path, offline_reply) as c, admin(redis_server) as raw:
        worker = await c.start_worker()
        inbox = keys(c).inbox(SESSION, "a1")
        await xadd_raw(redis_server.url, inbox, "msg")
        await c.bus.inboxes.send(task("a1", "paint a heron"))
        await c.bus.spawns.submit(SpawnRequest(session=SESSION, agent="a1", profile="crash"))
        exited = await wait_for_event(
            c.bus, SESSION, lambda e: isinstance(e, AgentExited) and e.agent == "a1", timeout=60
        )

        assert isinstance(exited, AgentExited) and exited.reason == "finished"
        [result] = await Lead(c.bus).until_results(1)
        assert "Done: paint a heron" in result.content
        assert await raw.xlen(inbox) == 0  # nothing stuck
        assert (await raw.xpending(inbox, "agents"))["pending"] == 0
        [letter] = await c.bus.letters.recent()
        assert letter.reason == "not UTF-8: field 'msg' has byte 0xff at character 0"
        assert worker.proc.poll() is None


async def test_a_session_completes_with_non_utf8_entries_in_its_leads_inbox(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    """One entry waits in the lead's inbox before it starts, another arrives while its
    sub-agent works."""
    prefix = f"utf-lead{next(_prefixes)}"
    session_id = "s-poisoned-lead"
    config = SessionConfig(
        task="paint a fox",
        session_id=session_id,
        bus_url=redis_server.url,
        bus_prefix=prefix,
        media_dir=tmp_path / "media",
        timeout_s=60,
    )
    async with RedisBus(redis_server.url, prefix=prefix) as bus, admin(redis_server) as raw:
        inbox = bus.keys.inbox(session_id, "lead")
        await raw.xadd(inbox, {b"msg": BAD})
        outcome: list[str] = []

        async def run() -> None:
            async with open_session(config) as session:
                outcome.append((await session.run()).status)

        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            await wait_for_event(bus, session_id, AgentSpawned, timeout=60)
            await raw.xadd(inbox, {b"msg": b'{"v":1,"content":"' + BAD + b'"}'})

        assert outcome == ["completed"]
        reasons = [letter.reason for letter in await bus.letters.recent()]
        assert reasons[0] == "not UTF-8: field 'msg' has byte 0xff at character 0"
        assert len(reasons) == 2 and all(r.startswith("not UTF-8: field 'msg'") for r in reasons)
        assert await raw.xlen(inbox) == 0


def test_watch_and_sessions_skip_a_non_utf8_event_without_a_traceback(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    """The two commands in-process (:func:`~tests.cli.helpers.invoke_baton`, which reads as the
    console script would: a traceback would come back in stderr)."""
    prefix = f"utf-cli{next(_prefixes)}"
    session_id = "s-poisoned-log"

    async def poisoned_log() -> str:
        async with RedisBus(redis_server.url, prefix=prefix) as bus:
            log = bus.keys.events(session_id)
            await bus.log.emit(SessionStarted(session=session_id, agent="lead", task="paint a fox"))
            await xadd_raw(redis_server.url, log, "event")
            await bus.log.emit(RoundStarted(session=session_id, agent="lead", round=1))
            await bus.log.emit(
                SessionFinished(session=session_id, agent="lead", status="completed")
            )
        return log

    log = anyio.run(poisoned_log)
    # Diagnostics are off by default (the views are what a user reads): ask for warnings.
    env = clean_env(
        tmp_path, BATON_PREFIX=prefix, BATON_BUS=redis_server.url, BATON_LOG_LEVEL="WARNING"
    )

    code, out, err = invoke_baton("watch", session_id, "--from-start", "--json", env=env)
    assert code == 0, err
    assert [json.loads(line)["type"] for line in out.splitlines()] == [
        "session.started",
        "round.started",
        "session.finished",
    ]
    assert "Traceback" not in err
    assert "not UTF-8: field 'event' has byte 0xff" in err  # said, as a warning

    anyio.run(xadd_raw, redis_server.url, log, "event")  # again, for `sessions`
    code, out, err = invoke_baton("sessions", "--json", env=env)
    assert code == 0, err
    [row] = [json.loads(line) for line in out.splitlines()]
    assert row["task"] == "paint a fox" and row["state"] == "completed"
    assert "Traceback" not in err and "not UTF-8: field 'event'" in err
