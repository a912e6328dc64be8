"""Issue 22: ``baton resume`` of a session that waits for an approval shows what it waits on and
applies ``--approve`` to it.

The ``publisher`` (its ``publish`` needs approval) runs on a ``baton worker`` and asks; the
``baton run`` that started the session (``--approve ask``, piped: answered with ``baton
approve``) is killed (kill -9) while it waits. The resume used to show an empty lead panel, no
``baton approve`` line, and to ignore ``--approve auto``: the publisher kept its spawn request's
``ask`` and waited out its 120 s approval timeout, then was declined. Now the resume first shows
where the session stands, gives the ``baton approve`` line of what waits (``ask``), or answers it
by its new policy (``auto``/``deny``). Real processes (kill -9 needs one); the approval answered
in-process, as a person in another shell would.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import pytest
import redis
from typer.testing import CliRunner

from baton.cli.app import app
from tests.cli.helpers import SHORT_LEAD_LEASE, Proc


def on_stderr(proc: Proc, text: str) -> str:
    """The stderr line holding ``text``: already read (while stdout was awaited), or to come."""
    seen = [line for line in proc.err if text in line]
    return seen[0] if seen else proc.expect(text, stream="err")


TASK = "publish a haiku"


@pytest.fixture
def env(env: dict[str, str]) -> dict[str, str]:
    """The CLI environment with a short lead lease: these tests wait one out after a kill."""
    return {**env, **SHORT_LEAD_LEASE}


QUICK_S = 40.0
"""Well under the publisher's 120 s approval timeout, lease lapses included: no timeout decided."""


def logged(redis_url: str, session: str) -> list[dict[str, Any]]:
    with redis.Redis.from_url(redis_url, decode_responses=True) as client:
        entries = cast(
            list[tuple[str, dict[str, str]]], client.xrange(f"baton:{{{session}}}:events")
        )
    return [json.loads(fields["event"]) for _, fields in entries]


def killed_while_waiting(
    start: Callable[..., Proc], redis_url: str, env: dict[str, str], session: str
) -> str:
    """A worker's publisher waiting for approval in a session whose run was killed; its call id."""
    worker = start("worker", "--bus", redis_url, "--lease", "5", env=env)
    worker.expect(" ready: ", stream="err")
    run = start("run", "--json", "--bus", redis_url, "--no-local-workers", "--session", session,
                TASK, env=env)  # fmt: skip
    asked = run.expect_event("approval.requested", agent="publisher")
    run.kill()
    assert run.proc.returncode == -9, run.transcript()
    return str(asked["calls"][0]["call_id"])


def published(media: Path) -> list[Path]:
    return sorted(media.rglob("publisher-*.txt"))


def test_resume_with_approve_auto_answers_the_approval_that_waits(
    start: Callable[..., Proc], redis_url: str, env: dict[str, str], tmp_path: Path
) -> None:
    session = "s-waits-auto"
    call_id = killed_while_waiting(start, redis_url, env, session)
    resumed = start("resume", session, "--bus", redis_url, "--approve", "auto", "--json", env=env)
    assert resumed.wait(timeout=QUICK_S) == 0, resumed.transcript()
    decided = [e for e in logged(redis_url, session) if e["type"] == "approval.decided"]
    assert [(e["call_id"], e["approved"]) for e in decided] == [(call_id, True)], decided
    assert decided[0]["reason"] == "approved by `baton resume --approve auto`"
    assert published(tmp_path / "media"), "the publisher's call never ran"
    assert logged(redis_url, session)[-1]["status"] == "completed"


def test_resume_shows_what_waits_and_the_line_to_answer_it(
    start: Callable[..., Proc], redis_url: str, env: dict[str, str], tmp_path: Path
) -> None:
    session = "s-waits-ask"
    call_id = killed_while_waiting(start, redis_url, env, session)
    resumed = start("resume", session, "--bus", redis_url, env=env)  # ask, piped: plain lines
    resumed.expect(f"── session {session} ")  # the resumed session's header, then its state:
    resumed.expect(lambda line: line.startswith("· publisher spawned (profile publisher)"))
    waiting = resumed.expect(lambda line: line.startswith("? publisher asks approval"))
    assert f"[{call_id}]" in waiting and "publish(" in waiting
    hint = on_stderr(resumed, f"`baton approve {session} {call_id} --yes|--no`")
    assert hint.startswith("baton resume: publisher waits for approval of publish: "), hint
    answer = CliRunner().invoke(app, ["approve", session, call_id, "--yes", "--bus", redis_url])
    assert answer.exit_code == 0, answer.output
    assert resumed.wait(timeout=QUICK_S) == 0, resumed.transcript()
    assert published(tmp_path / "media")
    assert logged(redis_url, session)[-1]["status"] == "completed"


def test_resume_shows_a_question_for_a_file_and_the_line_to_answer_it(
    start: Callable[..., Proc], redis_url: str, env: dict[str, str], tmp_path: Path
) -> None:
    session = "s-waits-file"
    worker = start("worker", "--bus", redis_url, "--lease", "5", env=env)
    worker.expect(" ready: ", stream="err")
    run = start("run", "--json", "--bus", redis_url, "--no-local-workers", "--session", session,
                "review my notes", env=env)  # fmt: skip
    question = run.expect_event("question.asked", agent="reviewer")["question_id"]
    run.kill()
    resumed = start("resume", session, "--bus", redis_url, "--approve", "auto", env=env)
    waiting = resumed.expect(lambda line: line.startswith("? reviewer asks for a file"))
    assert waiting.strip().endswith(f"[{question}]")  # no policy answers a question for a file
    hint = on_stderr(resumed, f"`baton upload {session} {question} FILE`")
    assert hint.startswith("baton resume: reviewer waits for a file: "), hint
    notes = tmp_path / "notes.txt"
    notes.write_text("notes\n")
    media = str(tmp_path / "media")  # the session's: the lead takes file:// media only there
    answer = CliRunner().invoke(
        app, ["upload", session, question, str(notes), "--bus", redis_url, "--media-dir", media]
    )
    assert answer.exit_code == 0, answer.output
    assert resumed.wait(timeout=QUICK_S) == 0, resumed.transcript()
    [stored] = (tmp_path / "media").rglob("reviewer-upload-*-notes.txt")
    finished = logged(redis_url, session)[-1]
    assert finished["status"] == "completed" and stored.as_uri() in finished["media_urls"]
