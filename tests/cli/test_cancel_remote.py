"""Ctrl-C on ``baton run`` stops the busy sub-agents of remote ``baton worker`` processes.

Before, the run exited 130 but the remote agents ran their tools to the end (reason ``finished``),
logged events after ``session.finished``, and left their ``shutdown`` unread and their results in
the lead's inbox. Now the ``shutdown`` reaches the agent mid-tool: it leaves with ``shutdown``
within 2 s, everything it logs comes before ``session.finished``, and no inbox holds anything.
The log and the streams are read straight from Redis, after the worker said the agent exited.
"""

from __future__ import annotations

import json
import signal
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import redis

from tests.cli.helpers import Proc

SESSION = "s-cancel-remote"
INTERRUPT_S = 2.0


def logged(client: redis.Redis, session: str) -> list[dict[str, Any]]:
    """The session's whole event log, in order."""
    entries = cast(list[tuple[str, dict[str, str]]], client.xrange(f"baton:{{{session}}}:events"))
    return [json.loads(fields["event"]) for _, fields in entries]


def test_sigint_on_run_interrupts_busy_remote_tools_and_leaves_nothing(
    start: Callable[..., Proc], redis_url: str, profiles_file: Path, env: dict[str, str]
) -> None:
    worker = start(
        "worker", "--bus", redis_url, "--profiles", str(profiles_file), "--lease", "5", env=env
    )
    worker.expect(" ready: ", stream="err")
    run = start(
        "run", "--json", "--bus", redis_url, "--no-local-workers", "--session", SESSION,
        "--profiles", str(profiles_file), "--profile", "sleeper",
        "ponder the sea and ponder the sky",
        env=env,
    )  # fmt: skip
    run.expect_event("tool.call", agent="sleeper")  # ponder: 300 s unless interrupted
    sent = datetime.now(UTC)
    run.proc.send_signal(signal.SIGINT)
    assert run.wait(timeout=10) == 130, run.transcript()
    exited = worker.expect(f"{SESSION}/sleeper exited", stream="err", timeout=10)
    assert exited.rstrip().endswith("exited: shutdown"), exited

    client = redis.Redis.from_url(redis_url, decode_responses=True)
    try:
        events = logged(client, SESSION)
        kinds = [e["type"] for e in events]
        assert kinds.count("session.finished") == 1 and kinds[-1] == "session.finished", kinds
        assert events[-1]["status"] == "cancelled"
        exits = {e["agent"]: e["reason"] for e in events if e["type"] == "agent.exited"}
        assert set(exits.values()) == {"shutdown"}, exits
        # the bound is on the agent itself, from the signal to its exit (logged by the remote
        # worker as it left), whatever baton run then took to end
        (left,) = [e for e in events if e["type"] == "agent.exited" and e["agent"] == "sleeper"]
        elapsed = (datetime.fromisoformat(left["ts"]) - sent).total_seconds()
        assert 0 < elapsed < INTERRUPT_S, f"the remote agent took {elapsed:.2f} s to stop"
        # the running call was cut, not run to its end
        cut = [
            result
            for e in events
            if e["type"] == "round.ended" and e["agent"].startswith("sleeper")
            for result in e["results"]
        ]
        assert cut and all(r["synthetic"] and "pondered" not in r["content"] for r in cut), cut
        # nothing left behind: every message read and acked (an acked entry leaves its stream)
        inboxes = cast(list[str], client.keys(f"baton:{{{SESSION}}}:inbox:*"))
        assert {key.rsplit(":", 1)[1] for key in inboxes} >= {"lead", *exits}
        for key in inboxes:
            assert client.xlen(key) == 0, (key, client.xrange(key))
        for key in cast(
            list[str], client.keys("baton:spawn:*")
        ):  # the spawn requests were acked too
            if client.type(key) == "stream":
                assert client.xlen(key) == 0, key
    finally:
        client.close()
    # the worker hosts nothing any more and goes on serving
    assert worker.proc.poll() is None
