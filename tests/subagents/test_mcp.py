"""MCP tools against real servers: ``mcp-server-time`` from PyPI over stdio, and a server these
tests write with the SDK's own server API (``tests/subagents/mcp_demo.py``) over stdio and over
streamable HTTP on loopback.

Agents run in a real :class:`~baton.subagents.worker.Worker` with the offline model, which calls
every offered tool that takes one string with the task's text; each profile's ``allow`` offers the
one tool a test is about.
"""

from __future__ import annotations

import itertools
import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit
from urllib.request import url2pathname

import anyio
import pytest
from pydantic import ValidationError

from baton.bus.events import ApprovalRequested, ToolResulted
from baton.bus.memory import MemoryBus
from baton.bus.messages import Envelope, SpawnRequest
from baton.bus.payloads import result_report
from baton.subagents.loop import AgentParts
from baton.subagents.mcp import McpCallFailed, McpServers, McpTool
from baton.subagents.mcp_config import McpServerConfig, McpServerUnavailable
from baton.subagents.profiles import Profile
from baton.subagents.worker import Worker
from tests.engine.helpers import Observed
from tests.subagents.helpers import SESSION, Lead, profile, read_png, task
from tests.support.events import wait_for_event

REPO = Path(__file__).resolve().parents[2]
PYTHON = sys.executable


def time_server(**options: Any) -> McpServerConfig:
    return McpServerConfig(command=PYTHON, args=("-m", "mcp_server_time"), **options)


def demo_stdio(tmp_path: Path, **options: Any) -> McpServerConfig:
    env = {
        "PYTHONPATH": str(REPO),
        "MCP_DEMO_CRASH_ONCE": str(tmp_path / "crashed"),
        "MCP_DEMO_PID_FILE": str(tmp_path / "demo.pid"),
    }
    return McpServerConfig(
        command=PYTHON, args=("-m", "tests.subagents.mcp_demo", "stdio"), env=env, **options
    )


async def never_media(data: bytes, content_type: str) -> str:
    raise AssertionError("no media expected")


@asynccontextmanager
async def http_demo(tmp_path: Path, port: int = 0) -> AsyncIterator[str]:
    """The demo server over streamable HTTP on loopback (``port`` 0: one it picks); yields its
    URL once it listens (it writes the port it has into a file then)."""
    port_file = tmp_path / f"http-port-{next(_demos)}"
    env = {**os.environ, "PYTHONPATH": str(REPO), "MCP_DEMO_CRASH_ONCE": str(tmp_path / "c"),
           "MCP_DEMO_PORT_FILE": str(port_file)}  # fmt: skip
    log = tmp_path / f"http-{port_file.name}.log"
    with log.open("ab") as output:
        proc = await anyio.open_process(
            [PYTHON, "-m", "tests.subagents.mcp_demo", "http", str(port)],
            cwd=REPO,
            env=env,
            stdout=output,
            stderr=output,
        )
    try:
        with anyio.fail_after(30):
            while not port_file.exists():
                assert proc.returncode is None, log.read_text()
                await anyio.sleep(0.05)  # another process's file: there is no event to wait on
        yield f"http://127.0.0.1:{int(port_file.read_text())}/mcp"
    finally:
        proc.kill()
        with anyio.fail_after(10, shield=True):
            await proc.wait()


_demos = itertools.count()


@asynccontextmanager
async def one_server(name: str, config: McpServerConfig) -> AsyncIterator[list[McpTool]]:
    async with McpServers() as servers:
        yield await servers.tools_for("profile 'tester'", {name: config}, never_media)


def mcp_profile(name: str, servers: dict[str, McpServerConfig]) -> Profile:
    base = profile(name=name)
    return Profile(
        name=name,
        description=f"{name} with MCP tools",
        system_prompt=base.system_prompt,
        limits=base.limits,
        mcp=servers,
    )


def spawn(agent: str, profile_name: str) -> SpawnRequest:
    return SpawnRequest(session=SESSION, agent=agent, profile=profile_name)


async def run_agents(
    profiles: dict[str, Profile],
    tasks: list[tuple[str, str, str]],
    media_dir: Path,
    *,
    observed: Observed | None = None,
) -> tuple[list[Envelope], Worker]:
    """Host ``(agent, profile, task)``s in one worker until each has reported."""
    async with MemoryBus() as bus:
        worker = Worker(bus, profiles, parts=AgentParts(media_dir=media_dir))
        if observed is not None:
            worker.telemetry = observed.telemetry
        async with worker:
            for agent, profile_name, text in tasks:
                await bus.inboxes.send(task(agent, text))
                await bus.spawns.submit(spawn(agent, profile_name))
            results = await Lead(bus).until_results(len(tasks), timeout=60)
    return results, worker


# -- a real server from PyPI over stdio ------------------------------------------------------------


@pytest.mark.process
async def test_the_time_server_tools_come_with_its_schema_and_validate_arguments() -> None:
    async with one_server("time", time_server()) as tools:
        by_name = {tool.name: tool for tool in tools}
        assert set(by_name) == {"get_current_time", "convert_time"}
        clock = by_name["get_current_time"]
        assert clock.source == "mcp:time" and clock.server == "time"
        parameters: dict[str, Any] = dict(clock.schema["function"].get("parameters") or {})
        assert parameters["required"] == ["timezone"]
        assert parameters["properties"]["timezone"]["type"] == "string"
        with pytest.raises(ValidationError, match="timezone"):
            clock.parse("{}")
        with pytest.raises(ValidationError, match="not of type 'string'"):
            clock.parse('{"timezone": 5}')
        args = clock.parse('{"timezone": "Europe/Paris"}')
        result = await clock.invoke(args)
    answer = json.loads(result.content)
    assert answer["timezone"] == "Europe/Paris" and answer["datetime"][:2] == "20"
    assert result.media_urls == ()


@pytest.mark.process
async def test_allow_picks_the_tools_and_approve_gates_them() -> None:
    config = time_server(allow=("get_*",), approve=("get_current_*",), timeout_s=7)
    async with one_server("time", config) as tools:
        (clock,) = tools
    assert clock.name == "get_current_time" and clock.approval == "always"
    assert clock.run.timeout_s == 7


@pytest.mark.process
async def test_one_connection_serves_every_agent_of_a_worker(tmp_path: Path) -> None:
    clock = mcp_profile("clock", {"time": time_server(allow=("get_current_time",))})
    results, worker = await run_agents(
        {"clock": clock},
        [("c1", "clock", "Europe/Paris"), ("c2", "clock", "Asia/Tokyo")],
        tmp_path,
    )
    texts = {r.sender: r.content for r in results}
    assert '"timezone": "Europe/Paris"' in texts["c1"] and '"datetime"' in texts["c1"]
    assert '"timezone": "Asia/Tokyo"' in texts["c2"]
    assert worker._mcp.servers is not None
    (connection,) = worker._mcp.servers.connections
    assert connection.starts == 1 and not connection.is_open  # one start; closed with the worker


@pytest.mark.process
async def test_a_server_that_cannot_start_names_the_profile_and_the_server(tmp_path: Path) -> None:
    broken = McpServerConfig(command=PYTHON, args=("-m", "no_such_mcp_server"))
    async with McpServers() as servers:
        with pytest.raises(McpServerUnavailable) as caught:
            await servers.tools_for("profile 'tester'", {"ghost": broken}, never_media)
    message = str(caught.value)
    assert "profile 'tester'" in message and "'ghost'" in message
    assert "No module named no_such_mcp_server" in message  # the server's own stderr says why
    # In a worker the agent is refused with an error result saying the same.
    results, _ = await run_agents(
        {"haunted": mcp_profile("haunted", {"ghost": broken})},
        [("h1", "haunted", "anything")],
        tmp_path,
    )
    assert results[0].meta["reason"] == "error"
    assert "profile 'haunted'" in results[0].content and "'ghost'" in results[0].content


# -- the demo server over stdio: a crash, and closing ---------------------------------------------


@pytest.mark.process
async def test_a_server_that_dies_mid_call_fails_that_call_and_restarts_for_the_next(
    tmp_path: Path,
) -> None:
    async with one_server("demo", demo_stdio(tmp_path, allow=("crash",))) as tools:
        (crash,) = tools
        with pytest.raises(McpCallFailed, match=r"went away during the call.*restarted"):
            await crash.invoke({"text": "first"})
        first_pid = int((tmp_path / "demo.pid").read_text())
        result = await crash.invoke({"text": "second"})
        assert result.content == "survived: second"
        assert crash._connection.starts == 2
        second_pid = int((tmp_path / "demo.pid").read_text())
    assert second_pid != first_pid
    with pytest.raises(ProcessLookupError):  # closed with its owner: no process is left
        os.kill(second_pid, 0)


@pytest.mark.process
async def test_the_crash_reaches_the_model_as_an_error_result(tmp_path: Path) -> None:
    crashy = mcp_profile("crashy", {"demo": demo_stdio(tmp_path, allow=("crash",))})
    async with MemoryBus() as bus:
        async with Worker(bus, {"crashy": crashy}, parts=AgentParts(media_dir=tmp_path)):
            await bus.inboxes.send(task("k1", "boom"))
            await bus.spawns.submit(spawn("k1", "crashy"))
            event = await wait_for_event(bus, SESSION, ToolResulted, timeout=60)
            (result,) = await Lead(bus).until_results(1, timeout=60)
    assert event.result.is_error and event.result.name == "crash"
    assert "went away during the call" in event.result.content
    # the agent does not say "Done", and its report carries the tool's error for the lead
    assert result.content.startswith("Not done: boom.")
    (failed,) = result_report(result).tool_errors
    assert failed.startswith("crash failed with McpCallFailed") and "went away" in failed


# -- the demo server over streamable HTTP ---------------------------------------------------------


@pytest.mark.process
async def test_a_slow_tool_is_stopped_at_its_timeout(tmp_path: Path) -> None:
    async with http_demo(tmp_path) as url:
        config = McpServerConfig(url=url, allow=("slow", "echo"), timeout_s=0.5)
        sleepy = mcp_profile("sleepy", {"demo": config})
        async with MemoryBus() as bus:
            async with Worker(
                bus, {"sleepy": sleepy}, parts=AgentParts(media_dir=tmp_path)
            ) as worker:
                await bus.inboxes.send(task("s1", "zzz"))
                await bus.spawns.submit(spawn("s1", "sleepy"))
                slow = await wait_for_event(
                    bus,
                    SESSION,
                    lambda e: isinstance(e, ToolResulted) and e.result.name == "slow",
                    timeout=60,
                )
                echo = await wait_for_event(
                    bus,
                    SESSION,
                    lambda e: isinstance(e, ToolResulted) and e.result.name == "echo",
                    timeout=60,
                )
                await Lead(bus).until_results(1, timeout=60)
                assert worker._mcp.servers is not None
                (connection,) = worker._mcp.servers.connections
                assert connection.is_open and connection.starts == 1  # a timeout kills nothing
    assert isinstance(slow, ToolResulted) and isinstance(echo, ToolResulted)
    assert slow.result.is_error and "did not finish within 0.5 s" in slow.result.content
    assert echo.result.content == "echo: zzz" and not echo.result.is_error


@pytest.mark.process
async def test_an_image_result_comes_back_as_a_media_url(tmp_path: Path) -> None:
    async with http_demo(tmp_path) as url:
        painter = mcp_profile("mcpainter", {"demo": McpServerConfig(url=url, allow=("picture",))})
        results, _ = await run_agents(
            {"mcpainter": painter}, [("m1", "mcpainter", "a fox")], tmp_path / "media"
        )
    (url_of_png,) = results[0].media_urls
    path = Path(url2pathname(urlsplit(url_of_png).path))
    assert path.is_relative_to(tmp_path / "media" / SESSION) and path.name.startswith("m1-mcp-")
    width, height, _ = read_png(path)
    assert (width, height) == (64, 64)


@pytest.mark.process
async def test_a_resource_result_is_kept_as_media_and_quoted(tmp_path: Path) -> None:
    async with http_demo(tmp_path) as url:
        writer = mcp_profile("reporter", {"demo": McpServerConfig(url=url, allow=("report",))})
        async with MemoryBus() as bus:
            async with Worker(
                bus, {"reporter": writer}, parts=AgentParts(media_dir=tmp_path / "media")
            ):
                await bus.inboxes.send(task("r1", "the quarter"))
                await bus.spawns.submit(spawn("r1", "reporter"))
                event = await wait_for_event(bus, SESSION, ToolResulted, timeout=60)
                (result,) = await Lead(bus).until_results(1, timeout=60)
    assert isinstance(event, ToolResulted)
    assert "report: the quarter" in event.result.content
    (text_url,) = result.media_urls
    saved = Path(url2pathname(urlsplit(text_url).path))
    assert saved.suffix == ".txt"
    assert await anyio.Path(saved).read_text() == "report: the quarter"


@pytest.mark.process
async def test_an_approval_gated_tool_waits_for_an_answer_over_the_bus(tmp_path: Path) -> None:
    from baton.engine.bus_channel import answer_approval

    observed = Observed()
    async with http_demo(tmp_path) as url:
        config = McpServerConfig(url=url, allow=("set_volume",), approve=("set_*",))
        mixer = mcp_profile("mixer", {"desk": config})
        async with MemoryBus() as bus:
            worker = Worker(bus, {"mixer": mixer}, parts=AgentParts(media_dir=tmp_path))
            worker.telemetry = observed.telemetry
            async with worker:
                await bus.inboxes.send(task("x1", "eleven"))
                await bus.spawns.submit(spawn("x1", "mixer"))
                asked = await wait_for_event(bus, SESSION, ApprovalRequested, timeout=60)
                (call,) = asked.calls
                assert call.name == "set_volume"
                assert await answer_approval(bus, SESSION, call.call_id, True) == "x1"
                ran = await wait_for_event(bus, SESSION, ToolResulted, timeout=60)
                await Lead(bus).until_results(1, timeout=60)
    assert isinstance(ran, ToolResulted) and ran.result.content == "volume set to eleven"
    assert observed.counts("hitl.decision", "source") == {"mcp:desk": 1}
    assert observed.counts("hitl.decision") == {"approved": 1}


@pytest.mark.process
async def test_an_http_server_that_went_away_is_reached_again_once_it_is_back(
    tmp_path: Path,
) -> None:
    async with McpServers() as servers:
        async with http_demo(tmp_path) as url:
            port = urlsplit(url).port
            assert port is not None
            config = McpServerConfig(url=url, allow=("echo",))
            (echo,) = await servers.tools_for("profile 'tester'", {"demo": config}, never_media)
            assert (await echo.invoke({"text": "one"})).content == "echo: one"
        with pytest.raises(McpCallFailed):  # the server is gone: this call fails
            await echo.invoke({"text": "two"})
        async with http_demo(tmp_path, port):  # back on the same port: the next call reconnects
            with anyio.fail_after(30):
                assert (await echo.invoke({"text": "three"})).content == "echo: three"
        assert echo._connection.starts == 2
