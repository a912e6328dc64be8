"""Shared fixtures: a sealed test environment, a working directory of each test's own, a real
``redis-server`` for each test process (each ``pytest-xdist`` worker has its own), and buses on
both backends. The tiers' markers are checked by :mod:`tests.support.tiers`.

A missing ``redis-server`` fails the Redis tests with a clear message; it is never a skip.
"""

from __future__ import annotations

import itertools
import logging
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from baton.bus.base import Bus, BusOptions
from baton.bus.errors import ConfigError
from baton.bus.memory import MemoryBus
from baton.bus.redis import RedisBus
from baton.testing import RedisServer, local_model_requests_only
from baton.testing.redis_cluster import RedisCluster

pytest_plugins = ["tests.support.tiers"]

_prefixes = itertools.count()

SHELL_SETTINGS = ("OPENAI_", "BATON_", "REDIS_URL", "REDIS_PASSWORD", "OTEL_")
"""Environment variables (by prefix) that configure a model, baton, a bus or telemetry export: none
reach a test."""


@pytest.fixture(autouse=True)
def sealed_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """A key, endpoint, bus or baton setting in the shell must not change what a test does (nor
    what the processes it starts do, since they inherit this environment)."""
    for name in list(os.environ):
        if name.startswith(SHELL_SETTINGS):
            monkeypatch.delenv(name)


@pytest.fixture(autouse=True)
def root_logger_restored() -> Iterator[None]:
    """An in-process CLI command configures logging as the user's process would (``baton run``:
    the root logger at CRITICAL, one handler on the stderr it was given): put back after each
    test, so what a later test's logs reach never depends on which command ran before it."""
    root = logging.getLogger()
    level, handlers = root.level, root.handlers[:]
    yield
    root.setLevel(level)
    root.handlers[:] = handlers


@pytest.fixture(autouse=True)
def own_working_directory(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """Each test runs in an empty folder of its own, never in the checkout: what baton writes
    relative to the working directory (the media directory's default ``media/``, a process's
    files) lands there. A folder apart from ``tmp_path``, which stays the test's alone."""
    folder = tmp_path_factory.mktemp("cwd")
    monkeypatch.chdir(folder)
    return folder


@pytest.fixture(autouse=True, scope="session")
def bytecode_outside_the_checkout(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The Python programs the tests start (``baton``, servers) keep their bytecode in one folder
    of this run, shared by its xdist workers: compiled once, not at every start (where the shell
    says ``PYTHONDONTWRITEBYTECODE``), and never in ``__pycache__`` folders of the checkout."""
    base = tmp_path_factory.getbasetemp()
    folder = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "pycache"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PYTHONPYCACHEPREFIX", str(folder))
        patch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
        yield


@pytest.fixture(autouse=True, scope="session")
def model_requests_stay_local() -> Iterator[None]:
    """Model requests reach only the scripted server (loopback or in-process); any other raises
    ``ModelRequestRefused`` before it is sent."""
    with local_model_requests_only():
        yield


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    try:
        server = RedisServer()
    except ConfigError as exc:
        pytest.fail(str(exc), pytrace=False)
    with server:
        yield server


BusFactory = Callable[..., Bus]


@pytest.fixture(params=["memory", "redis"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="session")
def redis_cluster() -> Iterator[RedisCluster]:
    """A real Redis Cluster (3 masters, a replica each) for this test process."""
    try:
        cluster = RedisCluster()
    except ConfigError as exc:
        pytest.fail(str(exc), pytrace=False)
    with cluster:
        yield cluster


@pytest.fixture
def make_bus(request: pytest.FixtureRequest, backend: str) -> BusFactory:
    """Buses on one backend that share state, each a separate consumer (a 'process').

    Use as ``async with make_bus(lease_s=...) as bus``: the bus is opened and closed inside the
    test's own task, since a bus owns a task group (pytest-asyncio runs fixture setup and
    teardown in different tasks). Keyword arguments become ``BusOptions`` fields. Redis buses of
    one test share a fresh key prefix, so tests never see each other's keys.
    """
    prefix = f"t{next(_prefixes)}"
    url: str | None = None
    if backend == "redis":
        url = request.getfixturevalue("redis_server").url
    elif backend == "redis-cluster":
        url = request.getfixturevalue("redis_cluster").url
    first: list[MemoryBus] = []

    def factory(**options: Any) -> Bus:
        opts = BusOptions(**options)
        if url is not None:
            return RedisBus(url, opts, prefix=prefix)
        if not first:
            first.append(MemoryBus(opts))
            return first[0]
        return first[0].peer(options=opts)

    return factory
