"""``baton.testing``'s servers under tests that run side by side (``pytest-xdist``): a port
picked for a server that another process takes first is given up for another, never a failed
start; a port once given is never given again by the same process."""

from __future__ import annotations

import socket

import pytest
import redis

import baton.testing.redis_server as redis_server_module
from baton.testing import RedisServer, free_port


def test_a_server_whose_picked_port_is_taken_starts_on_another(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        taken = holder.getsockname()[1]
        picks = iter([taken])  # the race, made certain: the first pick is already listened on
        real = redis_server_module.free_port
        monkeypatch.setattr(redis_server_module, "free_port", lambda: next(picks, None) or real())
        with RedisServer() as server:
            assert server.port != taken
            with redis.Redis(port=server.port) as client:
                assert client.ping()
            port = server.port
            server.restart()  # started once: clients hold its URL, so the port stays
            assert server.port == port
            with redis.Redis(port=server.port) as client:
                assert client.ping()


def test_a_cluster_node_whose_bus_port_is_taken_starts_on_other_ports() -> None:
    """A node's cluster bus port, picked free beside its own, can be taken first as well (a CI
    run failed so: the retries changed only the node's own port)."""
    cluster = ["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"]
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        taken = holder.getsockname()[1]
        server = RedisServer(extra_args=cluster, cluster_bus=True)
        server.bus_port = taken  # the race, made certain
        with server:
            assert server.bus_port not in (taken, None)
            with redis.Redis(port=server.port, decode_responses=True) as client:
                assert client.ping() and client.info("cluster")["cluster_enabled"] == 1


def test_a_port_given_is_never_given_again() -> None:
    ports = [free_port() for _ in range(200)]
    assert len(set(ports)) == len(ports)
