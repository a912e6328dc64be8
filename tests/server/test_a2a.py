"""``baton serve`` as an A2A 1.0 server, driven by the official SDK's client over real HTTP on a
real Redis: the card, streaming with progress and artifacts, both bindings, resubscribing,
cancelling, an INPUT_REQUIRED round trip, a follow-up in the same context, a task read by
another server on the same bus."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from a2a.client import A2ACardResolver
from a2a.server.context import ServerCallContext
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Part,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
    TaskState,
)
from a2a.utils.errors import (
    ContentTypeNotSupportedError,
    InvalidParamsError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)

from baton.bus.base import Bus, LoggedEvent
from baton.bus.tail import tail_events
from baton.server.a2a import handler as handler_module
from baton.server.a2a.handler import BatonRequestHandler
from tests.conftest import BusFactory
from tests.server.a2a_helpers import (
    TERMINAL,
    a2a_client,
    collect,
    hang_up,
    root,
    serving,
    state_of,
    status_text,
    task_id_of,
    user_message,
)
from tests.support.profiles import ARTISTS, SURVEYORS

WORKING = TaskState.TASK_STATE_WORKING
COMPLETED = TaskState.TASK_STATE_COMPLETED
WAIT_S = 20.0
"""A bound on what should happen at once (a failure, not a pause, when it does not)."""


@pytest.fixture
def backend() -> str:
    """Redis only: a task is a session on the bus, which is what makes it outlive a server."""
    return "redis"


def artifact_urls(responses: list[StreamResponse]) -> dict[str, str]:
    """url -> media type of every url part the stream's artifact updates carried."""
    found: dict[str, str] = {}
    for response in responses:
        if response.HasField("artifact_update"):
            for part in response.artifact_update.artifact.parts:
                if part.HasField("url"):
                    found[part.url] = part.media_type
    return found


async def test_the_card_resolves_from_the_root_url(make_bus: BusFactory, tmp_path: Path) -> None:
    async with make_bus() as bus, serving(bus, tmp_path, ARTISTS) as server:
        async with httpx.AsyncClient(trust_env=False) as http:
            card = await A2ACardResolver(http, root(server)).get_agent_card()
        async with a2a_client(server) as client:  # the client takes it from there
            assert task_id_of(await anext(client.send_message(user_message("paint a fox"))))
    assert card.capabilities.streaming is True
    bindings = {i.protocol_binding: i.url for i in card.supported_interfaces}
    assert bindings == {
        "JSONRPC": f"{root(server)}/a2a/jsonrpc",
        "HTTP+JSON": f"{root(server)}/a2a/rest",
    }
    assert [skill.id for skill in card.skills] == ["painter", "sketcher", "publisher"]
    assert card.skills[0].description.startswith("Paints pictures")
    assert not card.security_schemes  # no token: no scheme


async def test_streaming_two_pictures_reports_working_and_ends_completed_with_artifacts(
    make_bus: BusFactory, tmp_path: Path
) -> None:
    async with make_bus() as bus, serving(bus, tmp_path, ARTISTS) as server:
        async with a2a_client(server) as client:
            responses = await collect(
                client.send_message(user_message("paint a fox and paint a heron"))
            )
            task = task_id_of(responses[0])
            got = await client.get_task(GetTaskRequest(id=task))
            listed = await client.list_tasks(ListTasksRequest())
            done = await client.list_tasks(ListTasksRequest(status=COMPLETED, page_size=1))
            working = await client.list_tasks(ListTasksRequest(status=WORKING))
            one = await client.list_tasks(ListTasksRequest(context_id=task))
        async with httpx.AsyncClient(trust_env=False) as http:
            pictures = [await http.get(url) for url in artifact_urls(responses)]
        # Another server on the same bus (this one gone, say) answers for the task too.
        async with serving(bus, tmp_path, ARTISTS) as other, a2a_client(other) as client:
            again = await client.get_task(GetTaskRequest(id=task))

    assert responses[0].HasField("task") and responses[0].task.id == task
    progress = [status_text(r) for r in responses if state_of(r) == WORKING]
    assert any(text.startswith("painter") for text in progress)  # progress, with a message
    assert state_of(responses[-1]) == COMPLETED
    urls = artifact_urls(responses)
    assert len(urls) == 2 and set(urls.values()) == {"image/png"}
    assert all(url.startswith(f"{root(server)}/media/{task}/") for url in urls)
    assert all(p.status_code == 200 and p.content.startswith(b"\x89PNG") for p in pictures)
    assert got.status.state == COMPLETED and got.context_id == task
    assert {p.url for a in got.artifacts for p in a.parts if p.HasField("url")} == set(urls)
    answer = [a for a in got.artifacts if a.artifact_id == "answer"]
    assert answer and answer[0].parts[0].text
    assert [t.id for t in listed.tasks][:1] == [task]
    assert [t.id for t in done.tasks] == [task] and not working.tasks
    assert [t.id for t in one.tasks] == [task] and one.total_size == 1
    assert again.status.state == COMPLETED and len(again.artifacts) == len(got.artifacts)


async def test_the_http_json_binding_sends_and_gets(make_bus: BusFactory, tmp_path: Path) -> None:
    async with make_bus() as bus, serving(bus, tmp_path, ARTISTS) as server:
        async with a2a_client(server, binding="HTTP+JSON", streaming=False) as client:
            (response,) = await collect(client.send_message(user_message("paint a fox")))
            got = await client.get_task(GetTaskRequest(id=response.task.id))
            with pytest.raises(TaskNotFoundError, match="no task 's-nobody'"):  # a 404
                await client.get_task(GetTaskRequest(id="s-nobody"))
            for token in ("²", "9" * 5000, "-1"):  # a digit to str.isdigit, not to int()
                with pytest.raises(InvalidParamsError, match="page_token"):
                    await client.list_tasks(ListTasksRequest(page_token=token))
    assert response.task.status.state == COMPLETED  # blocking: answered at the end
    assert got.status.state == COMPLETED
    assert any(p.media_type == "image/png" for a in got.artifacts for p in a.parts)


async def test_resubscribe_after_a_disconnect_and_follow_up_in_the_same_context(
    make_bus: BusFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    release = tmp_path / "release"
    monkeypatch.setenv("BATON_TEST_RELEASE", str(release))
    async with make_bus() as bus, serving(bus, tmp_path, SURVEYORS + ARTISTS) as server:
        async with a2a_client(server) as client:
            stream = client.send_message(user_message("survey the north"))
            first = await anext(stream)
            task = task_id_of(first)
            async for response in stream:  # until the surveyor is at work, then hang up
                if state_of(response) == WORKING and "north" in status_text(response):
                    break
            await hang_up(stream)

            follow = client.send_message(user_message("paint a heron", context=task))
            after_follow: list[StreamResponse] = []
            async for response in follow:  # the follow-up's picture, in the same task
                after_follow.append(response)
                if artifact_urls(after_follow):
                    break
            await hang_up(follow)

            resumed = client.subscribe(SubscribeToTaskRequest(id=task))
            snapshot = await anext(resumed)
            release.touch()
            rest = await collect(resumed)
            final = await client.get_task(GetTaskRequest(id=task))

    assert snapshot.HasField("task") and snapshot.task.id == task
    assert snapshot.task.status.state == WORKING
    assert {task_id_of(r) for r in after_follow} == {task}
    assert state_of(rest[-1]) in TERMINAL
    assert final.status.state == COMPLETED
    heron = artifact_urls(after_follow)
    assert heron and set(heron) <= {p.url for a in final.artifacts for p in a.parts}


async def test_cancel_ends_the_task_canceled(make_bus: BusFactory, tmp_path: Path) -> None:
    async with make_bus() as bus, serving(bus, tmp_path, SURVEYORS) as server:
        async with a2a_client(server) as client:
            stream = client.send_message(user_message("sleep on the riddle"))
            task = task_id_of(await anext(stream))
            async for response in stream:
                if state_of(response) == WORKING and "sleeper" in status_text(response):
                    break
            await hang_up(stream)
            cancelled = await client.cancel_task(CancelTaskRequest(id=task))
            with pytest.raises(TaskNotCancelableError, match="already ended"):
                await client.cancel_task(CancelTaskRequest(id=task))
            with pytest.raises(UnsupportedOperationError, match="terminal state"):
                await collect(client.send_message(user_message("more", task=task)))
            with pytest.raises(UnsupportedOperationError, match="has ended"):
                await collect(client.subscribe(SubscribeToTaskRequest(id=task)))
    assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
    assert cancelled.metadata["baton.status"] == "cancelled"


async def test_an_approval_is_input_required_and_the_next_message_answers_it(
    make_bus: BusFactory, tmp_path: Path
) -> None:
    async with make_bus() as bus, serving(bus, tmp_path, ARTISTS) as server:
        async with a2a_client(server) as client:
            asked = await collect(client.send_message(user_message("publish the news")))
            task = task_id_of(asked[0])
            waiting = await client.get_task(GetTaskRequest(id=task))
            with anyio.fail_after(WAIT_S):  # a stream ends at INPUT_REQUIRED: at once here
                again = await collect(client.subscribe(SubscribeToTaskRequest(id=task)))
            answered = await collect(client.send_message(user_message("approve", task=task)))
            final = await client.get_task(GetTaskRequest(id=task))

    assert state_of(asked[-1]) == TaskState.TASK_STATE_INPUT_REQUIRED  # the stream ends there
    question = status_text(asked[-1])
    assert "publisher asks to run publish(" in question
    assert waiting.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert [state_of(r) for r in again] == [TaskState.TASK_STATE_INPUT_REQUIRED]
    assert state_of(answered[-1]) == COMPLETED
    said = [status_text(r) for r in answered if r.HasField("status_update")]
    assert said[0] == "1 approval(s) approved"  # at once, before the agent reads it
    assert any(text.startswith("publisher: publish(") and "approved" in text for text in said)
    assert final.status.state == COMPLETED
    assert "publisher: Done: publish the news" in final.status.message.parts[0].text


async def test_bad_bodies_get_clear_errors_and_start_nothing(
    make_bus: BusFactory, tmp_path: Path
) -> None:
    big = "x" * 70_000  # over the default max_body_bytes (64 KiB)
    message = {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": big}]}
    rpc = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
    version = {"A2A-Version": "1.0"}

    async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: counted as it arrives
        yield b'{"message": {"parts": [{"text": "'
        for _ in range(20):
            yield b"y" * 4096
        yield b'"}]}}'

    async with make_bus() as bus, serving(bus, tmp_path, ARTISTS) as server:
        async with httpx.AsyncClient(trust_env=False, headers=version) as http:
            url = root(server)
            oversized = [
                await http.post(f"{url}/a2a/jsonrpc", json=rpc),
                await http.post(f"{url}/a2a/rest/message:send", json={"message": message}),
                await http.post(f"{url}/a2a/rest/message:stream", content=chunks()),
            ]
            unparsable = await http.post(f"{url}/a2a/jsonrpc", content=b"{not json")
            nope = {"jsonrpc": "2.0", "id": 2, "method": "Nope", "params": {}}
            unknown = await http.post(f"{url}/a2a/jsonrpc", json=nope)
        sessions = await bus.log.sessions()

    assert [answer.status_code for answer in oversized] == [413, 413, 413]
    assert all("65536-byte limit" in answer.json()["detail"] for answer in oversized)
    assert unparsable.json()["error"]["code"] == -32700
    assert unknown.json()["error"]["code"] == -32601
    assert sessions == []  # nothing was started


async def test_a_part_baton_cannot_read_is_refused_not_dropped(
    make_bus: BusFactory, tmp_path: Path
) -> None:
    request = user_message("paint this fox")
    request.message.parts.append(Part(url="https://example.com/fox.png", media_type="image/png"))
    async with make_bus() as bus, serving(bus, tmp_path, ARTISTS) as server:
        async with a2a_client(server, streaming=False) as client:
            with pytest.raises(ContentTypeNotSupportedError, match=r"part 1 is url \(image/png\)"):
                await collect(client.send_message(request))
        sessions = await bus.log.sessions()
    assert sessions == []  # refused, not started with the picture silently dropped


async def test_a_stream_closed_mid_way_closes_its_tail_of_the_log_at_once(
    make_bus: BusFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No tail of the bus outlives the stream that follows it (none left to the collector)."""
    release = tmp_path / "release"
    monkeypatch.setenv("BATON_TEST_RELEASE", str(release))
    open_tails: list[str] = []

    async def tracked(bus: Bus, session: str, **kwargs: Any) -> AsyncIterator[LoggedEvent]:
        open_tails.append(session)
        try:
            async for logged in tail_events(bus, session, **kwargs):
                yield logged
        finally:
            open_tails.remove(session)

    monkeypatch.setattr(handler_module, "tail_events", tracked)  # the handler's tails only
    async with make_bus() as bus, serving(bus, tmp_path, SURVEYORS) as server:
        async with a2a_client(server) as client:
            stream = client.send_message(user_message("survey the north"))
            task = task_id_of(await anext(stream))
            await hang_up(stream)
        assert server.ctx is not None
        handler = BatonRequestHandler(server.ctx)
        followed = handler.on_subscribe_to_task(
            SubscribeToTaskRequest(id=task), ServerCallContext()
        )
        with anyio.fail_after(WAIT_S):
            snapshot = await anext(followed)
            release.touch()
            update = await anext(followed)  # from the live tail
        assert open_tails == [task]
        await followed.aclose()
        still_open = list(open_tails)
    assert isinstance(snapshot, Task) and snapshot.id == update.task_id == task
    assert still_open == []
