"""A2A contexts on ``baton serve``, through the SDK's client over real HTTP on a real Redis: a
message naming only the context of an ended task starts the context's next task, whose lead is
given the earlier exchange; one naming a context whose newest task runs follows that task up;
an ended task named by ``taskId`` stays refused; tokens stay per task."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from a2a.client.errors import A2AClientError
from a2a.types import GetTaskRequest, ListTasksRequest, StreamResponse, TaskState
from a2a.utils.errors import InvalidParamsError, TaskNotFoundError, UnsupportedOperationError

from baton.server.a2a.contexts import (
    Turn,
    context_of,
    exchange_note,
    exchange_text,
    parse,
    request_of,
    tasks_of,
)
from baton.server.access import issue
from tests.conftest import BusFactory
from tests.server.a2a_helpers import (
    a2a_client,
    collect,
    hang_up,
    serving,
    state_of,
    status_text,
    task_id_of,
    user_message,
)
from tests.server.helpers import TOKEN

COMPLETED = TaskState.TASK_STATE_COMPLETED
WORKING = TaskState.TASK_STATE_WORKING
PAINTER = """
[profiles.painter]
description = "Paints pictures from a description and returns the image URLs."
system_prompt = "[baton:subagent] Paint the task with generate_image, then report."
tools = ["generate_image"]
"""
"""One painter: the offline lead splits a task with an earlier exchange into many lines, and
sends each to an agent it names or round-robin; here every line is painted."""
NORTH = """
[profiles.north]
description = "Surveys the north; works until released."
system_prompt = "[baton:subagent] Survey with hold, then report."
tools = ["tests.support.tools:hold"]
"""


@pytest.fixture
def backend() -> str:
    return "redis"  # a context's tasks are sessions on the bus, read back by any server


def urls_of(responses: list[StreamResponse]) -> list[str]:
    return [
        part.url
        for response in responses
        if response.HasField("artifact_update")
        for part in response.artifact_update.artifact.parts
        if part.HasField("url")
    ]


async def test_a_message_to_an_ended_tasks_context_starts_its_next_task(
    make_bus: BusFactory, tmp_path: Path
) -> None:
    async with make_bus() as bus, serving(bus, tmp_path, PAINTER) as server:
        async with a2a_client(server) as client:
            first = await collect(client.send_message(user_message("paint a fox")))
            context = task_id_of(first[0])
            second = await collect(client.send_message(user_message("paint a heron",
                                                                    context=context)))  # fmt: skip
            later = task_id_of(second[0])
            third = await collect(client.send_message(user_message("paint an owl",
                                                                   context=context)))  # fmt: skip
            got = await client.get_task(GetTaskRequest(id=later))
            listed = await client.list_tasks(ListTasksRequest(context_id=context))
            with pytest.raises(UnsupportedOperationError, match=f"only contextId {context}"):
                await collect(client.send_message(user_message("more", task=later)))
            with pytest.raises(InvalidParamsError, match=f"send contextId {context}"):
                await collect(client.send_message(user_message("more", context=later)))
            with pytest.raises(InvalidParamsError, match="is in context"):
                await collect(client.send_message(user_message("more", task=later,
                                                               context="s-other")))  # fmt: skip
            with pytest.raises(TaskNotFoundError, match="no context 's-nowhere'"):
                await collect(client.send_message(user_message("paint", context="s-nowhere")))
        record = await bus.records.lead(task_id_of(third[0]))

    assert state_of(first[-1]) == state_of(second[-1]) == state_of(third[-1]) == COMPLETED
    assert later == f"{context}.t2" and task_id_of(third[0]) == f"{context}.t3"
    assert {r.status_update.context_id for r in second if r.HasField("status_update")} == {context}
    assert second[0].task.context_id == context
    assert got.context_id == context and got.status.state == COMPLETED
    assert got.history[0].parts[0].text == "paint a heron"  # the request as the user sent it
    assert urls_of(second) and all(f"/media/{later}/" in url for url in urls_of(second))
    assert [t.id for t in listed.tasks] == [f"{context}.t3", later, context]
    assert {t.context_id for t in listed.tasks} == {context}
    # The third task's lead was given both earlier exchanges, oldest first, ahead of its task.
    history = json.loads(record["history"])
    note, asked, *_ = (m["content"] for m in history if m["role"] == "user")
    assert note.startswith(
        f"[context from session] Earlier in this conversation (A2A context {context})"
    )
    fox, heron = note.index("request: paint a fox"), note.index("request: paint a heron")
    assert fox < heron and "answer: Results from 1 task(s), by painter" in note
    assert asked == "paint an owl"  # the task is the request as the client wrote it


async def test_a_context_whose_newest_task_runs_follows_that_task_up(
    make_bus: BusFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    release = tmp_path / "release"
    monkeypatch.setenv("BATON_TEST_RELEASE", str(release))
    async with make_bus() as bus, serving(bus, tmp_path, NORTH + PAINTER) as server:
        async with a2a_client(server) as client:
            first = await collect(client.send_message(user_message("paint a fox")))
            context = task_id_of(first[0])
            stream = client.send_message(user_message("survey the north", context=context))
            running = task_id_of(await anext(stream))
            async for response in stream:  # until the surveyor is at work
                if state_of(response) == WORKING and "north" in status_text(response):
                    break
            await hang_up(stream)
            follow = client.send_message(user_message("paint a heron", context=context))
            followed: list[StreamResponse] = []
            async for response in follow:
                followed.append(response)
                if urls_of(followed):
                    break
            await hang_up(follow)
            release.touch()
            final = await collect(client.send_message(user_message("thanks", task=running)))
            listed = await client.list_tasks(ListTasksRequest(context_id=context))

    assert running == f"{context}.t2"
    assert {task_id_of(r) for r in followed} == {running}  # the running task, not a new one
    assert state_of(final[-1]) == COMPLETED
    assert [t.id for t in listed.tasks] == [running, context]


async def test_a_session_token_reaches_its_own_task_only_not_its_context(
    make_bus: BusFactory, tmp_path: Path
) -> None:
    async with make_bus() as bus, serving(bus, tmp_path, PAINTER, token=TOKEN) as server:
        async with a2a_client(server, token=TOKEN) as admin:
            first = await collect(admin.send_message(user_message("paint a fox")))
            context = task_id_of(first[0])
            second = await collect(admin.send_message(user_message("paint a heron",
                                                                   context=context)))  # fmt: skip
        later = task_id_of(second[0])
        tokens = await issue(bus, context)
        async with a2a_client(server, token=tokens["write"]) as writer:
            own = await writer.get_task(GetTaskRequest(id=context))
            for refused in (
                user_message("paint an owl", context=context),  # might start a task: admin's
                user_message("more", task=later),  # another task of the same context
                user_message("more", task=later, context=context),
            ):
                with pytest.raises(A2AClientError, match="403"):
                    await collect(writer.send_message(refused))
            with pytest.raises(A2AClientError, match="403"):
                await writer.get_task(GetTaskRequest(id=later))
            with pytest.raises(UnsupportedOperationError, match="terminal state"):  # let through
                await collect(writer.send_message(user_message("more", task=context)))
        sessions = await bus.log.sessions()

    assert own.context_id == context and later == f"{context}.t2"
    assert sorted(sessions) == sorted([context, later])  # the refused messages started nothing


def test_a_tasks_context_is_written_in_its_id() -> None:
    assert parse("s-0123456789ab") == ("s-0123456789ab", 1)
    assert parse("s-0123456789ab.t2") == ("s-0123456789ab", 2)
    assert parse("s-1.t12") == ("s-1", 12)
    assert parse("s-1.t1") == ("s-1.t1", 1)  # task 1 has the context's own id
    assert parse("s-1.t02") == ("s-1.t02", 1)
    assert context_of("a.b.t3") == "a.b"
    assert tasks_of("s-1", ["s-1.t10", "s-10", "s-1", "s-1.t2", "s-2.t2"]) == [
        "s-1",
        "s-1.t2",
        "s-1.t10",
    ]


def test_the_earlier_exchange_is_bounded_and_oldest_first() -> None:
    turns = [Turn(task=f"s-1.t{n}", request=f"ask {n} " + "x" * 3000, answer=f"said {n}")
             for n in range(2, 12)]  # fmt: skip
    text = exchange_text(turns)
    assert text is not None and len(text) < 13_000
    assert "older task(s) left out" in text
    assert text.index("(task s-1.t10)") < text.index("(task s-1.t11)")
    assert "(task s-1.t2)" not in text  # the oldest went first
    assert "(cut short)" in text  # each request bounded
    assert exchange_text([]) is None
    assert exchange_note("s-1", text).startswith("Earlier in this conversation (A2A context s-1)")
    assert exchange_note("s-1", None) == ""
    # A task stored with the exchange ahead of it (before it became its own note) gives back its
    # request, whatever the exchange or the request itself say.
    tricky = f"[The new request]\nnot this\n{text}"
    head = (
        "[Earlier in this conversation (A2A context s-1), oldest first: "
        f"{len(tricky)} characters, then the new request]\n"
    )
    old = f"{head}{tricky}\n\n[The new request]\npaint [The new request]\n"
    assert request_of(old) == "paint [The new request]\n"
    assert request_of("just a task") == "just a task"
