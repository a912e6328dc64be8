"""Issue 43, item 4: a session that starts during or after a Cluster failover finds the cluster.

The URL names the killed master first, as the issue's deployment did: every node the URL names is
tried for the slot map, and a fault once a node has answered is ridden out for up to the session's
``bus_outage_s`` (the map read again before each try). A URL that names no node that answers
still fails at once, in one line (exit 3).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from baton import Session, SessionConfig
from baton.bus.redis import RedisBus
from baton.bus.redis.slots import slot_of
from baton.testing import RedisServer, free_port
from baton.testing.redis_cluster import RedisCluster
from tests.cli.helpers import clean_env, invoke_baton


@pytest.fixture
def own_cluster() -> Iterator[RedisCluster]:
    """A cluster of this test's own: a master of it is killed."""
    with RedisCluster() as cluster:
        yield cluster


def naming_first(cluster: RedisCluster, node: RedisServer) -> str:
    """A cluster URL that names ``node`` first, then the other masters (the issue's URL)."""
    others = [master for master in cluster.master_nodes() if master is not node]
    seeds = ",".join(f"127.0.0.1:{n.port}" for n in [node, *others])
    return f"redis+cluster://{seeds}/0"


def lowest_master(cluster: RedisCluster) -> RedisServer:
    """The master with the lowest port: the one a keyless command (the start's ``PING``) goes
    to while the map still lists it, so the start meets it dead for sure."""
    return min(cluster.master_nodes(), key=lambda node: node.port)


async def run_session(config: SessionConfig, bus: RedisBus | None = None) -> str:
    with anyio.fail_after(90):
        async with Session(config, bus=bus) as session:
            result = await session.run()
    assert result.media_urls, result.answer
    return result.status


def listed_masters(cluster: RedisCluster) -> set[int]:
    """The ports of the masters a running node's slot map lists (a dead one until its replica
    has taken over)."""
    with cluster.client(cluster.running()[0]) as client:
        rows = client.execute_command("CLUSTER", "SLOTS")
    return {int(row[2][1]) for row in rows}


async def test_sessions_started_as_the_first_named_master_dies_and_after_it_failed_over(
    own_cluster: RedisCluster, tmp_path: Path
) -> None:
    """The first named master killed, and a session started at once: its start meets the dead
    master in the map (the replica takes over only after the node timeout), waits for the
    failover and completes. Then, the cluster whole again and the dead node still first in the
    URL, another session starts and completes."""
    first = lowest_master(own_cluster)
    url = naming_first(own_cluster, first)
    first.kill()
    assert first.port in listed_masters(own_cluster), "the failover was over before the start"
    config = SessionConfig(task="paint a fox", bus_url=url, media_dir=tmp_path)
    assert await run_session(config) == "completed"
    own_cluster.wait_ok()
    assert first.port not in listed_masters(own_cluster)
    after = SessionConfig(task="paint a heron", bus_url=url, media_dir=tmp_path)
    assert await run_session(after) == "completed"


async def test_a_master_that_dies_while_a_session_starts_is_waited_out(
    own_cluster: RedisCluster, tmp_path: Path
) -> None:
    """The bus read the map while every master was alive; then the master of the session's own
    slot dies before the session claims its lead and writes its first events. Those writes are
    retried, the map read again, until the replica has taken the slot over."""
    first = lowest_master(own_cluster)
    url = naming_first(own_cluster, first)
    prefix = "start"
    session_id = next(
        f"s-start{i}"
        for i in range(10_000)
        if own_cluster.owner(slot_of(f"{prefix}:{{s-start{i}}}:events")) is first
    )
    async with RedisBus(url, prefix=prefix) as bus:
        first.kill()
        config = SessionConfig(task="paint a fox", session_id=session_id, bus_url=url,
                               bus_prefix=prefix, media_dir=tmp_path)  # fmt: skip
        assert await run_session(config, bus) == "completed"
    assert own_cluster.owner(slot_of(f"{prefix}:{{{session_id}}}:events")) is not first


def test_a_cluster_url_naming_no_node_that_answers_fails_at_once(tmp_path: Path) -> None:
    """Nothing to wait for: no node answered, so no failover can be under way. Exit 3 and one
    line naming the nodes tried, long before the outage bound (120 s by default)."""
    url = f"redis+cluster://127.0.0.1:{free_port()},127.0.0.1:{free_port()}/0"
    began = time.monotonic()
    code, _, err = invoke_baton("run", "--bus", url, "paint a fox", env=clean_env(tmp_path))
    took = time.monotonic() - began
    assert code == 3, err
    [line] = err.splitlines()
    assert line.startswith(f"baton run: cannot reach the bus at {url}: no cluster node answered")
    assert "(tried 127.0.0.1:" in line
    assert took < 30, f"took {took:.1f} s: the start waited for a node that never answered"
