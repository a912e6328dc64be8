"""A session id names one session: a new run cannot reuse it, ``watch`` knows what exists, and a
session whose lead process died shows as such instead of ``running`` for ever.

Each test has a key prefix of its own on database 0 (``BATON_PREFIX``), rather than a database of
its own: Redis has 16 and the other CLI tests take them.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import anyio
import pytest
import redis

from baton.api import Session, SessionConfig
from baton.bus.memory import MemoryBus
from baton.lead.keeper import SessionExists
from baton.testing import RedisServer
from tests.cli.helpers import PROFILES, SHORT_LEAD_LEASE, Proc, invoke_baton
from tests.cli.test_resume import MASON

_prefixes = itertools.count()


@pytest.fixture
def env(env: dict[str, str]) -> dict[str, str]:
    """The CLI environment with a short lead lease: these tests wait one out after a kill."""
    return {**env, **SHORT_LEAD_LEASE}


@pytest.fixture
def on_redis(redis_server: RedisServer, env: dict[str, str]) -> dict[str, str]:
    """The CLI environment on the test Redis, with a key prefix of this test's own."""
    return {**env, "BATON_BUS": redis_server.url, "BATON_PREFIX": f"ident{next(_prefixes)}"}


def logged(url: str, prefix: str, session: str) -> list[dict[str, Any]]:
    client = redis.Redis.from_url(url, decode_responses=True)
    entries = cast(
        list[tuple[str, dict[str, str]]], client.xrange(f"{prefix}:{{{session}}}:events")
    )
    return [json.loads(fields["event"]) for _, fields in entries]


def test_a_finished_session_id_is_not_reused_and_its_log_keeps_one_story(
    start: Callable[..., Proc], profiles_file: Path, on_redis: dict[str, str]
) -> None:
    args = ("--session", "demo", "--profiles", str(profiles_file), "--profile", "painter")
    first = start("run", *args, "paint a fox", env=on_redis)
    assert first.wait() == 0, first.transcript()
    again = start("run", *args, "paint a heron", env=on_redis)
    assert again.wait() == 2, again.transcript()
    (line,) = again.err
    assert line.startswith("baton run: session demo already exists on this bus"), line
    assert "finished" in line and "baton resume demo" in line, line
    events = logged(on_redis["BATON_BUS"], on_redis["BATON_PREFIX"], "demo")
    kinds = [e["type"] for e in events]
    assert kinds.count("session.started") == 1 and kinds.count("session.finished") == 1, kinds
    assert events[0]["task"] == "paint a fox" and kinds[-1] == "session.finished"


def test_two_runs_given_one_id_at_once_one_is_refused_and_the_other_is_undisturbed(
    start: Callable[..., Proc], tmp_path: Path, on_redis: dict[str, str]
) -> None:
    profiles = tmp_path / "profiles.toml"
    profiles.write_text(PROFILES + MASON)
    worker = start("worker", "--profiles", str(profiles), env=on_redis)
    worker.expect(" ready: ", stream="err")
    first = start("run", "--json", "--no-local-workers", "--session", "twin", "--profiles",
                  str(profiles), "--profile", "mason", "build a wall", env=on_redis)  # fmt: skip
    first.expect_event("tool.call", agent="mason")
    second = start("run", "--json", "--session", "twin", "--profiles", str(profiles),
                   "--profile", "mason", "build a tower", env=on_redis)  # fmt: skip
    assert second.wait() == 2, second.transcript()
    assert second.out == []
    (line,) = second.err
    assert "session twin is running: its lead" in line and "baton post --session twin" in line, line
    (tmp_path / "release").touch()
    assert first.wait() == 0, first.transcript()
    events = logged(on_redis["BATON_BUS"], on_redis["BATON_PREFIX"], "twin")
    assert [e["task"] for e in events if e["type"] == "session.started"] == ["build a wall"]
    assert [e["type"] for e in events].count("session.finished") == 1


def test_watch_wait_shows_a_session_from_its_start_even_when_it_began_first(
    start: Callable[..., Proc], tmp_path: Path, on_redis: dict[str, str]
) -> None:
    """``watch --wait`` is started before the run, but a loaded machine may let the run reach
    the bus first; the watch still shows the session from ``session.started``, not from the
    moment it looked (a session that then went quiet showed nothing at all: seen in CI)."""
    profiles = tmp_path / "profiles.toml"
    profiles.write_text(PROFILES + MASON)
    run = start("run", "--json", "--session", "early", "--profiles", str(profiles),
                "--profile", "mason", "build a wall", env=on_redis)  # fmt: skip
    run.expect_event("tool.call", agent="mason")  # the session is under way, then holds
    waiting = start("watch", "early", "--wait", "--json", env=on_redis)
    waiting.expect_event("session.started")
    waiting.expect_event("tool.call", agent="mason")
    (tmp_path / "release").touch()
    assert run.wait() == 0, run.transcript()
    assert waiting.wait() == 0, waiting.transcript()


def test_watch_refuses_an_unknown_session_and_waits_for_it_when_told(
    start: Callable[..., Proc], profiles_file: Path, on_redis: dict[str, str]
) -> None:
    unknown = start("watch", "nosuch", env=on_redis)
    assert unknown.wait() == 2, unknown.transcript()
    (line,) = unknown.err
    assert line.startswith("baton watch: no session nosuch on this bus") and "--wait" in line

    waiting = start("watch", "later", "--wait", "--json", env=on_redis)
    run = start("run", "--session", "later", "--profiles", str(profiles_file), "--profile",
                "painter", "paint a fox", env=on_redis)  # fmt: skip
    assert run.wait() == 0, run.transcript()
    assert waiting.wait() == 0, waiting.transcript()
    kinds = [e["type"] for e in waiting.events()]
    assert kinds[0] == "session.started" and kinds[-1] == "session.finished", kinds


def test_a_session_whose_lead_died_shows_lead_lost_and_ends_its_watch(
    start: Callable[..., Proc], tmp_path: Path, on_redis: dict[str, str]
) -> None:
    """The lead's lease (4 s here) lapses after ``kill -9``: a watch that was following ends, and
    ``sessions`` says ``lead lost`` with the way on; ``resume`` then carries the session on."""
    profiles = tmp_path / "profiles.toml"
    profiles.write_text(PROFILES + MASON)
    worker = start("worker", "--profiles", str(profiles), env=on_redis)
    worker.expect(" ready: ", stream="err")
    run = start("run", "--json", "--no-local-workers", "--session", "orphan", "--profiles",
                str(profiles), "--profile", "mason", "build a wall", env=on_redis)  # fmt: skip
    run.expect_event("tool.call", agent="mason")
    watch = start("watch", "orphan", "--json", env=on_redis)
    code, out, err = invoke_baton("sessions", "--json", env=on_redis)
    assert code == 0, err
    assert [(r["session"], r["state"]) for r in map(json.loads, out.splitlines())] == [
        ("orphan", "running")
    ]
    run.kill()

    assert watch.wait(timeout=30) == 1, watch.transcript()
    # where the session stood when the watch began (issue 22), and nothing logged after that
    shown = [e["type"] for e in watch.events()]
    assert shown[:1] == ["session.started"], shown
    assert set(shown) <= {"session.started", "agent.spawned", "agent.progress"}, shown
    (line,) = watch.err
    assert "session orphan: its lead is gone" in line and "baton resume orphan" in line, line
    code, out, err = invoke_baton("sessions", env=on_redis)
    assert code == 0, err
    assert out.split()[:3] == ["orphan", "lead", "lost"], out
    assert "`baton resume orphan` continues it" in err
    replay = start("watch", "orphan", "--from-start", "--json", env=on_redis)
    assert replay.wait() == 1, replay.transcript()
    assert next(e["type"] for e in replay.events()) == "session.started"

    (tmp_path / "release").touch()
    resumed = start("resume", "orphan", "--profiles", str(profiles), "--json", env=on_redis)
    assert resumed.wait() == 0, resumed.transcript()
    code, out, err = invoke_baton("sessions", "--json", env=on_redis)
    assert code == 0, err
    assert [json.loads(line)["state"] for line in out.splitlines()] == ["completed"]


async def test_a_shared_memory_bus_refuses_a_second_session_of_one_id() -> None:
    """Embedded on one in-process bus: a finished id is refused, and of two sessions opened
    at once with one id, one runs and the other is refused."""
    config = SessionConfig(task="paint a fox", session_id="mem", profiles=None)
    async with MemoryBus() as bus:
        with anyio.fail_after(30):
            async with Session(config, bus=bus) as session:
                assert (await session.run()).status == "completed"
            with pytest.raises(SessionExists, match="session mem already exists"):
                async with Session(config, bus=bus):
                    pass

            twin = SessionConfig(task="paint a fox", session_id="twin")
            outcomes: list[str] = []

            async def open_one() -> None:
                try:
                    async with Session(twin, bus=bus) as session:
                        outcomes.append((await session.run()).status)
                except SessionExists as exc:
                    outcomes.append(str(exc))

            async with anyio.create_task_group() as group:
                group.start_soon(open_one)
                group.start_soon(open_one)
    assert sorted(outcomes)[0] == "completed" and len(outcomes) == 2, outcomes
    assert sorted(outcomes)[1].startswith("session twin is running: its lead"), outcomes
