"""Issue 22: ``baton watch S`` of a running session first shows where it stands, then follows.

A session that waited (here: for an approval) showed nothing to a new watcher until a new event
came, so a person sent to answer the approval could not see its call id. Now the watch shows the
session's start, its running sub-agents and what waits, with the ``baton approve`` line on
stderr — in plain lines and as the logged events in ``--json`` — then follows to the end. The
session runs in a real ``baton run`` (another shell); the watchers are processes too, read line by
line as they print (only a process shows what comes *before* the session ends).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from typer.testing import CliRunner

from baton.cli.app import app
from tests.cli.helpers import Proc


def on_stderr(proc: Proc, text: str) -> str:
    """The stderr line holding ``text``: already read (while stdout was awaited), or to come."""
    seen = [line for line in proc.err if text in line]
    return seen[0] if seen else proc.expect(text, stream="err")


SESSION = "s-watched"
SOON_S = 20.0
"""The watch shows the state at once; before, it showed nothing until the session moved on."""


def test_watch_shows_the_state_and_the_call_to_approve_then_follows(
    start: Callable[..., Proc], redis_url: str, env: dict[str, str], tmp_path: Path
) -> None:
    run = start(
        "run", "--json", "--bus", redis_url, "--session", SESSION, "publish a haiku", env=env
    )  # fmt: skip  (ask, piped: answered with `baton approve`)
    asked = run.expect_event("approval.requested", agent="publisher")
    call_id = asked["calls"][0]["call_id"]

    plain = start("watch", SESSION, "--bus", redis_url, env=env)
    plain.expect(f"── session {SESSION} (offline model): publish a haiku", timeout=SOON_S)
    plain.expect(lambda line: line.startswith("· publisher spawned (profile publisher)"))
    waiting = plain.expect(lambda line: line.startswith("? publisher asks approval for publish("))
    assert f"[{call_id}]" in waiting, waiting
    hint = on_stderr(plain, f"`baton approve {SESSION} {call_id} --yes|--no`")
    assert hint.startswith("baton watch: publisher waits for approval of publish: "), hint

    as_json = start("watch", SESSION, "--bus", redis_url, "--json", env=env)
    first = [json.loads(as_json.expect(lambda line: line.startswith("{"), timeout=SOON_S))]
    while first[-1]["type"] != "approval.requested":
        first.append(json.loads(as_json.expect(lambda line: line.startswith("{"))))
    kinds = [e["type"] for e in first]  # the start, the publisher (its latest progress), the ask
    assert kinds in (
        ["session.started", "agent.spawned", "approval.requested"],
        ["session.started", "agent.spawned", "agent.progress", "approval.requested"],
    ), kinds
    assert first[-1]["calls"] == asked["calls"]  # the logged request itself

    answer = CliRunner().invoke(app, ["approve", SESSION, call_id, "--yes", "--bus", redis_url])
    assert answer.exit_code == 0, answer.output
    for watcher in (plain, as_json):  # both follow the session to its end
        assert watcher.wait() == 0, watcher.transcript()
    assert any(f"· {call_id} approved" in line for line in plain.out), plain.transcript()
    assert json.loads(as_json.out[-1])["type"] == "session.finished"
    assert run.wait() == 0, run.transcript()
