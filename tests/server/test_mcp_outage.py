"""The MCP server across a Redis outage (a ``redis-server`` of this test's own, killed and
restarted on the same port with its AOF), through the official ``mcp`` client over ``/mcp``,
and once over stdio (a ``baton mcp`` process: the ``run`` it follows fails, the process lives).

An outage longer than ``bus_outage_s`` ends only what needs the bus: a ``run`` call that was
following its session returns a tool error naming the session, a task's watcher stops watching,
``tasks/get`` is a JSON-RPC error while nothing can be read. The server itself goes on:
``tools/list`` answers during the outage, and once Redis is back the task is read again and a
new ``run`` completes. (Before, the outage escaped the follower's task group as an
``ExceptionGroup`` and took the whole server down with the watcher.)
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Literal

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, Request, RequestParams, Result, TextContent

from baton.bus.redis import RedisBus
from baton.server import BatonServer, ServerConfig
from baton.server.mcp.call import TASKS_EXTENSION
from baton.subagents.profiles import load_profiles
from baton.testing import RedisServer
from tests.server.mcp_helpers import TOKEN, over_http, over_stdio
from tests.support.logged import when_logged
from tests.support.profiles import GALLERY

OUTAGE_S = 2.0
"""The server's ``bus_outage_s``: how long its sessions and followers ride out an outage."""


@pytest.fixture
def own_redis() -> Iterator[RedisServer]:
    with RedisServer() as server:
        yield server


class TaskCreated(Result):
    """A 2026-07-28 ``CreateTaskResult`` of the tasks extension."""

    result_type: Literal["task"] = "task"
    task_id: str
    status: str


class TaskId(RequestParams):
    task_id: str


class TaskSeen(Result):
    """What this test reads of ``tasks/get``."""

    task_id: str
    status: str
    status_message: str | None = None


class Tasks(ClientExtension):
    """The tasks extension as far as this test needs it: declared, and the created tasks' ids
    kept (the test polls the task itself; the call's own result is a placeholder)."""

    identifier = TASKS_EXTENSION

    def __init__(self) -> None:
        self.created: list[str] = []

    def claims(self) -> Sequence[ResultClaim[Any]]:
        async def resolve(created: TaskCreated, ctx: ClaimContext) -> CallToolResult:
            self.created.append(created.task_id)
            return CallToolResult(content=[TextContent(text="a task")], is_error=True)

        return [ResultClaim(result_type="task", model=TaskCreated, resolve=resolve)]


@asynccontextmanager
async def tasking(server: BatonServer) -> AsyncIterator[tuple[Client, Tasks]]:
    """A 2026-07-28 client of ``/mcp`` that declares the tasks extension and no elicitation (so
    the server watches each task's session, declining its questions)."""
    url = server.url.replace("0.0.0.0", "127.0.0.1") + "/mcp"
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=120)) as http:
        transport = streamable_http_client(url, http_client=http)
        tasks = Tasks()
        async with Client(transport, mode="2026-07-28", extensions=[tasks]) as client:
            yield client, tasks


async def _get(client: Client, task_id: str) -> TaskSeen:
    request: Request[Any, Any] = Request(method="tasks/get", params=TaskId(task_id=task_id))
    return await client.session.send_request(request, TaskSeen)


def _text(result: CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, TextContent))


async def test_a_redis_outage_ends_the_calls_that_need_the_bus_not_the_server(
    own_redis: RedisServer, tmp_path: Path
) -> None:
    profiles = tmp_path / "gallery.toml"
    profiles.write_text(GALLERY)
    async with RedisBus(own_redis.url, prefix="mcp-outage") as bus:
        config = ServerConfig(port=0, bus_url=bus.url, media_dir=tmp_path / "media", token=TOKEN,
                              bus_outage_s=OUTAGE_S)  # fmt: skip
        async with (
            BatonServer(config, bus=bus, profiles=load_profiles(profiles)) as server,
            over_http(server, "legacy", eliciting=False) as host,
            tasking(server) as (tasker, tasks),
        ):
            working = anyio.Event()
            followed: list[CallToolResult] = []

            async def progress(progress: float, total: float | None, message: str | None) -> None:
                host.lines.append(message or "")
                if message == "sleeper calls ponder":
                    working.set()

            async def follow() -> None:
                arguments = {"task": "think it over", "profiles": ["sleeper"]}
                followed.append(
                    await host.client.call_tool("run", arguments, progress_callback=progress)
                )

            with anyio.fail_after(60):
                async with anyio.create_task_group() as group:
                    group.start_soon(follow)
                    await working.wait()
                    arguments = {"task": "think it over", "profiles": ["sleeper"]}
                    await tasker.call_tool("run", arguments)
                    [task_id] = tasks.created
                    watcher = "baton.server.mcp.task_methods"
                    with when_logged(watcher, "task of session") as unwatched:
                        own_redis.kill()
                        await unwatched.wait()  # the watcher met the outage past its bound
                # during the outage: what needs the bus fails, the rest answers
                tools = await host.client.list_tools()
                with pytest.raises(MCPError) as unread:
                    await _get(tasker, task_id)
                await anyio.to_thread.run_sync(own_redis.start)  # same port, same AOF
                task = await _get(tasker, task_id)
                again = await host.client.call_tool("run", {"task": "paint a fox"})
    [result] = followed
    session = host.session_started()
    assert result.is_error and _text(result).startswith(f"run: session {session}: ")
    assert "bus" in _text(result) and "`state`" in _text(result)
    assert {tool.name for tool in tools.tools} >= {"run", "state"}
    assert "the bus does not answer" in unread.value.error.message
    assert task.task_id == task_id and task.status in {"working", "completed"}
    assert again.structured_content is not None and not again.is_error
    assert again.structured_content["status"] == "completed"


@pytest.mark.process
async def test_over_stdio_a_redis_outage_ends_the_run_not_the_process(
    own_redis: RedisServer, tmp_path: Path
) -> None:
    """``baton mcp`` (a process, as a desktop host starts it) on a Redis that dies while a
    ``run`` follows its session: that call is a tool error naming the session, and the process
    goes on — ``tools/list`` answers during the outage, a new ``run`` completes once Redis is
    back."""
    profiles = tmp_path / "gallery.toml"
    profiles.write_text(GALLERY)
    args = ["--bus", own_redis.url, "--prefix", "mcp-stdio-outage", "--bus-outage", str(OUTAGE_S)]
    async with over_stdio(tmp_path, profiles, "legacy", args=args) as host:
        working = anyio.Event()
        followed: list[CallToolResult] = []

        async def progress(progress: float, total: float | None, message: str | None) -> None:
            host.lines.append(message or "")
            if message == "sleeper calls ponder":
                working.set()

        async def follow() -> None:
            arguments = {"task": "think it over", "profiles": ["sleeper"]}
            followed.append(
                await host.client.call_tool("run", arguments, progress_callback=progress)
            )

        with anyio.fail_after(60):
            async with anyio.create_task_group() as group:
                group.start_soon(follow)
                await working.wait()
                own_redis.kill()
            tools = await host.client.list_tools()  # the process outlived the call's outage
            await anyio.to_thread.run_sync(own_redis.start)  # same port, same AOF
            again = await host.client.call_tool("run", {"task": "paint a fox"})
    [result] = followed
    session = host.session_started()
    assert result.is_error and _text(result).startswith(f"run: session {session}: ")
    assert "lost the bus" in _text(result)
    assert {tool.name for tool in tools.tools} >= {"run", "state"}
    assert again.structured_content is not None and not again.is_error
    assert again.structured_content["status"] == "completed"
