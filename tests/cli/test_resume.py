"""``baton resume``: a session whose ``baton run`` process was killed (``kill -9``) goes on.

The sub-agent runs on a ``baton worker`` and holds its work (``hold``) until the test releases
it, which the test does only once the run process is dead: its result (with an image) lands in
the inbox of a lead that no longer exists. ``baton resume`` then takes the dead lead's place from
its checkpoint, and the session ends with one answer carrying that result. Everything is read
back from Redis: the event log and the lead's inbox.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast
from urllib.parse import urlsplit
from urllib.request import url2pathname

import anyio
import pytest
import redis

from baton.api import Session
from baton.bus.base import BusOptions
from baton.bus.connect import open_bus
from baton.bus.events import AgentExited, SessionFinished, SessionStarted
from tests.cli.helpers import PROFILES, SHORT_LEAD_LEASE, Proc

MASON = """
[profiles.mason]
description = "Builds walls and draws them."
system_prompt = "[baton:subagent] Build with hold, draw with generate_image, then report."
tools = ["tests.support.tools:hold", "generate_image"]
"""
"""A sub-agent that works until released, and makes an image on the way."""


@pytest.fixture
def env(env: dict[str, str]) -> dict[str, str]:
    """The CLI environment with a short lead lease: these tests wait one out after a kill."""
    return {**env, **SHORT_LEAD_LEASE}


def logged(client: redis.Redis, session: str) -> list[dict[str, Any]]:
    """The session's whole event log, in order."""
    entries = cast(list[tuple[str, dict[str, str]]], client.xrange(f"baton:{{{session}}}:events"))
    return [json.loads(fields["event"]) for _, fields in entries]


def killed_mid_session(
    start: Callable[..., Proc], redis_url: str, profiles: Path, env: dict[str, str], session: str
) -> Proc:
    """A worker hosting a ``mason`` at work, for a ``baton run`` that is dead (kill -9)."""
    worker = start("worker", "--bus", redis_url, "--profiles", str(profiles), "--lease", "5",
                   env=env)  # fmt: skip
    worker.expect(" ready: ", stream="err")
    run = start(
        "run", "--json", "--bus", redis_url, "--no-local-workers", "--session", session,
        "--profiles", str(profiles), "--profile", "mason", "build a wall",
        env=env,
    )  # fmt: skip
    run.expect_event("agent.spawned", agent="mason")
    run.expect_event("tool.call", agent="mason", where=lambda e: e["call"]["name"] == "hold")
    run.kill()  # SIGKILL to its process group: nothing of it runs on
    assert run.proc.returncode == -9, run.transcript()
    return worker


def test_resume_after_kill_ends_with_one_answer_holding_what_arrived_meanwhile(
    start: Callable[..., Proc], redis_url: str, tmp_path: Path, env: dict[str, str]
) -> None:
    session = "s-killed"
    profiles = tmp_path / "profiles.toml"
    profiles.write_text(PROFILES + MASON)
    worker = killed_mid_session(start, redis_url, profiles, env, session)
    (tmp_path / "release").touch()  # the mason finishes while no lead runs
    worker.expect(f"{session}/mason exited", stream="err")

    resumed = start("resume", session, "--bus", redis_url, "--profiles", str(profiles), "--json",
                    env=env)  # fmt: skip
    assert resumed.wait() == 0, resumed.transcript()

    client = redis.Redis.from_url(redis_url, decode_responses=True)
    events = logged(client, session)
    kinds = [e["type"] for e in events]
    assert kinds.count("session.finished") == 1 and kinds[-1] == "session.finished", kinds
    starts = [e for e in events if e["type"] == "session.started"]
    assert [e["resumed"] for e in starts] == [False, True]
    assert kinds.count("agent.spawned") == 1, kinds  # the lead's: the resumed lead starts none
    assert kinds.count("agent.claimed") == 1, kinds  # the pool's worker, which ran on
    finished = events[-1]
    assert finished["status"] == "completed", finished
    (image,) = next(e for e in events if e["type"] == "agent.result")["media_urls"]
    assert image.startswith("file://") and finished["media_urls"] == [image]
    answer = finished["answer"]
    assert image in answer and len(re.findall(r"^- mason: ", answer, re.MULTILINE)) == 1, answer
    assert resumed.events()[-1] == finished  # what the resume printed is what was logged
    assert client.xlen(f"baton:{{{session}}}:inbox:lead") == 0  # every result taken and acked
    lead = cast(dict[str, str], client.hgetall(f"baton:{{{session}}}:lead"))
    assert lead["status"] == "finished" and not client.exists(f"baton:{{{session}}}:lead:lease")


def test_resume_refuses_a_finished_session_an_unknown_one_and_a_memory_bus(
    start: Callable[..., Proc], redis_url: str, profiles_file: Path, env: dict[str, str]
) -> None:
    run = start("run", "--bus", redis_url, "--session", "s-done", "--profiles", str(profiles_file),
                "--profile", "painter", "paint a fox", env=env)  # fmt: skip
    assert run.wait() == 0, run.transcript()
    for session, bus, says in (
        ("s-done", redis_url, "session s-done finished: nothing to resume"),
        ("s-unknown", redis_url, "session s-unknown has no lead checkpoint on this bus"),
        ("s-done", "memory://", "cannot be resumed from a memory:// bus"),
    ):
        refused = start("resume", session, "--bus", bus, env=env)
        assert refused.wait() == 2, refused.transcript()
        assert refused.out == []
        (line,) = refused.err
        assert line.startswith("baton resume: ") and says in line, line


def test_resume_refuses_a_session_whose_lead_is_alive(
    start: Callable[..., Proc], redis_url: str, tmp_path: Path, env: dict[str, str]
) -> None:
    """The live lead renews its lease while the resume waits for it to lapse (one lease)."""
    profiles = tmp_path / "profiles.toml"
    profiles.write_text(PROFILES + MASON)
    worker = start("worker", "--bus", redis_url, "--profiles", str(profiles), env=env)
    worker.expect(" ready: ", stream="err")
    run = start("run", "--json", "--bus", redis_url, "--no-local-workers", "--session", "s-alive",
                "--profiles", str(profiles), "--profile", "mason", "build a wall",
                env=env)  # fmt: skip
    run.expect_event("tool.call", agent="mason")
    refused = start("resume", "s-alive", "--bus", redis_url, env=env)
    assert refused.wait() == 2, refused.transcript()
    assert "its lead is alive" in "".join(refused.err), refused.transcript()
    (tmp_path / "release").touch()
    assert run.wait() == 0, run.transcript()  # the live session was not disturbed
    assert [e["type"] for e in run.events()].count("session.finished") == 1


async def test_session_resume_api_restarts_the_session_worker_and_its_sub_agents(
    start: Callable[..., Proc],
    redis_url: str,
    tmp_path: Path,
    env: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Embedded: ``Session.resume`` continues a killed ``baton run`` that hosted its sub-agent
    itself; the resumed session's own worker takes the agent over once its lease lapsed (2 s on
    this bus), and the agent starts again from its checkpoint."""
    profiles = tmp_path / "profiles.toml"
    profiles.write_text(PROFILES + MASON)
    run = start("run", "--json", "--bus", redis_url, "--session", "s-local", "--profiles",
                str(profiles), "--profile", "mason", "build a wall", env=env)  # fmt: skip
    run.expect_event("tool.call", agent="mason", where=lambda e: e["call"]["name"] == "hold")
    run.kill()
    (tmp_path / "release").touch()
    monkeypatch.setenv("BATON_TEST_RELEASE", str(tmp_path / "release"))

    async with open_bus(redis_url, BusOptions(lease_s=2)) as bus:
        async with Session.resume("s-local", bus=bus, profiles=profiles) as session:
            assert session.config.task == "build a wall" and session.config.local_workers
            with anyio.fail_after(60):
                seen = [event async for event in session.events()]
                result = await session.run()
        events = [logged.event async for logged in bus.log.tail("s-local", follow=False)]

    assert result.status == "completed", result
    (image,) = result.media_urls
    assert image in result.answer and result.answer.count("- mason: ") == 1, result.answer
    assert await anyio.Path(url2pathname(urlsplit(image).path)).is_file()
    finished = [e for e in events if isinstance(e, SessionFinished)]
    assert len(finished) == 1 and finished[0].answer == result.answer
    assert isinstance(seen[0], SessionStarted) and seen[0].resumed
    exits = [e for e in events if isinstance(e, AgentExited)]
    assert [(e.agent, e.reason) for e in exits] == [("mason", "finished")]
