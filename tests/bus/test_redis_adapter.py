"""The redis-py adapter (``baton.bus.redis.adapter``) against a real server: raw connections,
error replies typed by their RESP code, faults, names and pool lifetime.

These are the tests ``.ci/redis-floor`` runs at the oldest redis-py ``pyproject.toml`` allows, so
they touch every redis-py internal the bus relies on.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import redis
from redis.asyncio import Redis

from baton.bus.errors import BusError, ConfigError
from baton.bus.redis.adapter import (
    FAULTS,
    BusyGroup,
    CommandPool,
    NoGroup,
    NoScript,
    RawConnection,
    RedisRefused,
    pubsub_client,
)
from baton.bus.redis.batch import Command, pack
from baton.bus.redis.scripts import SCRIPTS
from baton.testing import RedisServer, free_port

ROOT = Path(__file__).resolve().parents[2]
NAME = "baton:adapter-test"


async def names_connected(url: str, name: str) -> int:
    async with Redis.from_url(url, decode_responses=True) as observer:
        clients = await observer.client_list()
    return sum(1 for c in clients if c.get("name") == name)


@pytest.fixture
async def pool(redis_server: RedisServer) -> AsyncIterator[CommandPool]:
    pool = CommandPool(redis_server.url, connections=2, client_name=NAME)
    try:
        yield pool
    finally:
        await pool.aclose()


async def run(connection: RawConnection, *commands: Command) -> tuple[list[Any], Any]:
    await connection.send(pack(commands))
    return await connection.read_replies(len(commands))


async def test_replies_come_back_in_order_as_decoded_resp2(pool: CommandPool) -> None:
    connection = await pool.connect()
    replies, error = await run(
        connection,
        ("DEL", "adapter:h", "adapter:s"),
        ("HSET", "adapter:h", "a", "1", "b", "2"),
        ("HGETALL", "adapter:h"),
        ("XADD", "adapter:s", "1-1", "f", "v"),
        ("XRANGE", "adapter:s", "-", "+"),
    )
    assert error is None
    # RESP2 without redis-py's response callbacks: a hash is a flat list, as the bus parses it.
    assert replies[1:] == [2, ["a", "1", "b", "2"], "1-1", [["1-1", ["f", "v"]]]]
    await pool.release(connection)


async def test_error_replies_are_typed_by_their_code_and_keep_their_place(
    pool: CommandPool,
) -> None:
    connection = await pool.connect()
    stream = "adapter:groups"
    replies, error = await run(
        connection,
        ("DEL", stream),
        ("XGROUP", "CREATE", stream, "g", "0", "MKSTREAM"),
        ("XGROUP", "CREATE", stream, "g", "0", "MKSTREAM"),
        ("XREADGROUP", "GROUP", "nobody", "c", "STREAMS", stream, ">"),
        ("EVALSHA", "0" * 40, 0),
        ("XRANGE", stream, "(not-an-id", "+"),
        ("PING",),
    )
    created, busy, nogroup, noscript, bad_id, pong = replies[1:]
    assert created == "OK"
    assert type(busy) is BusyGroup and busy.code == "BUSYGROUP"
    assert type(nogroup) is NoGroup and nogroup.code == "NOGROUP"
    assert type(noscript) is NoScript and noscript.code == "NOSCRIPT"
    assert type(bad_id) is RedisRefused and bad_id.code == "ERR"
    assert "Invalid stream ID" in str(bad_id)
    assert pong == "PONG"  # the replies after an error were read too: the connection is clean
    assert error is busy  # the first error reply
    assert all(isinstance(e, BusError) for e in (busy, nogroup, noscript, bad_id))
    await pool.release(connection)


async def test_an_unmapped_code_is_kept(pool: CommandPool) -> None:
    connection = await pool.connect()
    replies, error = await run(
        connection,
        ("DEL", "adapter:str"),
        ("SET", "adapter:str", "x"),
        ("HGET", "adapter:str", "f"),
    )
    assert type(error) is RedisRefused and error.code == "WRONGTYPE"
    assert replies[-1] is error
    await pool.release(connection)


async def test_every_script_loads_and_runs_by_sha(pool: CommandPool) -> None:
    connection = await pool.connect()
    replies, error = await run(connection, ("SCRIPT", "FLUSH"), *(s.load() for s in SCRIPTS))
    assert error is None
    assert replies[1:] == [s.sha for s in SCRIPTS]
    stream = "adapter:append"
    append = next(s for s in SCRIPTS if s.name == "append_and_wake")
    replies, error = await run(
        connection, ("DEL", stream), append.call(stream, "msg", "hi", "adapter:wake", "", "")
    )
    assert error is None and re.fullmatch(r"\d+-\d+", replies[1])
    await pool.release(connection)


async def test_a_dropped_connection_reconnects_on_the_next_send(
    pool: CommandPool, redis_server: RedisServer
) -> None:
    connection = await pool.connect()
    assert await names_connected(redis_server.url, NAME) == 1
    await connection.drop()
    assert await names_connected(redis_server.url, NAME) == 0
    replies, _ = await run(connection, ("PING",))
    assert replies == ["PONG"]
    assert await names_connected(redis_server.url, NAME) == 1
    await pool.release(connection)


async def test_closing_the_pool_closes_its_connections(redis_server: RedisServer) -> None:
    pool = CommandPool(redis_server.url, connections=2, client_name=NAME)
    first, second = await pool.connect(), await pool.connect()
    assert await names_connected(redis_server.url, NAME) == 2
    await pool.release(first)
    await pool.release(second)
    await pool.aclose()
    assert await names_connected(redis_server.url, NAME) == 0


async def test_an_unreachable_server_is_a_fault() -> None:
    pool = CommandPool(f"redis://127.0.0.1:{free_port()}/0", connections=1, client_name=NAME)
    with pytest.raises(FAULTS):
        await pool.connect()
    await pool.aclose()


def test_a_bad_url_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="bad Redis URL"):
        CommandPool("redis://host:notaport/0", connections=1, client_name=NAME)
    with pytest.raises(ConfigError, match="bad Redis URL"):
        pubsub_client("redis://host:notaport/0", client_name=NAME)


async def test_the_pubsub_client_is_named(redis_server: RedisServer) -> None:
    client = pubsub_client(redis_server.url, client_name=NAME + ":pubsub")
    try:
        assert await client.ping()
        assert await names_connected(redis_server.url, NAME + ":pubsub") == 1
    finally:
        await client.aclose()


def declared_floor() -> str:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    dependencies: Sequence[str] = pyproject["project"]["dependencies"]
    (floor,) = (m[1] for d in dependencies if (m := re.match(r"redis\[hiredis\]>=([^,\s]+)", d)))
    return floor


def version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", text)[:3])


def test_the_installed_redis_py_is_not_below_the_declared_floor() -> None:
    assert version(redis.__version__) >= version(declared_floor())
