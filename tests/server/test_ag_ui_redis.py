"""The AG-UI endpoint on Redis, its sub-agents on two ``baton worker`` processes (the server has
no worker of its own), driven by the real ``@ag-ui/client`` under Node (one process for the
file): two paintings, then on the same thread an approval as an interrupt, approved by a resume.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from baton.server import BatonServer, ServerConfig
from baton.session.compose import resolve_profiles
from baton.testing import RedisServer
from tests.cli.helpers import clean_env, processes
from tests.server.ag_ui_helpers import (
    Json,
    case,
    every_event,
    of_type,
    parse_all,
    run_cases,
    terminal,
)

pytestmark = [pytest.mark.browser, pytest.mark.process]  # Node, and `baton worker`s
PREFIX = "agui-redis"


async def _serve_and_run(tmp: Path, url: str) -> Json:
    config = ServerConfig(
        port=0,
        bus_url=url,
        prefix=PREFIX,
        media_dir=tmp / "media",  # the workers' media directory: served at /media/...
        session_defaults={"local_workers": False},
    )
    async with BatonServer(config, profiles=resolve_profiles(None)) as server:
        settings = {
            "servers": {"redis": {"url": server.url, "token": None}},
            "cases": ["redis_workers"],
            "release": str(tmp / "release"),
        }
        results: Json = await anyio.to_thread.run_sync(run_cases, settings)
    return results


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory, redis_server: RedisServer) -> Json:
    tmp = tmp_path_factory.mktemp("ag-ui-redis")
    env = clean_env(tmp)
    workers = []
    with processes() as start:
        for _ in range(2):
            worker = start(
                "worker", "--bus", redis_server.url, "--prefix", PREFIX, "--concurrency", "4",
                env=env,
            )  # fmt: skip
            line = worker.expect(" ready: ", stream="err")
            workers.append(line.split("baton worker ", 1)[1].split()[0])
        found = anyio.run(_serve_and_run, tmp, redis_server.url)
    found["_workers"] = workers
    return found


def test_two_paintings_run_on_the_workers_and_stream_as_two_invocations(results: Json) -> None:
    first = case(results, "redis_workers")["first"]
    assert first["error"] is None, first["error"]
    started = of_type(first, "SUBAGENT_STARTED")
    assert {e["name"] for e in started} == {"painter", "painter-2"}
    finished = of_type(first, "SUBAGENT_FINISHED")
    assert {e["subagentRunId"] for e in finished} == {e["subagentRunId"] for e in started}
    urls = [url for e in finished for url in e["result"]["mediaUrls"]]
    assert len(urls) == 2 and all("/media/" in url for url in urls)
    cards = [e["content"]["placement"] for e in of_type(first, "ACTIVITY_SNAPSHOT")]
    cards += [
        op["value"]
        for e in of_type(first, "ACTIVITY_DELTA")
        for op in e["patch"]
        if op["path"] == "/placement"
    ]
    hosts = {card.removeprefix("worker ").split("/")[0] for card in cards if card}
    assert hosts and hosts <= set(results["_workers"])  # claimed by the baton workers
    assert terminal(first)["type"] == "RUN_FINISHED"


def test_an_approval_asked_on_a_worker_is_an_interrupt_and_a_resume_approves_it(
    results: Json,
) -> None:
    found = case(results, "redis_workers")
    asked, answered = found["asked"], found["answered"]
    finished = terminal(asked)
    assert finished["outcome"]["type"] == "interrupt"
    [interrupt] = finished["outcome"]["interrupts"]
    assert interrupt["reason"] == "tool_approval" and interrupt["subagentRunId"]
    # a follow-up after the thread's session ended: the thread's next session
    assert asked["events"][0]["threadId"] == found["first"]["events"][0]["threadId"]
    snapshot = of_type(asked, "STATE_SNAPSHOT")[0]["snapshot"]
    assert snapshot["session"].endswith(".t2")
    assert answered["error"] is None, answered["error"]
    assert terminal(answered)["type"] == "RUN_FINISHED"
    resolved = [e for e in of_type(answered, "CUSTOM") if e["name"] == "baton.interrupt.resolved"]
    assert [e["value"]["outcome"] for e in resolved] == ["approved"]
    assert parse_all(every_event(results)) > 50
