"""The sessions' index on Redis (``baton:sessions``) is touched at most once per interval by a
process, so an emit after a session's first goes to the session's own node only: on a Redis
Cluster the index is one key on one node, and a write per event made it every emit's second
node and the cluster's hot spot (bus/redis/log.py)."""

from __future__ import annotations

import itertools

import redis

from baton.bus.events import AgentProgress
from baton.bus.redis import RedisBus
from baton.bus.redis.log import INDEX_TOUCH_S, RedisEventLog
from baton.bus.redis.slots import slot_of
from baton.testing import RedisServer
from baton.testing.redis_cluster import RedisCluster

_prefixes = itertools.count()


def progress(session: str, step: int) -> AgentProgress:
    return AgentProgress(session=session, agent="a", content=f"step {step}")


async def test_a_process_touches_a_session_in_the_index_once_per_interval(
    redis_server: RedisServer,
) -> None:
    prefix = f"index{next(_prefixes)}"
    now = [1000.0]
    async with RedisBus(redis_server.url, prefix=prefix) as bus:
        assert isinstance(bus.log, RedisEventLog)
        bus.log.clock = lambda: now[0]
        with redis.Redis(port=redis_server.port, decode_responses=True) as admin:
            await bus.log.emit(progress("s1", 0))
            assert await bus.log.sessions() == ["s1"]
            admin.zrem(f"{prefix}:sessions", "s1")
            for step in range(1, 5):  # within the interval: the log only
                await bus.log.emit(progress("s1", step))
            assert admin.zcard(f"{prefix}:sessions") == 0
            assert admin.xlen(f"{prefix}:{{s1}}:events") == 5
            now[0] += INDEX_TOUCH_S  # due again
            await bus.log.emit(progress("s1", 5))
            assert await bus.log.sessions() == ["s1"]
            # another session is touched at its first emit, whatever the first one's interval
            await bus.log.emit(progress("s2", 0))
            assert await bus.log.sessions() == ["s2", "s1"]


async def test_on_a_cluster_emits_after_the_first_leave_the_index_node_alone(
    redis_cluster: RedisCluster,
) -> None:
    prefix = f"hot{next(_prefixes)}"
    index_node = redis_cluster.owner(slot_of(f"{prefix}:sessions"))
    # a session whose log lives on another node than the index
    session = next(
        f"s{i}"
        for i in itertools.count()
        if redis_cluster.owner(slot_of(f"{prefix}:{{s{i}}}:events")).port != index_node.port
    )

    def zadds() -> int:
        with redis_cluster.client(index_node) as client:
            stats = client.info("commandstats").get("cmdstat_zadd", {})
            return int(stats.get("calls", 0)) if isinstance(stats, dict) else 0

    async with RedisBus(redis_cluster.url, prefix=prefix) as bus:
        await bus.log.emit(progress(session, 0))
        before = zadds()
        for step in range(1, 21):
            await bus.log.emit(progress(session, step))
        assert zadds() == before
        assert await bus.log.sessions() == [session]
