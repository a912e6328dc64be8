"""Fixtures of the CLI tests: a profiles file, a clean environment, a process factory."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from baton.testing import RedisServer
from baton.testing.redis_server import DATABASES
from tests.cli.helpers import PROFILES, Proc, clean_env, processes

_databases = itertools.count(1)


@pytest.fixture
def profiles_file(tmp_path: Path) -> Path:
    path = tmp_path / "profiles.toml"
    path.write_text(PROFILES)
    return path


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return clean_env(tmp_path, BATON_TEST_RELEASE=str(tmp_path / "release"))


@pytest.fixture
def start() -> Iterator[Callable[..., Proc]]:
    with processes() as factory:
        yield factory


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    """A Redis database of its own for each test, so spawn queues never mix."""
    db = next(_databases)
    assert db < DATABASES, "more Redis tests than databases: give the server more"
    base = redis_server.url.rsplit("/", 1)[0]  # redis://HOST:PORT/0 -> redis://HOST:PORT
    return f"{base}/{db}"
