"""A2A under the server's token rules, through the SDK's client: the card is public and names the
bearer scheme; everything else needs the admin token, or a session's own token for that
session's task only (read: get and subscribe; write: also send and cancel)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from a2a.client.errors import A2AClientError
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    TaskState,
)
from a2a.utils.errors import TaskNotCancelableError

from baton.server.a2a.access import Target, target_of
from baton.server.a2a.messages import verdict_of
from baton.server.access import issue
from tests.conftest import BusFactory
from tests.server.a2a_helpers import a2a_client, collect, root, serving, user_message
from tests.server.helpers import TOKEN
from tests.support.profiles import ARTISTS

COMPLETED = TaskState.TASK_STATE_COMPLETED


@pytest.fixture
def backend() -> str:
    return "redis"  # session tokens are kept on the bus; one backend is enough here


async def test_token_rules_over_both_bindings(make_bus: BusFactory, tmp_path: Path) -> None:
    async with make_bus() as bus, serving(bus, tmp_path, ARTISTS, token=TOKEN) as server:
        async with httpx.AsyncClient(trust_env=False) as http:
            card = (await http.get(f"{root(server)}/.well-known/agent-card.json")).json()
            refused = await http.post(f"{root(server)}/a2a/jsonrpc", json={})
        assert card["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"] == "Bearer"
        assert card["securityRequirements"] == [{"schemes": {"bearer": {}}}]
        assert refused.status_code == 401 and refused.headers["www-authenticate"].startswith(
            "Bearer"
        )

        async with a2a_client(server) as stranger:  # the card is public; the rest is not
            with pytest.raises(A2AClientError, match="401"):
                await collect(stranger.send_message(user_message("paint a fox")))
        async with a2a_client(server, token="not-the-token") as stranger:
            with pytest.raises(A2AClientError, match="401"):
                await stranger.list_tasks(ListTasksRequest())

        async with a2a_client(server, token=TOKEN, streaming=False) as admin:
            (done,) = await collect(admin.send_message(user_message("paint a fox")))
            (other,) = await collect(admin.send_message(user_message("paint a cat")))
        task = done.task.id
        assert done.task.status.state == COMPLETED
        tokens = await issue(bus, task)

        for binding in ("JSONRPC", "HTTP+JSON"):
            async with a2a_client(server, binding=binding, token=tokens["read"]) as reader:
                got = await reader.get_task(GetTaskRequest(id=task))
                assert got.status.state == COMPLETED
                for refused_call in (
                    reader.get_task(GetTaskRequest(id=other.task.id)),  # another task
                    reader.cancel_task(CancelTaskRequest(id=task)),  # a write
                    reader.list_tasks(ListTasksRequest()),  # admin only
                ):
                    with pytest.raises(A2AClientError, match="403"):
                        await refused_call
                with pytest.raises(A2AClientError, match="403"):
                    await collect(reader.send_message(user_message("more", task=task)))
                with pytest.raises(A2AClientError, match="403"):  # a new task: admin only
                    await collect(reader.send_message(user_message("paint an owl")))

        async with a2a_client(server, token=tokens["write"]) as writer:
            with pytest.raises(TaskNotCancelableError):  # let through: the task has ended
                await writer.cancel_task(CancelTaskRequest(id=task))
            with pytest.raises(A2AClientError, match="403"):
                await writer.cancel_task(CancelTaskRequest(id=other.task.id))


async def test_a_403_says_why(make_bus: BusFactory, tmp_path: Path) -> None:
    async with make_bus() as bus, serving(bus, tmp_path, ARTISTS, token=TOKEN) as server:
        tokens = await issue(bus, "s-mine")
        body = {"jsonrpc": "2.0", "id": 1, "method": "CancelTask", "params": {"id": "s-mine"}}
        async with httpx.AsyncClient(trust_env=False) as http:
            bearer = {"Authorization": f"Bearer {tokens['read']}"}
            answer = await http.post(f"{root(server)}/a2a/jsonrpc", json=body, headers=bearer)
    assert answer.status_code == 403
    assert "read-only" in answer.json()["detail"]


async def test_a_session_token_cannot_name_another_task_by_a_second_spelling(
    make_bus: BusFactory, tmp_path: Path
) -> None:
    """The SDK reads ``task_id`` after ``taskId``: the guard must not pass the first alone."""
    async with make_bus() as bus, serving(bus, tmp_path, ARTISTS, token=TOKEN) as server:
        tokens = await issue(bus, "s-mine")
        message = {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "approve"}],
                   "taskId": "s-mine", "task_id": "s-other"}  # fmt: skip
        rpc = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
               "params": {"message": message}}  # fmt: skip
        async with httpx.AsyncClient(trust_env=False) as http:
            bearer = {"Authorization": f"Bearer {tokens['write']}", "A2A-Version": "1.0"}
            answers = [
                await http.post(f"{root(server)}/a2a/jsonrpc", json=rpc, headers=bearer),
                await http.post(
                    f"{root(server)}/a2a/rest/message:send",
                    json={"message": message},
                    headers=bearer,
                ),
            ]
    assert [answer.status_code for answer in answers] == [403, 403]
    assert all("starting a task" in answer.json()["detail"] for answer in answers)


@pytest.mark.parametrize(
    ("method", "path", "body", "target"),
    [
        ("POST", "/a2a/jsonrpc", b'{"method": "GetTask", "params": {"id": "s-1"}}',
         Target("read", "s-1")),
        # Only a context: it may start the context's next task, or reach another of its tasks.
        ("POST", "/a2a/jsonrpc", b'{"method": "SendMessage", "params": {"message": '
         b'{"contextId": "s-1"}}}', Target("admin")),
        ("POST", "/a2a/jsonrpc", b'{"method": "SendMessage", "params": {"message": '
         b'{"taskId": "s-1.t2", "contextId": "s-1"}}}', Target("write", "s-1.t2")),
        ("POST", "/a2a/jsonrpc", b'{"method": "SendMessage", "params": {"message": {}}}',
         Target("admin")),
        ("POST", "/a2a/jsonrpc", b'{"method": "SendMessage", "params": {"message": '
         b'{"taskId": "s-1", "contextId": "s-1"}}}', Target("write", "s-1")),
        # Ambiguous about the task (the SDK keeps the last spelling; "" starts a new task).
        ("POST", "/a2a/jsonrpc", b'{"method": "SendMessage", "params": {"message": '
         b'{"taskId": "s-1", "task_id": "s-2"}}}', Target("admin")),
        ("POST", "/a2a/jsonrpc", b'{"method": "SendMessage", "params": {"message": '
         b'{"contextId": "s-1", "context_id": ""}}}', Target("admin")),
        ("POST", "/a2a/jsonrpc", b'{"method": "SendMessage", "params": {"message": '
         b'{"taskId": "s-1", "contextId": "s-2"}}}', Target("admin")),
        ("POST", "/a2a/jsonrpc", b'{"method": "SendMessage", "params": {"message": '
         b'{"taskId": 1, "contextId": "s-1"}}}', Target("admin")),
        ("POST", "/a2a/rest/message:send", b'{"message": {"contextId": "s-1", '
         b'"context_id": "s-2"}}', Target("admin")),
        ("POST", "/a2a/jsonrpc", b"[]", Target("admin")),
        ("POST", "/a2a/jsonrpc", b"not json", Target("admin")),
        ("GET", "/a2a/rest/tasks/s-1", b"", Target("read", "s-1")),
        ("GET", "/a2a/rest/tenant/tasks/s-1:subscribe", b"", Target("read", "s-1")),
        ("POST", "/a2a/rest/tasks/s-1:cancel", b"", Target("write", "s-1")),
        ("POST", "/a2a/rest/message:send", b'{"message": {"taskId": "s-1"}}',
         Target("write", "s-1")),
        ("GET", "/a2a/rest/tasks", b"", Target("admin")),
        ("POST", "/a2a/rest/tasks/s-1/pushNotificationConfigs", b"", Target("admin")),
    ],
)  # fmt: skip
def test_what_a_request_needs(method: str, path: str, body: bytes, target: Target) -> None:
    assert target_of(method, path, body) == target


@pytest.mark.parametrize(
    ("text", "approved"),
    [("approve", True), ("Yes, go ahead", True), ("ok.", True), ("deny", False),
     ("maybe", False), ("", False), ("not approved", False), ("approvedish", False)],
)  # fmt: skip
def test_only_a_clear_yes_approves(text: str, approved: bool) -> None:
    message = Message(parts=[Part(text=text)] if text else [])
    assert verdict_of(message).approved is approved


def test_a_data_part_says_it_without_words() -> None:
    said = Part()
    said.data.struct_value.update({"approved": True, "reason": "fine"})
    message = Message(parts=[said, Part(text="no")])
    verdict = verdict_of(message)
    assert verdict.approved is True and verdict.reason == "fine"
