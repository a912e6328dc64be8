"""2025-11-25 core tasks at the JSON-RPC level, written from the specification
(``basic/utilities/tasks``): the handshake's ``tasks`` capability, a task-augmented ``tools/call``
of ``run``, ``tasks/get`` while it waits for a person, ``tasks/result`` carrying the elicitation
(related to the task) and then the tool's result, ``tasks/cancel`` and its errors — over
Streamable HTTP to a ``baton serve`` in this process, with a client that opens no ``GET`` stream
(so the server's side channel reaches nobody, and ``tasks/result`` must ask)."""

from __future__ import annotations

import itertools
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx2

from baton.bus.connect import open_bus
from baton.server import BatonServer, ServerConfig
from baton.subagents.profiles import load_profiles
from tests.support.profiles import GALLERY

TOKEN = "core-task-tests-token-0123456789"
RELATED = "io.modelcontextprotocol/related-task"


@dataclass
class Peer:
    """A 2025-11-25 client in JSON-RPC, on one MCP session of the server."""

    http: httpx2.AsyncClient
    url: str
    session: str = ""
    ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def headers(self) -> dict[str, str]:
        headers = {"Accept": "application/json, text/event-stream",
                   "MCP-Protocol-Version": "2025-11-25"}  # fmt: skip
        if self.session:
            headers["Mcp-Session-Id"] = self.session
        return headers

    async def notify(self, method: str) -> None:
        body = {"jsonrpc": "2.0", "method": method}
        answer = await self.http.post(self.url, json=body, headers=self.headers())
        assert answer.status_code == 202, answer.text

    async def call(self, method: str, params: dict[str, Any], answer_requests: Any = None) -> Any:
        """Send a request; read its response (JSON, or the SSE stream, answering the server's
        requests on it with ``answer_requests(request) -> result``); the JSON-RPC message."""
        request_id = next(self.ids)
        body = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        async with self.http.stream("POST", self.url, json=body, headers=self.headers()) as reply:
            assert reply.status_code == 200, await reply.aread()
            self.session = reply.headers.get("mcp-session-id", self.session)
            if reply.headers["content-type"].startswith("application/json"):
                return json.loads(await reply.aread())
            async for message in _sse(reply):
                if message.get("id") == request_id and "method" not in message:
                    return message
                if "method" in message and "id" in message:  # the server asks
                    result = await answer_requests(message)
                    response = {"jsonrpc": "2.0", "id": message["id"], "result": result}
                    posted = await self.http.post(self.url, json=response, headers=self.headers())
                    assert posted.status_code == 202, posted.text
        raise AssertionError(f"no response to {method}")


async def _sse(reply: httpx2.Response) -> AsyncIterator[dict[str, Any]]:
    data: list[str] = []
    async for line in reply.aiter_lines():
        if line.startswith("data:"):
            data.append(line[5:].strip())
        elif line == "" and data:
            yield json.loads("\n".join(data))
            data = []


@asynccontextmanager
async def peer(tmp: Path) -> AsyncIterator[Peer]:
    profiles = tmp / "gallery.toml"
    profiles.write_text(GALLERY)
    async with open_bus("memory://") as bus:
        config = ServerConfig(port=0, bus_url=bus.url, media_dir=tmp / "media", token=TOKEN)
        async with (
            BatonServer(config, bus=bus, profiles=load_profiles(profiles)) as server,
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60) as http,
        ):
            client = Peer(http, server.url + "/mcp")
            init = await client.call("initialize", {
                "protocolVersion": "2025-11-25",
                "capabilities": {"elicitation": {}},
                "clientInfo": {"name": "spec-client", "version": "1"},
            })  # fmt: skip
            capabilities = init["result"]["capabilities"]
            assert capabilities["tasks"] == {"cancel": {}, "requests": {"tools": {"call": {}}}}
            await client.notify("notifications/initialized")
            yield client


async def _until_status(client: Peer, task_id: str, status: str) -> dict[str, Any]:
    with anyio.fail_after(30):
        while True:
            task: dict[str, Any] = (await client.call("tasks/get", {"taskId": task_id}))["result"]
            if task["status"] == status:
                return task
            await anyio.sleep(task["pollInterval"] / 1000)  # as the task asks to be polled


async def test_a_task_waits_for_its_approval_which_tasks_result_asks(tmp_path: Path) -> None:
    async with peer(tmp_path) as client:
        created = await client.call("tools/call", {
            "name": "run", "arguments": {"task": "publish a haiku"}, "task": {"ttl": 60000},
        })  # fmt: skip
        task = created["result"]["task"]
        assert task["status"] == "working" and task["pollInterval"] == 500
        assert task["ttl"] > 0 and task["createdAt"].endswith("Z")
        task_id = task["taskId"]
        waiting = await _until_status(client, task_id, "input_required")
        assert waiting["statusMessage"].startswith("waiting for a person: may publisher run")
        asked: list[dict[str, Any]] = []

        async def approve(request: dict[str, Any]) -> dict[str, Any]:
            asked.append(request)
            return {"action": "accept", "content": {"approved": True, "reason": "go"}}

        final = await client.call("tasks/result", {"taskId": task_id}, approve)
        [request] = asked
        assert request["method"] == "elicitation/create"
        assert request["params"]["_meta"][RELATED] == {"taskId": task_id}
        assert request["params"]["requestedSchema"]["required"] == ["approved"]
        result = final["result"]
        assert result["_meta"][RELATED] == {"taskId": task_id}
        assert result["isError"] is False
        assert result["structuredContent"]["status"] == "completed"
        [card] = result["structuredContent"]["media_urls"]
        assert card.endswith("publisher-card.txt")
        done = (await client.call("tasks/get", {"taskId": task_id}))["result"]
        assert done["status"] == "completed"


async def test_tasks_cancel_answers_the_task_cancelled_and_refuses_an_ended_one(
    tmp_path: Path,
) -> None:
    async with peer(tmp_path) as client:
        created = await client.call("tools/call", {
            "name": "run", "arguments": {"task": "publish a haiku"}, "task": {},
        })  # fmt: skip
        task_id = created["result"]["task"]["taskId"]
        await _until_status(client, task_id, "input_required")
        cancelled = (await client.call("tasks/cancel", {"taskId": task_id}))["result"]
        assert cancelled["status"] == "cancelled" and cancelled["taskId"] == task_id
        again = await client.call("tasks/cancel", {"taskId": task_id})
        assert again["error"]["code"] == -32602
        assert again["error"]["message"] == (
            "Cannot cancel task: already in terminal status 'cancelled'"
        )
        result = (await client.call("tasks/result", {"taskId": task_id}))["result"]
        assert result["structuredContent"]["status"] == "cancelled"
        assert result["_meta"][RELATED] == {"taskId": task_id}


async def test_what_cannot_be_a_task_is_the_specs_error(tmp_path: Path) -> None:
    async with peer(tmp_path) as client:
        forbidden = await client.call("tools/call", {
            "name": "profiles", "arguments": {}, "task": {},
        })  # fmt: skip
        assert forbidden["error"]["code"] == -32601
        bad = await client.call("tools/call", {"name": "run", "arguments": {}, "task": {}})
        assert bad["error"] == {"code": -32602, "message": "run: task: Field required"}
        unknown = await client.call("tasks/get", {"taskId": "s-000000000000~nothing"})
        assert unknown["error"]["code"] == -32602
        assert "Task not found" in unknown["error"]["message"]
        update = await client.call("tasks/update", {"taskId": "x", "inputResponses": {}})
        assert update["error"]["code"] == -32601  # 2026-07-28's method, not this revision's
        listed = await client.call("tasks/list", {})
        assert listed["error"]["code"] == -32601  # not declared: callers are not told apart
