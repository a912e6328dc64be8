"""Issue 22: ``baton cancel SESSION`` cancels a session started from another shell.

The ``baton run`` that runs the session is a real process (it is "another shell"); ``baton
cancel`` runs in-process (typer's runner). The cancel is the path every canceller shares: a
``shutdown`` from the user in the lead's inbox, which the lead acts on as on Ctrl-C — its
sub-agents are told to shut down, the session ends ``cancelled``, ``baton run`` exits 130.
Unknown, finished and lead-lost sessions are refused with exit 2 and get nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import anyio
import redis
from typer.testing import CliRunner

from baton.bus.connect import open_bus
from baton.cli.app import app
from tests.cli.helpers import Proc

SESSION = "s-to-cancel"


def cancel(redis_url: str, session: str, *flags: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["cancel", session, "--bus", redis_url, *flags])
    return result.exit_code, result.stdout, result.stderr


def lead_inbox(redis_url: str, session: str) -> int:
    with redis.Redis.from_url(redis_url) as admin:
        return int(admin.xlen(f"baton:{{{session}}}:inbox:lead"))


def test_cancel_ends_a_session_another_process_runs(
    start: Callable[..., Proc], redis_url: str, profiles_file: Path, env: dict[str, str]
) -> None:
    run = start(
        "run", "--json", "--bus", redis_url, "--session", SESSION, "--profiles",
        str(profiles_file), "--profile", "sleeper", "ponder the sea and ponder the sky",
        env=env,
    )  # fmt: skip
    run.expect_event("tool.call", agent="sleeper")  # ponder: 300 s unless interrupted
    code, out, err = cancel(redis_url, SESSION)
    assert code == 0, err
    assert out == f"session {SESSION} cancelled\n" and err == ""
    assert run.wait(timeout=30) == 130, run.transcript()
    events = run.events()
    assert events[-1]["type"] == "session.finished" and events[-1]["status"] == "cancelled"
    exits = {e["agent"]: e["reason"] for e in events if e["type"] == "agent.exited"}
    assert exits and set(exits.values()) == {"shutdown"}, exits  # told to stop, not pondering
    code, out, err = cancel(redis_url, SESSION)  # now it has finished
    assert (code, out) == (2, ""), err
    assert err.startswith(f"baton cancel: session {SESSION} has finished (cancelled)"), err


def test_cancel_refuses_an_unknown_session_and_writes_nothing(redis_url: str) -> None:
    code, out, err = cancel(redis_url, "s-nosuch")
    assert (code, out) == (2, ""), err
    (line,) = err.splitlines()
    assert line.startswith("baton cancel: no session s-nosuch on this bus"), line
    with redis.Redis.from_url(redis_url) as admin:
        assert list(admin.scan_iter(match="baton:{s-nosuch}:*")) == []


def lead_record(redis_url: str, session: str, lease_s: float) -> None:
    """A lead record that says running, as a lead writes it (``lease_s`` 0: the lead died)."""

    async def write() -> None:
        async with open_bus(redis_url) as bus:
            await bus.records.hold_lead(session, "lead-elsewhere", lease_s, {"status": "running"})

    anyio.run(write)


def test_cancel_refuses_a_session_whose_lead_died(redis_url: str) -> None:
    lead_record(redis_url, "s-orphan", lease_s=0)
    code, out, err = cancel(redis_url, "s-orphan")
    assert (code, out) == (2, ""), err
    (line,) = err.splitlines()
    assert "its lead is gone" in line and "`baton resume s-orphan`" in line, line
    assert lead_inbox(redis_url, "s-orphan") == 0


def test_a_lead_that_does_not_act_within_the_timeout_is_said_and_the_cancel_stays(
    redis_url: str,
) -> None:
    """A live lead (its lease held) that reads nothing: exit 1 and one line saying why; the
    shutdown waits in its inbox for its next look."""
    lead_record(redis_url, "s-busy", lease_s=60)
    code, out, err = cancel(redis_url, "s-busy", "--timeout", "0.3")
    assert (code, out) == (1, ""), err
    (line,) = err.splitlines()
    assert line.startswith("baton cancel: session s-busy did not end within 0.3 s"), line
    assert lead_inbox(redis_url, "s-busy") == 1
    code, out, err = cancel(redis_url, "s-busy", "--no-wait")
    assert code == 0 and "cancel sent" in out, err
