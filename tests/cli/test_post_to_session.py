"""Issue 22: ``baton post`` writes only to a session that runs.

It used to exit 0 and print an id for a finished session (nothing reads its inbox any more) and
for an unknown one, where its write made a key that never expires, while the HTTP API answers
409 and 404 for the same cases. Now both exit 2 with one line and write nothing; the look and the
write are one Lua script (``Bus.send_if_running``), so a session that finishes in between gets
nothing either. In-process (typer's runner) against a real ``redis-server``.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import redis
from typer.testing import CliRunner

from baton.bus.connect import open_bus
from baton.cli.app import app
from baton.session import Session, SessionConfig


def post(redis_url: str, session: str, text: str = "also paint a heron") -> tuple[int, str, str]:
    result = CliRunner().invoke(
        app, ["post", "--bus", redis_url, "--session", session, "--to", "lead", text]
    )
    return result.exit_code, result.stdout, result.stderr


def keys_of(redis_url: str, session: str) -> list[bytes]:
    with redis.Redis.from_url(redis_url) as admin:
        return list(admin.scan_iter(match=f"baton:{{{session}}}:*"))


def test_post_to_an_unknown_session_exits_2_and_writes_nothing(redis_url: str) -> None:
    code, out, err = post(redis_url, "s-nosuch")
    assert (code, out) == (2, ""), err
    (line,) = err.splitlines()
    assert line.startswith("baton post: no session s-nosuch on this bus (redis://"), line
    assert "`baton sessions` lists them" in line
    assert keys_of(redis_url, "s-nosuch") == []  # before: an inbox key that never expired


def test_post_to_a_finished_session_exits_2_and_writes_nothing(
    redis_url: str, tmp_path: Path
) -> None:
    async def finish_one() -> None:
        config = SessionConfig(task="write a haiku", session_id="s-done", bus_url=redis_url,
                               media_dir=tmp_path)  # fmt: skip
        async with Session(config) as session:
            assert (await session.run()).status == "completed"

    anyio.run(finish_one)
    with redis.Redis.from_url(redis_url) as admin:
        before = {key: admin.xlen(key) for key in admin.scan_iter(match="baton:{s-done}:inbox:*")}
    code, out, err = post(redis_url, "s-done")
    assert (code, out) == (2, ""), err
    (line,) = err.splitlines()
    assert line == (
        "baton post: session s-done has finished (completed): nothing reads its messages any "
        "more; start a new session for a follow-up"
    )
    with redis.Redis.from_url(redis_url) as admin:
        after = {key: admin.xlen(key) for key in admin.scan_iter(match="baton:{s-done}:inbox:*")}
    assert after == before  # not one entry more, not one inbox more


def test_post_to_a_running_session_is_sent(redis_url: str) -> None:
    async def a_running_lead() -> None:  # its record, as a live lead writes it
        async with open_bus(redis_url) as bus:
            await bus.records.hold_lead("s-live", "lead-1", 30, {"status": "running"})

    anyio.run(a_running_lead)
    code, out, err = post(redis_url, "s-live")
    assert code == 0, err
    with redis.Redis.from_url(redis_url, decode_responses=True) as admin:
        [(_, fields)] = admin.xrange("baton:{s-live}:inbox:lead")
    assert out.strip() in fields["msg"] and "also paint a heron" in fields["msg"]


def test_post_to_a_session_whose_lead_read_its_last_exits_2_and_says_so(redis_url: str) -> None:
    async def a_closing_lead() -> None:  # it answered, and its last read found nothing
        async with open_bus(redis_url) as bus:
            await bus.records.hold_lead("s-closing", "lead-1", 30, {"status": "closing"})

    anyio.run(a_closing_lead)
    code, out, err = post(redis_url, "s-closing")
    assert (code, out) == (2, ""), err
    assert err.splitlines() == [
        "baton post: session s-closing is ending: its lead gave its answer and reads no more "
        "messages; start a new session for a follow-up"
    ]
    assert not [key for key in keys_of(redis_url, "s-closing") if b"inbox" in key]
