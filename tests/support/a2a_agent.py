"""A remote A2A agent for the tests, built from the official SDK's own server parts
(``DefaultRequestHandler``, ``InMemoryTaskStore``, its JSON-RPC and card routes) and served by
uvicorn on a free loopback port: what a baton profile of ``kind = "a2a"`` delegates to.

What it does depends on the words of the task (so one agent serves every test):

- ``paint X``: WORKING "sketching X", an artifact with a url part (``.../X.png``) and a text
  artifact "painted X", then COMPLETED;
- ``ask X``: WORKING, then INPUT_REQUIRED "which colour for X?"; the next message of the same
  task is the colour: it paints "X in <colour>" as above;
- ``stubborn X``: holds like ``hold``, but answers ``CancelTask`` only once the test sets
  ``Seen.release``;
- ``flaky X``: its stream breaks off (the connection cut mid-body) after the first event; once
  the caller has subscribed to the task again, it paints X as above;
- ``quiz X``: like ``ask``, but every answer is met with another question, "and which size?";
- ``draw X``: a PNG sent inline (a ``raw`` part), then COMPLETED;
- ``hold X``: WORKING, then waits until the task is cancelled (``CancelTask``);
- ``stall X``: says nothing (not even its task) until the test sets ``Seen.release``, then holds
  as above: a cancel that lands while it is silent is one the remote cannot be told by name yet;
- ``fail X``: FAILED "cannot do X".

It records what a test asserts on: every message (its text, contextId, taskId), every task it
was asked to cancel, and the ``traceparent`` header of every request.
"""

from __future__ import annotations

import json
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from functools import partial

import anyio
import uvicorn
from a2a.helpers import new_task_from_user_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    Message,
    Part,
    TaskState,
)
from a2a.utils.constants import TransportProtocol
from starlette.applications import Starlette
from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.types import Message as Message_

from baton.subagents.png import picture_for


@dataclass
class Seen:
    """What the agent received."""

    messages: list[tuple[str, str, str]] = field(default_factory=list)
    """(text, contextId, taskId) of every message, in order."""
    cancelled: list[str] = field(default_factory=list)
    traceparents: list[str] = field(default_factory=list)
    holding: anyio.Event = field(default_factory=anyio.Event)
    """Set once a ``hold`` task is working (a test may then cancel its session)."""
    cancel_seen: anyio.Event = field(default_factory=anyio.Event)
    stalled: anyio.Event = field(default_factory=anyio.Event)
    """Set once a ``stall`` task's message arrived (its task not yet told to the caller)."""
    release: anyio.Event = field(default_factory=anyio.Event)
    """Set by a test: a ``stall`` task names itself and holds."""
    stalled_task: str = ""
    methods: list[str] = field(default_factory=list)
    """The JSON-RPC method of every request to the agent's endpoint, in order."""
    resubscribed: anyio.Event = field(default_factory=anyio.Event)
    """Set once a ``SubscribeToTask`` stream has started (its snapshot sent)."""


class PainterExecutor(AgentExecutor):
    def __init__(self, seen: Seen, base_url: str) -> None:
        self.seen = seen
        self.base_url = base_url

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        message = context.message
        assert message is not None
        text = context.get_user_input()
        task = context.current_task
        if task is None:
            task = new_task_from_user_message(message)
            if text.startswith("stall "):  # the message is here, its task not yet told
                self.seen.stalled_task = task.id
                self.seen.stalled.set()
                await self.seen.release.wait()
            await event_queue.enqueue_event(task)
        self.seen.messages.append((text, task.context_id, message.task_id))
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        if task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED:  # the answer to a question
            asked = task.history[0].parts[0].text if task.history else "it"
            if asked.startswith("quiz "):
                await updater.requires_input(_say(updater, "and which size?"))
                return
            subject = _subject(asked)
            await self._paint(updater, f"{subject} in {text}")
            return
        verb, _, subject = text.partition(" ")
        if verb == "paint":
            await self._paint(updater, subject)
        elif verb == "draw":
            picture = Part(raw=picture_for(subject), media_type="image/png", filename="x.png")
            await updater.add_artifact([picture], name="drawing")
            await updater.complete(_say(updater, f"drew {subject}"))
        elif verb in ("ask", "quiz"):
            await updater.start_work(_say(updater, f"thinking about {subject}"))
            await updater.requires_input(_say(updater, f"which colour for {subject}?"))
        elif verb == "flaky":
            await self.seen.resubscribed.wait()  # its first stream was broken off meanwhile
            await self._paint(updater, subject)
        elif verb in ("hold", "stall", "stubborn"):
            await updater.start_work(_say(updater, f"holding {subject}"))
            self.seen.holding.set()
            await anyio.sleep_forever()
        else:
            await updater.failed(_say(updater, f"cannot do {subject or text}"))

    async def _paint(self, updater: TaskUpdater, subject: str) -> None:
        await updater.start_work(_say(updater, f"sketching {subject}"))
        name = "-".join(subject.split()) or "picture"
        url = f"{self.base_url}/media/{name}.png"
        await updater.add_artifact([Part(url=url, media_type="image/png")], name="picture")
        await updater.add_artifact([Part(text=f"painted {subject}")], name="note")
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        task_id = context.task_id or ""
        self.seen.cancelled.append(task_id)
        self.seen.cancel_seen.set()
        task = context.current_task
        if (
            task is not None
            and task.history
            and task.history[0].parts[0].text.startswith("stubborn ")
        ):
            await self.seen.release.wait()
        updater = TaskUpdater(event_queue, task_id, task.context_id if task else "")
        await updater.cancel()


def _say(updater: TaskUpdater, text: str) -> Message:
    return updater.new_agent_message([Part(text=text)])


def _subject(text: str) -> str:
    return text.partition(" ")[2] or text


class _RecordTrace:
    """ASGI middleware: keeps the ``traceparent`` header of every request."""

    def __init__(self, app: ASGIApp, seen: Seen) -> None:
        self.app = app
        self.seen = seen

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = dict(scope["headers"])
            parent = headers.get(b"traceparent")
            if parent is not None:
                self.seen.traceparents.append(parent.decode())
        await self.app(scope, receive, send)


class _BrokenOff(Exception):
    """Raised into the server to cut a ``flaky`` stream's connection mid-body."""


class _Streams:
    """ASGI middleware: records each JSON-RPC method, notes when a ``SubscribeToTask`` stream
    has started, and breaks off the stream of a ``flaky`` message after its first event."""

    def __init__(self, app: ASGIApp, seen: Seen) -> None:
        self.app = app
        self.seen = seen

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        read: list[Message_] = []
        while not read or read[-1].get("more_body", False):
            read.append(await receive())
        body = b"".join(message.get("body", b"") for message in read)
        try:
            method = str(json.loads(body).get("method", ""))
        except ValueError:
            method = ""
        self.seen.methods.append(method)
        breaking = method == "SendStreamingMessage" and b"flaky " in body

        async def replay() -> Message_:
            return read.pop(0) if read else await receive()

        async def sending(message: Message_) -> None:
            await send(message)
            if message["type"] == "http.response.body" and message.get("body"):
                if method == "SubscribeToTask":
                    self.seen.resubscribed.set()
                if breaking:
                    raise _BrokenOff("the test breaks off this stream")

        await self.app(scope, replay, sending)


def card_for(base_url: str) -> AgentCard:
    return AgentCard(
        name="test painter",
        description="Paints pictures remotely.",
        version="1.0.0",
        supported_interfaces=[
            AgentInterface(
                url=f"{base_url}/a2a",
                protocol_binding=TransportProtocol.JSONRPC,
                protocol_version="1.0",
            )
        ],
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain", "image/png"],
        skills=[
            AgentSkill(
                id="paint",
                name="paint",
                description="paints what it is told, as a PNG",
                tags=["art"],
            )
        ],
    )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@asynccontextmanager
async def serve_agent() -> AsyncIterator[tuple[str, Seen]]:
    """The agent on a free loopback port; yields its root URL and what it sees. The socket is
    bound and listening before uvicorn starts, so the agent takes requests at once (they wait in
    the socket's backlog until uvicorn accepts them)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    port = sock.getsockname()[1]
    base_url = f"http://127.0.0.1:{port}"
    seen = Seen()
    card = card_for(base_url)
    handler = DefaultRequestHandler(
        agent_executor=PainterExecutor(seen, base_url),
        task_store=InMemoryTaskStore(),
        agent_card=card,
    )
    routes = [*create_agent_card_routes(card), *create_jsonrpc_routes(handler, "/a2a")]
    app = _RecordTrace(_Streams(Starlette(routes=routes), seen), seen)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    with sock:
        async with anyio.create_task_group() as group:
            group.start_soon(partial(server.serve, sockets=[sock]))
            try:
                yield base_url, seen
            finally:
                server.should_exit = True
