"""``baton run`` and ``baton watch`` (real processes) on a Redis that dies mid-session.

An outage longer than the ~6 s that used to end both (``watch`` with exit 2, "bad event cursor")
is ridden out: once Redis is back (same port, same AOF) the session completes and ``watch`` shows
it to the end. An outage longer than ``--bus-outage`` ends both with exit 3, "bus unreachable".

Each test has a ``redis-server`` of its own, killed while the sub-agent (in ``baton run``'s own
worker) holds in its tool; the processes log at WARNING, so the test sees on their stderr the
moment their retries took over from the bus's own (where they used to die).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from baton.bus.errors import ConfigError
from baton.bus.retry import DEFAULT_OUTAGE_S
from baton.settings import load_settings
from baton.testing import RedisServer
from tests.cli.helpers import Proc

SESSION = "s-outage"
OLD_LIMIT_S = 6.0


@pytest.fixture
def own_redis() -> Iterator[RedisServer]:
    with RedisServer() as server:
        yield server


def retrying(line: str) -> bool:
    return f"tail {SESSION}: bus unreachable" in line


def start_pair(
    start: Callable[..., Proc],
    url: str,
    profiles_file: Path,
    env: dict[str, str],
    bound: str,
) -> tuple[Proc, Proc]:
    """``baton watch`` on the session, then ``baton run`` of it; returns once the sub-agent is
    mid-tool (holding until the release file appears) and both have seen it."""
    env = {**env, "BATON_LOG_LEVEL": "WARNING"}
    watch = start("watch", SESSION, "--wait", "--json", "--bus", url, "--bus-outage", bound,
                  env=env)  # fmt: skip
    run = start(
        "run", "--json", "--bus", url, "--session", SESSION, "--bus-outage", bound,
        "--profiles", str(profiles_file), "--profile", "north", "survey the north",
        env=env,
    )  # fmt: skip
    run.expect_event("tool.call", agent="north")
    watch.expect_event("tool.call", agent="north")
    return run, watch


def test_run_and_watch_ride_out_an_outage_longer_than_the_old_limit(
    start: Callable[..., Proc],
    own_redis: RedisServer,
    profiles_file: Path,
    env: dict[str, str],
    tmp_path: Path,
) -> None:
    run, watch = start_pair(start, own_redis.url, profiles_file, env, bound="60")
    own_redis.kill()
    down = time.monotonic()
    run.expect(retrying, stream="err")  # both are past the bus's own retries: the old end
    watch.expect(retrying, stream="err")
    time.sleep(max(0.0, down + OLD_LIMIT_S + 1 - time.monotonic()))  # the outage itself
    own_redis.start()  # same port, same AOF
    (tmp_path / "release").touch()

    assert run.wait() == 0, run.transcript()
    assert time.monotonic() - down > OLD_LIMIT_S
    finished = run.events()[-1]
    assert finished["type"] == "session.finished" and finished["status"] == "completed"
    assert watch.wait() == 0, watch.transcript()
    seen = watch.events()
    assert seen[-1]["type"] == "session.finished" and seen[-1]["status"] == "completed"
    assert [e["agent"] for e in seen if e["type"] == "agent.result"] == ["north"]  # no repeat


def test_run_and_watch_exit_3_bus_unreachable_past_the_bound(
    start: Callable[..., Proc],
    own_redis: RedisServer,
    profiles_file: Path,
    env: dict[str, str],
) -> None:
    run, watch = start_pair(start, own_redis.url, profiles_file, env, bound="1")
    own_redis.kill()
    assert run.wait() == 3, run.transcript()
    assert watch.wait() == 3, watch.transcript()
    for proc in (run, watch):
        last = proc.err[-1]
        assert "bus unreachable for" in last and "bad event cursor" not in last, proc.transcript()
        assert "Traceback" not in "".join(proc.err)


def test_the_bound_comes_from_the_flag_the_environment_or_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "baton.toml"
    config.write_text("bus_outage = 30\n")
    assert load_settings().bus_outage == DEFAULT_OUTAGE_S >= 60
    assert load_settings(config).bus_outage == 30
    monkeypatch.setenv("BATON_BUS_OUTAGE", "45")
    assert load_settings(config).bus_outage == 45
    assert load_settings(config, bus_outage=5).bus_outage == 5
    with pytest.raises(ConfigError, match="--bus-outage"):
        load_settings(bus_outage=0)
