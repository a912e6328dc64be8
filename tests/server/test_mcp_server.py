"""baton as an MCP server, through the official ``mcp`` Python client, on the offline model: over
Streamable HTTP (``/mcp`` of a ``baton serve`` in this process) and over stdio (``baton mcp``, a
process as a desktop host starts it), at both protocol revisions — 2025-11-25, where the server
asks the host in ``elicitation/create`` requests, and 2026-07-28, where a question is the call's
input request and the client answers it from the same elicitation callback.

The scenarios themselves are in :mod:`tests.server.mcp_helpers`; tasks are in
``test_mcp_tasks.py``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import aclosing, asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp.shared.exceptions import MCPError
from mcp_types import (
    CallToolResult,
    GetTaskRequest,
    GetTaskRequestParams,
    GetTaskResult,
    ImageContent,
    Request,
    RequestParams,
    ResourceLink,
    TextContent,
)

from baton.bus.base import Bus
from baton.bus.connect import open_bus
from baton.bus.events import SessionFinished
from baton.bus.messages import ApproveMode
from baton.bus.tail import tail_events
from baton.server import BatonServer, ServerConfig
from baton.subagents.profiles import load_profiles
from tests.server.mcp_helpers import (
    ERAS,
    PUBLISH,
    SCENARIOS,
    TOKEN,
    TWO_PICTURES,
    approving,
    declining,
    fresh,
    over_http,
    over_stdio,
    paints_two_pictures,
)
from tests.support.profiles import GALLERY


@pytest.fixture
def gallery(tmp_path: Path) -> Path:
    path = tmp_path / "gallery.toml"
    path.write_text(GALLERY)
    return path


@asynccontextmanager
async def serving(
    tmp: Path, gallery: Path, approve: ApproveMode = "ask"
) -> AsyncIterator[tuple[BatonServer, Bus]]:
    """A ``baton serve`` in this process, with its token, on an in-process bus (entered and left
    in the test's own task: the server's task groups must be); ``approve``: its policy."""
    async with open_bus("memory://") as bus:
        config = ServerConfig(
            port=0, bus_url=bus.url, media_dir=tmp / "media", token=TOKEN, approve=approve
        )
        async with BatonServer(config, bus=bus, profiles=load_profiles(gallery)) as server:
            yield server, bus


# -- over Streamable HTTP ------------------------------------------------------------------------


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("scenario", list(SCENARIOS))
async def test_over_http(tmp_path: Path, gallery: Path, era: str, scenario: str) -> None:
    async with serving(tmp_path, gallery) as (server, _), over_http(server, era) as host:
        await SCENARIOS[scenario](host)


@pytest.mark.parametrize("era", ERAS)
async def test_the_media_urls_open_with_the_token(tmp_path: Path, gallery: Path, era: str) -> None:
    async with serving(tmp_path, gallery) as (server, _):
        async with over_http(server, era) as host:
            result = await paints_two_pictures(host)
        assert result.structured_content is not None
        urls = result.structured_content["media_urls"]
        assert all(url.startswith(server.url + "/media/") for url in urls)
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}) as http:
            answer = await http.get(urls[0])
    assert answer.status_code == 200 and answer.headers["content-type"] == "image/png"


@pytest.mark.parametrize("era", ERAS)
async def test_a_host_that_cannot_ask_gets_the_sessions_policy(
    tmp_path: Path, gallery: Path, era: str
) -> None:
    """No elicitation declared: under ``ask`` the approval is declined on the spot (fail closed)
    and the notes say why and what works; under ``auto`` (the server's policy allows it) the
    tool runs, nobody asked."""
    async with (
        serving(tmp_path, gallery, approve="auto") as (server, _),
        over_http(server, era, eliciting=False) as host,
    ):
        declined = await host.run(task=PUBLISH)
        auto = await host.run(task=PUBLISH, approve="auto")
    assert declined.structured_content is not None and auto.structured_content is not None
    assert declined.structured_content["status"] == "incomplete"
    [note] = [n for n in declined.structured_content["notes"] if "declined" in n]
    assert "offers no elicitation" in note and 'approve="auto"' in note
    assert auto.structured_content["status"] == "completed"
    assert len(auto.structured_content["media_urls"]) == 1


@pytest.mark.parametrize("era", ERAS)
async def test_under_an_auto_policy_an_eliciting_host_is_never_asked(
    tmp_path: Path, gallery: Path, era: str
) -> None:
    """The session's policy decides the approval: a host that could ask its user is not sent a
    dialog whose answer would not count (2026-07-28 sent an input request for it)."""
    async with (
        serving(tmp_path, gallery, approve="auto") as (server, _),
        over_http(server, era) as host,  # eliciting, with no answer: asked, it fails the test
    ):
        result = await host.run(task=PUBLISH, approve="auto")
    assert result.structured_content is not None
    assert result.structured_content["status"] == "completed"
    assert host.asked == []
    assert not any("asks a person" in line for line in host.lines)


async def test_under_a_deny_policy_run_declines_unasked_and_refuses_ask(
    tmp_path: Path, gallery: Path
) -> None:
    """The server's ``deny`` policy: ``approve="ask"`` is looser, a tool error, and no session
    starts on the bus; a ``run`` that says nothing gets ``deny`` (the host's yes never counts)."""
    async with (
        serving(tmp_path, gallery, approve="deny") as (server, bus),
        over_http(server, "legacy") as host,
    ):
        refused = await host.run(task=PUBLISH, approve="ask")
        assert await bus.log.sessions() == []
        host.answer = approving(True)  # the policy decides first; a host asked anyway says yes
        unsaid = await host.run(task=PUBLISH)
    assert refused.is_error
    [said] = [block.text for block in refused.content if isinstance(block, TextContent)]
    assert 'approval policy ("deny")' in said and '"deny"' in said.split("ask for")[1]
    assert unsaid.structured_content is not None and not unsaid.is_error
    assert unsaid.structured_content["status"] == "incomplete"


@pytest.mark.parametrize("era", ERAS)
async def test_a_call_the_client_gives_up_cancels_its_session(
    tmp_path: Path, gallery: Path, era: str
) -> None:
    """A ``run`` the client stops waiting for (``notifications/cancelled``; on 2026-07-28 the
    closed stream) cancels its session: the session is the call's."""
    async with serving(tmp_path, gallery) as (server, bus):
        async with over_http(server, era) as host:
            working = anyio.Event()

            async def progress(progress: float, total: float | None, message: str | None) -> None:
                host.lines.append(message or "")
                if message == "sleeper calls ponder":
                    working.set()

            call = partial(host.client.call_tool, "run", {"task": "think it over",
                           "profiles": ["sleeper"]}, progress_callback=progress)  # fmt: skip
            async with anyio.create_task_group() as group:
                group.start_soon(call)
                await working.wait()
                group.cancel_scope.cancel()  # the host gives up on the call
            session = host.session_started()
        with anyio.fail_after(30):
            end = await _end_of(bus, session)
    assert end.status == "cancelled"


async def _end_of(bus: Bus, session: str) -> SessionFinished:
    async with aclosing(tail_events(bus, session)) as events:
        async for logged in events:
            if isinstance(logged.event, SessionFinished):
                return logged.event
    raise AssertionError(f"session {session} has no end")


@pytest.mark.parametrize("era", ERAS)
async def test_state_post_and_profiles_reach_a_session_of_the_bus(
    tmp_path: Path, gallery: Path, era: str
) -> None:
    async with serving(tmp_path, gallery) as (server, _), over_http(server, era) as host:
        ran = await host.run(task=TWO_PICTURES)
        assert ran.structured_content is not None
        session = ran.structured_content["session"]
        state = await host.client.call_tool("state", {"session": session})
        late = await host.client.call_tool("post", {"session": session, "content": "and a cat"})
        unknown = await host.client.call_tool("state", {"session": "s-000000000000"})
        bad = await host.client.call_tool("cancel", {"session": "not a session"})
        profiles = await host.client.call_tool("profiles", {})
    assert state.structured_content is not None and not state.is_error
    assert state.structured_content["status"] == "completed"
    assert {agent["name"] for agent in state.structured_content["agents"]} == {
        "painter",
        "painter-2",
    }
    assert state.structured_content["open_questions"] == []
    assert late.is_error and f"session {session} is not running" in late.content[0].text  # type: ignore[union-attr]
    assert unknown.is_error and "no session 's-000000000000'" in unknown.content[0].text  # type: ignore[union-attr]
    assert bad.is_error and bad.content[0].text.startswith("cancel: session: ")  # type: ignore[union-attr]
    assert profiles.structured_content is not None
    names = [p["name"] for p in profiles.structured_content["profiles"]]
    assert names == ["painter", "publisher", "reviewer", "sleeper"]


@pytest.mark.parametrize("era", ERAS)
async def test_the_tools_declare_their_schemas(tmp_path: Path, gallery: Path, era: str) -> None:
    async with serving(tmp_path, gallery) as (server, _), over_http(server, era) as host:
        tools = {tool.name: tool for tool in (await host.client.list_tools()).tools}
        templates = await host.client.list_resource_templates()
        with pytest.raises(MCPError) as missing:
            await host.client.read_resource("baton://media/s-000000000000/none.png")
    assert set(tools) == {"run", "post", "state", "cancel", "profiles"}
    run = tools["run"]
    assert run.input_schema["required"] == ["task"]
    assert set(run.input_schema["properties"]) == {"task", "profiles", "approve", "timeout_s"}
    assert run.output_schema is not None
    assert set(run.output_schema["required"]) >= {"session", "status", "answer", "media_urls"}
    assert all(tool.output_schema is not None for tool in tools.values())
    if era == "legacy":  # 2025-11-25: run may be a task, nothing else may
        assert run.execution is not None and run.execution.task_support == "optional"
        assert tools["state"].execution is not None
        assert tools["state"].execution.task_support == "forbidden"
    [template] = templates.resource_templates
    assert template.uri_template == "baton://media/{session}/{name}"
    assert missing.value.error.code == (-32002 if era == "legacy" else -32602)


async def test_mcp_needs_the_servers_token(tmp_path: Path, gallery: Path) -> None:
    async with serving(tmp_path, gallery) as (server, _), httpx2.AsyncClient() as http:
        url = server.url + "/mcp"
        anonymous = await http.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
        forged = await http.post(url, json={}, headers={"Authorization": "Bearer nope" * 4})
    assert anonymous.status_code == 401 and forged.status_code == 401


# -- over stdio ----------------------------------------------------------------------------------


@pytest.mark.process
@pytest.mark.parametrize("era", ERAS)
async def test_over_stdio_every_scenario(tmp_path: Path, gallery: Path, era: str) -> None:
    """One ``baton mcp`` per revision runs every scenario in turn, as a desktop host would."""
    async with over_stdio(tmp_path, gallery, era) as host:
        assert host.client.protocol_version == ("2025-11-25" if era == "legacy" else era)
        for scenario in SCENARIOS.values():
            await scenario(await fresh(host))


# -- older protocol revisions --------------------------------------------------------------------


class _TaskCall(RequestParams):
    """A ``tools/call`` carrying 2025-11-25's ``task`` (not of the older revisions)."""

    name: str
    arguments: dict[str, Any]
    task: dict[str, Any]


@pytest.mark.parametrize("revision", ["2024-11-05", "2025-03-26", "2025-06-18"])
async def test_a_client_of_an_older_revision_gets_only_what_its_revision_has(
    tmp_path: Path, gallery: Path, revision: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The official client made to offer an older revision in its handshake: no tasks before
    2025-11-25 (no capability, no ``execution``, ``tasks/get`` is ``-32601``, a ``task`` on the
    call is ignored); before 2025-06-18 no elicitation (the approval is declined by policy) and
    media as text with their URL (no ``resource_link``)."""
    monkeypatch.setattr("mcp.client.session.LATEST_HANDSHAKE_VERSION", revision)
    async with serving(tmp_path, gallery) as (server, _), over_http(server, "legacy") as host:
        negotiated = host.client.protocol_version
        capabilities = host.client.server_capabilities
        tools = {tool.name: tool for tool in (await host.client.list_tools()).tools}
        painted = await host.run(task="paint a fox")
        host.answer = declining  # it declared elicitation: asked only from 2025-06-18 on
        gated = await host.run(task=PUBLISH)
        with pytest.raises(MCPError) as no_tasks:
            await host.client.session.send_request(
                GetTaskRequest(params=GetTaskRequestParams(task_id="s-000000000000~x")),
                GetTaskResult,
            )
        as_a_call = await host.client.session.send_request(
            Request[Any, Any](method="tools/call", params=_TaskCall(
                name="run", arguments={"task": "paint a fox"}, task={"ttl": 60000})),
            CallToolResult,
        )  # fmt: skip
    assert negotiated == revision
    assert capabilities.tasks is None
    assert all(tool.execution is None for tool in tools.values())
    assert no_tasks.value.error.code == -32601
    assert as_a_call.structured_content is not None
    assert as_a_call.structured_content["status"] == "completed"
    links = [block for block in painted.content if isinstance(block, ResourceLink)]
    texts = [block.text for block in painted.content if isinstance(block, TextContent)]
    images = [block for block in painted.content if isinstance(block, ImageContent)]
    assert len(images) == 1  # pictures inline in every revision
    assert gated.structured_content is not None
    if revision == "2025-06-18":
        [link] = links
        assert link.uri.startswith("baton://media/")
        assert len(host.asked) == 1
    else:
        assert host.asked == [] and gated.structured_content["status"] == "incomplete"
        assert links == []
        [line] = [text for text in texts if text.startswith("[painter-")]
        assert f"{server.url}/media/" in line and "(resource baton://media/" in line
        assert ", image/png]" in line


_INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {},
    "clientInfo": {"name": "rebinding-test", "version": "1"}}}  # fmt: skip
_ACCEPT = {"Accept": "application/json, text/event-stream"}


@pytest.mark.parametrize("token", [None, TOKEN])
async def test_dns_rebinding_is_refused_without_a_token_and_a_token_is_not(
    tmp_path: Path, gallery: Path, token: str | None
) -> None:
    """Without a token, a ``Host`` or ``Origin`` that is not ``localhost``-like is refused (a
    page rebound to this loopback server); with one, the token is the protection, and a request
    carrying it is answered whatever its ``Host`` (a tunnel, a proxy)."""
    async with open_bus("memory://") as bus:
        config = ServerConfig(port=0, bus_url=bus.url, media_dir=tmp_path / "media", token=token)
        async with (
            BatonServer(config, bus=bus, profiles=load_profiles(gallery)) as server,
            httpx2.AsyncClient(headers=_ACCEPT) as http,
        ):
            url = server.url + "/mcp"
            auth = {"Authorization": f"Bearer {token}"} if token else {}
            local = await http.post(url, json=_INITIALIZE, headers=auth)
            host, origin = {"Host": "attacker.example"}, {"Origin": "http://attacker.example"}
            rebound = await http.post(url, json=_INITIALIZE, headers={**auth, **host})
            page = await http.post(url, json=_INITIALIZE, headers={**auth, **origin})
            forged = await http.post(url, json=_INITIALIZE, headers={"Host": "attacker.example"})
    assert local.status_code == 200, local.text
    if token is None:
        assert rebound.status_code in (400, 403, 421) and page.status_code in (400, 403)
    else:
        assert rebound.status_code == 200 and page.status_code == 200, (rebound.text, page.text)
        assert forged.status_code == 401  # without the token: the guard, as for every route
