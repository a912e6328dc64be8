"""Helpers of the MCP server tests: the official ``mcp`` Python client connected to ``baton mcp``
(stdio) or to ``/mcp`` of a ``baton serve`` (Streamable HTTP), at either protocol revision, and
the scenarios the issue asks for, each a function of a connected :class:`Host`."""

from __future__ import annotations

import base64
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.context import ClientRequestContext
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import (
    CallToolResult,
    ElicitRequestFormParams,
    ElicitRequestParams,
    ElicitResult,
    ImageContent,
    ResourceLink,
    TextContent,
)

from baton.server import BatonServer
from tests.cli.helpers import BATON, clean_env

ERAS = ["legacy", "2026-07-28"]
"""The client's mode: the 2025-11-25 handshake, or 2026-07-28 pinned."""
TOKEN = "mcp-server-tests-token-0123456789"
PNG = b"\x89PNG\r\n\x1a\n"
TWO_PICTURES = "paint a fox and paint a heron"
PUBLISH = "publish a haiku"  # the publisher's exhibit: a gated tool that makes media

Answer = Callable[[ElicitRequestParams], Awaitable[ElicitResult]]


@dataclass
class Host:
    """A connected client, as a host uses it: the progress lines of its calls, the questions it
    was asked, and how it answers them (``answer``; None: it declared no elicitation)."""

    client: Client = field(init=False)
    answer: Answer | None = None
    lines: list[str] = field(default_factory=list)
    asked: list[ElicitRequestParams] = field(default_factory=list)

    async def elicit(
        self, context: ClientRequestContext, params: ElicitRequestParams
    ) -> ElicitResult:
        self.asked.append(params)
        assert self.answer is not None, "asked a question it was not told how to answer"
        return await self.answer(params)

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        self.lines.append(message or "")

    async def run(self, **arguments: Any) -> CallToolResult:
        return await self.client.call_tool("run", arguments, progress_callback=self.progress)

    def session_started(self) -> str:
        """The session id the progress lines named as started."""
        for line in self.lines:
            found = re.match(r"session (s-[0-9a-f]{12}) started", line)
            if found:
                return found[1]
        raise AssertionError(f"no session started in {self.lines}")


def approving(approved: bool) -> Answer:
    async def answer(params: ElicitRequestParams) -> ElicitResult:
        return ElicitResult(action="accept", content={"approved": approved, "reason": "the test"})

    return answer


async def declining(params: ElicitRequestParams) -> ElicitResult:
    return ElicitResult(action="decline")


@asynccontextmanager
async def over_http(
    server: BatonServer, era: str, *, eliciting: bool = True
) -> AsyncIterator[Host]:
    """A client of ``server``'s ``/mcp``, with its token."""
    host = Host()
    url = server.url.replace("0.0.0.0", "127.0.0.1") + "/mcp"
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=120)) as http:
        transport = streamable_http_client(url, http_client=http)
        callback = host.elicit if eliciting else None
        async with Client(transport, mode=era, elicitation_callback=callback) as client:
            host.client = client
            yield host


@asynccontextmanager
async def over_stdio(
    tmp: Path, profiles: Path, era: str, *, args: Sequence[str] = ()
) -> AsyncIterator[Host]:
    """A client of a ``baton mcp`` process it starts (media under ``tmp``), as a desktop host
    starts it: the command, its arguments (``args`` after the profiles), its environment."""
    host = Host()
    env = clean_env(tmp)
    params = StdioServerParameters(
        command=BATON, args=["mcp", "--profiles", str(profiles), *args], env=env, cwd=str(tmp)
    )
    async with Client(params, mode=era, elicitation_callback=host.elicit) as client:
        host.client = client
        yield host


def _texts(result: CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, TextContent))


# -- the scenarios ---------------------------------------------------------------------------------


async def paints_two_pictures(host: Host) -> CallToolResult:
    """``run`` paints two pictures: progress lines while it runs, then the answer, two links and
    two pictures inline, and the session's end in ``structuredContent``."""
    result = await host.run(task=TWO_PICTURES)
    assert not result.is_error, _texts(result)
    structured = result.structured_content
    assert structured is not None
    assert structured["status"] == "completed" and structured["notes"] == []
    assert len(structured["media_urls"]) == 2
    assert "painter" in structured["answer"]
    images = [block for block in result.content if isinstance(block, ImageContent)]
    links = [block for block in result.content if isinstance(block, ResourceLink)]
    assert len(images) == 2 and len(links) == 2
    assert all(base64.b64decode(image.data).startswith(PNG) for image in images)
    assert all(link.uri.startswith("baton://media/") and link.mime_type == "image/png"
               for link in links)  # fmt: skip
    session = host.session_started()
    assert structured["session"] == session
    for expected in ("lead → painter: paint a fox", "painter: round 1", "painter-2 done",
                     f"session {session} completed"):  # fmt: skip
        assert any(line.startswith(expected) for line in host.lines), (expected, host.lines)
    read = await host.client.read_resource(links[0].uri)  # the picture, through MCP
    [contents] = read.contents
    assert base64.b64decode(getattr(contents, "blob", "")).startswith(PNG)
    return result


async def approval_accepted(host: Host) -> None:
    """The approval reaches the host as a form; approved, the tool runs and the session
    completes with the medium it made."""
    host.answer = approving(True)
    result = await host.run(task=PUBLISH)
    [asked] = host.asked
    assert isinstance(asked, ElicitRequestFormParams)  # form mode: every eliciting host has it
    assert asked.requested_schema["properties"]["approved"]["type"] == "boolean"
    assert "reason" in asked.requested_schema["properties"]
    assert "publisher wants to run exhibit" in asked.message
    structured = result.structured_content
    assert structured is not None and not result.is_error
    assert structured["status"] == "completed"
    [card] = structured["media_urls"]
    assert card.endswith("publisher-card.txt")
    assert any("asks a person to approve exhibit" in line for line in host.lines)


async def approval_declined(host: Host) -> None:
    """Declined, the tool does not run: the session ends ``incomplete`` (its publisher made
    nothing), still a result, and its notes say why."""
    host.answer = declining
    result = await host.run(task=PUBLISH)
    assert len(host.asked) == 1
    structured = result.structured_content
    assert structured is not None and not result.is_error
    assert structured["status"] == "incomplete" and structured["media_urls"] == []
    assert any("no media was produced" in note for note in structured["notes"])
    assert "exhibit did not run" in structured["answer"]
    assert "incomplete" in _texts(result)


async def bad_arguments_then_a_call_that_works(host: Host) -> None:
    """A call with no task is a tool error naming the argument; nothing starts, and the next
    call works."""
    missing = await host.client.call_tool("run", {})
    assert missing.is_error and _texts(missing) == "run: task: Field required"
    blank = await host.client.call_tool("run", {"task": "   "})
    assert blank.is_error and _texts(blank).startswith("run: task: String should not be blank")
    odd = await host.client.call_tool("run", {"task": "paint", "colour": "red"})
    assert odd.is_error and _texts(odd).startswith("run: colour: unknown argument")
    profile = await host.client.call_tool("run", {"task": "paint", "profiles": ["sculptor"]})
    assert profile.is_error and "unknown profile 'sculptor'" in _texts(profile)
    with pytest.raises(MCPError) as unknown:
        await host.client.call_tool("paint", {"task": "a fox"})
    assert unknown.value.error.code == -32602 and "Unknown tool" in unknown.value.error.message
    assert host.lines == []  # nothing ran
    result = await host.run(task="paint a fox")
    assert result.structured_content is not None
    assert result.structured_content["status"] == "completed"


async def cancelled_while_it_asks(host: Host) -> None:
    """The ``cancel`` tool, called while the session waits for its approval, ends it
    ``cancelled``: ``run`` returns that as its result, not an error. (The question dies with
    the session: on 2025-11-25 the server cancels its elicitation request, so the callback may
    not live to see the cancel's reply.)"""

    async def cancel_instead(params: ElicitRequestParams) -> ElicitResult:
        await host.client.call_tool("cancel", {"session": host.session_started()})
        return ElicitResult(action="decline")

    host.answer = cancel_instead
    result = await host.run(task=PUBLISH)
    structured = result.structured_content
    assert structured is not None and not result.is_error
    assert structured["status"] == "cancelled"
    session = host.session_started()
    assert structured["session"] == session
    state = await host.client.call_tool("state", {"session": session})
    assert state.structured_content is not None
    assert state.structured_content["status"] == "cancelled"
    again = await host.client.call_tool("cancel", {"session": session})
    assert again.is_error and "is not running" in _texts(again)


async def a_file_by_url(host: Host) -> None:
    """A question for a file is a form for a URL: a ``file:`` URL is refused and asked again
    with the refusal said; a ``data:`` URL carrying the file is taken, and the reviewer has it."""
    notes = "data:text/plain;base64," + base64.b64encode(b"my notes: buy milk").decode()
    answers = iter(["file:///etc/passwd", notes])

    async def by_url(params: ElicitRequestParams) -> ElicitResult:
        return ElicitResult(action="accept", content={"url": next(answers)})

    host.answer = by_url
    result = await host.run(task="review my notes")
    first, second = host.asked
    assert isinstance(first, ElicitRequestFormParams)
    assert first.requested_schema["properties"]["url"]["format"] == "uri"
    assert first.message.startswith("reviewer asks for a file: review my notes")
    assert second.message.startswith("That answer was refused: the URL 'file:///etc/passwd'")
    structured = result.structured_content
    assert structured is not None and structured["status"] == "completed"
    assert structured["media_urls"] == [notes]


async def looser_approvals_are_refused(host: Host) -> None:
    """On a server whose policy is ``ask`` (the default), ``approve="auto"`` is a tool error that
    names the policy and the operator's flag, and starts nothing; a stricter ``deny`` runs, the
    gated tool declined by the policy whatever the host would say."""
    looser = await host.run(task=PUBLISH, approve="auto")
    assert looser.is_error and looser.structured_content is None
    said = _texts(looser)
    assert 'approval policy ("ask")' in said and "--approve auto" in said, said
    assert "no session was started" in said
    assert host.lines == [] and host.asked == []  # nothing started, nobody asked
    host.answer = approving(True)  # the policy decides first; a host asked anyway says yes
    stricter = await host.run(task=PUBLISH, approve="deny")
    structured = stricter.structured_content
    assert structured is not None and not stricter.is_error
    assert structured["status"] == "incomplete" and structured["media_urls"] == []


SCENARIOS = {
    "paints_two_pictures": paints_two_pictures,
    "approval_accepted": approval_accepted,
    "approval_declined": approval_declined,
    "file_by_url": a_file_by_url,
    "bad_arguments": bad_arguments_then_a_call_that_works,
    "cancel": cancelled_while_it_asks,
    "looser_approvals": looser_approvals_are_refused,
}


async def fresh(host: Host) -> Host:
    """The host with no lines and no questions yet (between scenarios on one connection)."""
    host.lines.clear()
    host.asked.clear()
    host.answer = None
    await anyio.lowlevel.checkpoint()
    return host
