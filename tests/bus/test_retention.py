"""How long a session's keys live on Redis (``docs/bus.md``, *Retention*): nothing of a running
session expires; once its end is logged every key of it has a TTL of at most the retention, the
inboxes nobody reads any more are emptied, and a cancelled session leaves no pending entry behind.
On a real ``redis-server``."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import anyio

from baton.bus.events import AgentExited, SessionFinished, ToolCalled
from baton.bus.redis import RedisBus
from baton.bus.redis.keys import INBOX_GROUP
from baton.session import Session, SessionConfig
from baton.subagents.loop import AgentParts
from baton.subagents.worker import Worker
from baton.testing import RedisServer
from tests.lead.helpers import gated_profile
from tests.support.events import logged_events, wait_for_event

RETENTION_S = 3600.0
_prefixes = itertools.count()


def fresh_prefix() -> str:
    return f"ret{next(_prefixes)}"


async def session_keys(bus: RedisBus, session: str) -> dict[str, tuple[str, int]]:
    """Every key of the session: its type and its TTL in ms (-1: none)."""
    core = bus._core
    found = await core.one("KEYS", f"{bus.keys.prefix}:{{{session}}}:*")
    keys: dict[str, tuple[str, int]] = {}
    for key in found:
        kind, ttl = await core.call(("TYPE", key), ("PTTL", key))
        keys[str(key)] = (str(kind), int(ttl))
    return keys


async def pending(bus: RedisBus, key: str, group: str = INBOX_GROUP) -> int | None:
    """How many entries of the stream are delivered and not acked; None: it has no group."""
    groups = await bus._core.one("XINFO", "GROUPS", key)
    for row in groups:
        info = dict(zip(row[::2], row[1::2], strict=True))
        if info["name"] == group:
            return int(info["pending"])
    return None


def config(tmp_path: Path, **fields: Any) -> SessionConfig:
    return SessionConfig(media_dir=tmp_path, retention_s=RETENTION_S, **fields)


async def test_a_running_sessions_keys_never_expire_and_a_finished_ones_do(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    gate = anyio.Event()
    settings = config(tmp_path, task="paint a fox", profiles=[gated_profile(gate)])
    async with RedisBus(redis_server.url, prefix=fresh_prefix()) as bus:
        async with Session(settings, bus=bus) as session:
            async for event in session.events():
                if isinstance(event, ToolCalled) and event.agent == "slow":  # mid-session
                    await bus.store.put(session.id, "mcp_tasks", {"digest": "{}"})  # an MCP task
                    running = await session_keys(bus, session.id)
                    assert await bus.retention.expiry(session.id) is None
                    gate.set()
            result = await session.run()
        assert result.status == "completed"
        lease = bus.keys.lead_lease(session.id)
        own_queue = bus.keys.spawn_local(session.id)
        workers_leases = bus.keys.spawn_leases(own_queue)  # its own worker's, on its own queue
        assert workers_leases in running
        leases = {lease, workers_leases}
        assert {k: ttl for k, (_, ttl) in running.items() if k not in leases and ttl != -1} == {}
        assert {bus.keys.events(session.id), bus.keys.inbox(session.id, "slow")} <= set(running)
        assert bus.keys.table(session.id, "mcp_tasks") in running

        finished = await session_keys(bus, session.id)
        dropped = {*leases, own_queue}  # given up; deleted at the end
        assert set(running) - dropped <= set(finished)  # the rest lives on, for the retention
        for key, (_, ttl) in finished.items():
            assert 0 < ttl <= RETENTION_S * 1000, (key, ttl)
        left = await bus.retention.expiry(session.id)
        assert left is not None and 0 < left <= RETENTION_S
        lead_inbox = bus.keys.inbox(session.id, "lead")
        assert await bus._core.one("XLEN", lead_inbox) == 0
        assert await pending(bus, lead_inbox) is None  # its group, pending list and all, is gone
        assert session.id in await bus.log.sessions()  # listed while its log lives


async def test_a_cancelled_session_leaves_no_entry_pending_or_unread(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    """Its agent, busy in a tool, is told to shut down and given back by the stopping worker;
    its result, the lead's inbox and the given-back shutdown used to stay until someone deleted
    them by hand."""
    gate = anyio.Event()  # never set: the agent is busy when the session is cancelled
    profiles = [gated_profile(gate)]  # the lead does not wait for its result: it arrives unread
    settings = config(tmp_path, task="paint a fox", profiles=profiles, shutdown_grace_s=0)
    async with RedisBus(redis_server.url, prefix=fresh_prefix()) as bus:
        async with Session(settings, bus=bus) as session:
            async for event in session.events():
                if isinstance(event, ToolCalled) and event.agent == "slow":
                    session.cancel()
            result = await session.run()
        assert result.status == "cancelled"
        keys = await session_keys(bus, session.id)
        streams = [key for key, (kind, _) in keys.items() if kind == "stream"]
        assert bus.keys.inbox(session.id, "lead") in streams
        for key in streams:
            if key == bus.keys.events(session.id):
                continue
            assert await bus._core.one("XLEN", key) == 0, key
            assert not await pending(bus, key), key
        assert all(0 < ttl <= RETENTION_S * 1000 for _, ttl in keys.values()), keys


async def test_what_a_pool_agent_writes_after_the_end_expires_with_the_session(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    """A pool's worker hosts the agent: it reads its shutdown after the session ended, and its
    result, its exit and its record land on keys that already have their TTL, and keep it."""
    gate = anyio.Event()
    slow = gated_profile(gate)
    prefix = fresh_prefix()
    settings = config(
        tmp_path, task="paint a fox", profiles=[slow], local_workers=False, shutdown_grace_s=0
    )
    async with (
        RedisBus(redis_server.url, prefix=prefix) as bus,
        RedisBus(redis_server.url, prefix=prefix) as worker_bus,
        Worker(worker_bus, {"slow": slow}, parts=AgentParts(media_dir=tmp_path)),
    ):
        async with Session(settings, bus=bus) as session:
            async for event in session.events():
                if isinstance(event, ToolCalled) and event.agent == "slow":
                    session.cancel()
            result = await session.run()
        assert result.status == "cancelled"
        exited = await wait_for_event(bus, session.id, AgentExited)
        assert exited.agent == "slow" and exited.reason == "shutdown"
        log = await logged_events(bus, session.id)
        keys = await session_keys(bus, session.id)
        assert bus.keys.agent(session.id, "slow") in keys
        assert all(0 < ttl <= RETENTION_S * 1000 for _, ttl in keys.values()), keys
        assert not await pending(bus, bus.keys.inbox(session.id, "slow"))  # its shutdown, read
        assert await pending(bus, bus.keys.inbox(session.id, "lead")) is None
        assert any(isinstance(e, SessionFinished) for e in log)
