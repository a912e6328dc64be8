"""``baton upload`` answers a sub-agent's question for a file from another process: a session on
Redis whose built-in ``reviewer`` runs on a ``baton worker`` (the offline model calls its
``request_file_upload``), answered by ``baton upload`` as a third process, with the media
directory shared as a deployment shares one volume (docs/media.md).

Bad answers are refused in one line with exit 2 and change nothing: the question stays open for
the good one that follows. In-process (:func:`~tests.cli.helpers.invoke_baton`) where no second
process is needed to show it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

from baton.server import BatonServer, ServerConfig
from tests.cli.helpers import Proc, invoke_baton
from tests.server.helpers import client


def _worker(start: Callable[..., Proc], redis_url: str, env: dict[str, str]) -> None:
    worker = start("worker", "--bus", redis_url, env=env)
    worker.expect(" ready: ", stream="err")


def _run(start: Callable[..., Proc], redis_url: str, session: str, env: dict[str, str]) -> Proc:
    return start(
        "run", "--json", "--bus", redis_url, "--no-local-workers", "--session", session,
        "review my notes",
        env=env,
    )  # fmt: skip


def test_upload_answers_a_sub_agent_on_a_remote_worker_once_and_refuses_bad_answers(
    start: Callable[..., Proc], redis_url: str, env: dict[str, str], tmp_path: Path
) -> None:
    media = tmp_path / "shared-media"
    shared = {**env, "BATON_MEDIA_DIR": str(media), "BATON_UPLOAD_MAX_BYTES": "64"}
    _worker(start, redis_url, shared)
    run = _run(start, redis_url, "s-upload", shared)
    asked = run.expect_event("question.asked", agent="reviewer")
    assert asked["kind"] == "upload" and asked["prompt"] == "review my notes"
    question = asked["question_id"]
    big, notes = tmp_path / "big.txt", tmp_path / "notes.txt"
    big.write_text("x" * 65)
    notes.write_text("a heron, a fox\n")

    def upload(*args: str) -> tuple[int, str, str]:
        return invoke_baton("upload", "s-upload", *args, "--bus", redis_url, env=shared)

    refused = [
        (upload(question, str(big)), "over 64 bytes"),
        (upload(question, "--url", "file:///etc/passwd"), "upload the file instead"),
        (upload(question, str(tmp_path / "missing.txt")), "cannot read"),
        (upload("q-unknown", str(notes)), "no such question was asked"),
        (upload(question), "give exactly one of FILE, --url URL or --cancel"),
        (upload(question, str(notes), "--cancel"), "give exactly one of"),
    ]
    for (code, _, err), said in refused:
        assert code == 2 and said in err, err
        assert len(err.strip().splitlines()) == 1, err
    assert not media.exists() or not list(media.rglob("*upload*"))  # nothing was stored

    code, out, err = upload(question, str(notes))
    assert code == 0, err
    assert question in out and "uploaded notes.txt as file://" in out
    answered = run.expect_event("question.answered", question_id=question)
    assert answered["outcome"] == "provided" and answered["name"] == "notes.txt"
    [stored] = media.rglob("reviewer-upload-*-notes.txt")
    assert stored.read_text() == "a heron, a fox\n" and answered["url"] == stored.as_uri()
    assert run.wait() == 0, run.transcript()
    finished = run.events()[-1]
    assert finished["status"] == "completed" and answered["url"] in finished["media_urls"]

    code, _, err = upload(question, "--cancel")
    assert code == 2 and "already answered" in err  # one answer per question


def test_upload_cancel_declines_the_tool_and_the_agent_says_so(
    start: Callable[..., Proc], redis_url: str, env: dict[str, str]
) -> None:
    _worker(start, redis_url, env)
    run = _run(start, redis_url, "s-cancel", env)
    question = run.expect_event("question.asked", agent="reviewer")["question_id"]
    code, out, err = invoke_baton(
        "upload", "s-cancel", question, "--cancel", "--bus", redis_url, env=env
    )
    assert code == 0 and "cancelled" in out, err
    assert run.expect_event("question.answered", question_id=question)["outcome"] == "cancelled"
    result = run.expect_event("agent.result", agent="reviewer")
    assert result["content"].startswith("Not done") and "the user cancelled" in result["content"]
    assert run.wait() == 0, run.transcript()


def test_watch_shows_the_question_and_the_command_that_answers_it(
    start: Callable[..., Proc], redis_url: str, env: dict[str, str]
) -> None:
    _worker(start, redis_url, env)
    watch = start("watch", "s-watched", "--wait", "--bus", redis_url, env=env)
    run = _run(start, redis_url, "s-watched", env)
    question = run.expect_event("question.asked", agent="reviewer")["question_id"]
    shown = watch.expect("asks for a file")
    assert shown.strip() == f"? reviewer asks for a file: review my notes [{question}]"
    hint = watch.expect("baton upload", stream="err")
    assert f"`baton upload s-watched {question} FILE` (or --url URL, or --cancel)" in hint
    code, _, err = invoke_baton(
        "upload", "s-watched", question, "--url", "https://example.com/notes.txt",
        "--bus", redis_url,
        env=env,
    )  # fmt: skip
    assert code == 0, err
    shown = watch.expect(f"· {question}")
    assert shown.strip() == f"· {question} provided: https://example.com/notes.txt"
    assert run.wait() == 0, run.transcript()
    assert watch.wait() == 0, watch.transcript()


@pytest.mark.parametrize("answer", [["--url", "https://example.com/a.txt"], ["--cancel"]])
def test_upload_on_the_in_process_bus_says_it_cannot_reach_it(
    answer: list[str], env: dict[str, str]
) -> None:
    code, _, err = invoke_baton("upload", "s-any", "q1", *answer, env=env)
    assert code == 2 and "memory://" in err and len(err.strip().splitlines()) == 1, err


async def test_the_http_api_answers_a_sub_agent_on_a_remote_worker(
    start: Callable[..., Proc], redis_url: str, env: dict[str, str], tmp_path: Path
) -> None:
    """A third process on the bus, ``baton serve``'s app here, answers by ``POST
    /sessions/{id}/questions/{id}``: the file goes into the media directory the worker shares."""
    media = tmp_path / "shared-media"
    shared = {**env, "BATON_MEDIA_DIR": str(media)}
    _worker(start, redis_url, shared)
    run = _run(start, redis_url, "s-http", shared)
    asked = await anyio.to_thread.run_sync(
        lambda: run.expect_event("question.asked", agent="reviewer")
    )
    config = ServerConfig(port=0, bus_url=redis_url, media_dir=media)
    async with BatonServer(config) as server, client(server) as http:
        route = f"/sessions/s-http/questions/{asked['question_id']}"
        state = (await http.get("/sessions/s-http/state")).json()
        assert [q["id"] for q in state["open_questions"]] == [asked["question_id"]]
        sent = await http.post(route, files={"file": ("notes.txt", b"two herons\n", "text/plain")})
        assert sent.status_code == 200, sent.text
        answered = await anyio.to_thread.run_sync(
            lambda: run.expect_event("question.answered", question_id=asked["question_id"])
        )
        [stored] = media.rglob("reviewer-upload-*-notes.txt")
        assert answered["url"] == stored.as_uri() == sent.json()["url"]
        assert await anyio.to_thread.run_sync(run.wait) == 0, run.transcript()
        assert stored.as_uri() in run.events()[-1]["media_urls"]
        again = await http.post(route, json={"cancel": True})
        assert again.status_code == 409
