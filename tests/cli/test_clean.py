"""``baton clean`` and ``baton sessions``' expiry, run as a user would (in-process:
:func:`~tests.cli.helpers.invoke_baton`), on a real ``redis-server``: finished sessions (and
leftover keys) go, a running session and one whose lead died never do."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path

import anyio
import pytest

from baton.bus.errors import ConfigError
from baton.bus.events import SessionFinished, SessionStarted
from baton.bus.redis import RedisBus
from baton.cli.busops import duration
from baton.settings import load_settings
from tests.cli.helpers import invoke_baton

RETENTION_S = 3600


async def keys_of(bus: RedisBus, session: str) -> list[str]:
    return sorted(await bus._core.one("KEYS", f"{bus.keys.prefix}:{{{session}}}:*"))


async def other_sessions(bus: RedisBus) -> None:
    """``live``: its lead holds the lease; ``lost``: its lead died (no lease, not finished);
    ``logged``: finished by its log, keys never given a lifetime; ``stray``: keys of no session."""
    await bus.records.hold_lead("live", "host:1", 60, {"status": "running"})
    await bus.records.hold_lead(
        "lost", "host:2", 0, {"status": "running"}
    )  # written, lease given up
    for session in ("live", "lost", "logged"):
        await bus.log.emit(SessionStarted(session=session, agent="lead", task="paint a fox"))
    await bus.log.emit(SessionFinished(session="logged", agent="lead", status="failed"))
    await bus.inboxes.send_raw("stray", "painter", "written after its session's keys were gone")


def test_clean_removes_finished_sessions_and_leaves_the_others_alone(
    redis_url: str, env: dict[str, str]
) -> None:
    on_bus = {**env, "BATON_BUS": redis_url}

    def baton(*args: str) -> tuple[int, str, str]:
        return invoke_baton(*args, env=on_bus)

    async def keys_now(sessions: Iterable[str]) -> dict[str, list[str]]:
        async with RedisBus(redis_url) as bus:
            return {s: await keys_of(bus, s) for s in sessions}

    async def set_up_the_others() -> None:
        async with RedisBus(redis_url) as bus:
            await other_sessions(bus)

    async def sessions() -> list[str]:
        async with RedisBus(redis_url) as bus:
            return sorted(await bus.log.sessions())

    done = ("run", "--session", "done", "--retention", str(RETENTION_S), "paint a fox")
    code, out, err = baton(*done)
    assert code == 0, err
    anyio.run(set_up_the_others)
    before = anyio.run(keys_now, ("done", "live", "lost", "logged", "stray"))
    assert all(before.values()), before

    code, out, err = baton("sessions", "--json")
    assert code == 0, err
    rows = {row["session"]: row for row in map(json.loads, out.splitlines())}
    assert set(rows) == {"done", "live", "lost", "logged"}  # "stray" has no log
    assert rows["done"]["state"] == "completed"
    assert 0 < rows["done"]["expires_in"] <= RETENTION_S
    assert rows["logged"]["expires_in"] is None and rows["live"]["expires_in"] is None
    code, out, err = baton("sessions")
    lines = {line.split()[0]: line for line in out.splitlines()}
    assert re.search(r"expires in (1h|59m)\b", lines["done"]), out  # an hour, less a moment
    assert "no expiry" in lines["logged"], out
    assert "expires" not in lines["live"] and "expires" not in lines["lost"], out

    code, out, err = baton("clean", "--dry-run")
    assert code == 0, err
    assert out.splitlines() == [
        f"would remove done (completed, {len(before['done'])} keys)",  # oldest first
        "would remove logged (failed, 1 key)",
        "would remove stray (leftover keys, 1 key)",
        f"would remove 3 sessions ({sum(len(before[s]) for s in ('done', 'logged', 'stray'))} "
        "keys); nothing was deleted (--dry-run)",
    ]
    code, out, err = baton("clean", "--older-than", "3600")
    assert (code, out) == (0, "removed 0 sessions (0 keys)\n"), err  # they all just finished
    assert anyio.run(keys_now, before) == before

    code, out, err = baton("clean")
    assert code == 0, err
    removed = [line.split()[1] for line in out.splitlines()[:-1]]
    assert sorted(removed) == ["done", "logged", "stray"]
    assert out.splitlines()[-1].startswith("removed 3 sessions (")
    after = anyio.run(keys_now, before)
    for session in ("done", "logged", "stray"):
        assert after[session] == [], session
    for session in ("live", "lost"):  # running, and resumable: untouched
        assert after[session] == before[session], session
    assert anyio.run(sessions) == ["live", "lost"]


def test_clean_refuses_the_in_process_bus_in_one_line(env: dict[str, str]) -> None:
    code, out, err = invoke_baton("clean", "--bus", "memory://", env=env)
    assert (code, out) == (2, "")
    assert len(err.splitlines()) == 1 and "shared bus" in err, err


def test_the_retention_is_a_setting_like_any_other(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert load_settings().retention == 7 * 24 * 3600  # the default: a week
    config = tmp_path / "baton.toml"
    config.write_text("retention = 86400\n")
    assert load_settings(config).retention == 86400
    monkeypatch.setenv("BATON_RETENTION", "600")
    assert load_settings(config).retention == 600  # the environment wins over the file
    assert load_settings(config, retention=60.0).retention == 60  # and a flag over both
    monkeypatch.setenv("BATON_RETENTION", "0")
    with pytest.raises(ConfigError, match="BATON_RETENTION"):
        load_settings()


def test_a_time_left_is_shown_to_its_two_largest_units() -> None:
    assert duration(7 * 86400) == "7d"
    assert duration(6 * 86400 + 23 * 3600 + 59 * 60) == "6d 23h"
    assert duration(3599.6) == "1h"
    assert duration(125) == "2m 5s"
    assert duration(0.2) == "0s"
