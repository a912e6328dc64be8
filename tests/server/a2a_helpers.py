"""Helpers of the A2A tests: a server with chosen profiles, the SDK's client on it, messages."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
from a2a.client import ClientConfig, create_client
from a2a.client.client import Client
from a2a.types import Message, Part, Role, SendMessageRequest, StreamResponse, TaskState

from baton.bus.base import Bus
from baton.server import BatonServer, ServerConfig
from baton.subagents.profiles import load_profiles

TERMINAL = (
    TaskState.TASK_STATE_COMPLETED,
    TaskState.TASK_STATE_FAILED,
    TaskState.TASK_STATE_CANCELED,
)


@asynccontextmanager
async def serving(bus: Bus, tmp: Path, profiles: str, **config: Any) -> AsyncIterator[BatonServer]:
    """A server on a free loopback port over ``bus`` with the profiles of ``profiles`` (TOML)."""
    path = tmp / "a2a-profiles.toml"
    path.write_text(profiles)
    settings = ServerConfig(port=0, bus_url=bus.url, media_dir=tmp / "media", **config)
    async with BatonServer(settings, bus=bus, profiles=load_profiles(path)) as server:
        yield server


def root(server: BatonServer) -> str:
    return server.url.replace("0.0.0.0", "127.0.0.1")


@asynccontextmanager
async def a2a_client(
    server: BatonServer,
    *,
    binding: str = "JSONRPC",
    streaming: bool = True,
    token: str | None = None,
    headers: dict[str, str] | None = None,
) -> AsyncIterator[Client]:
    """The SDK's client for the server, from the card at its root URL, over ``binding``."""
    sent = dict(headers or {})
    if token is not None:
        sent["Authorization"] = f"Bearer {token}"
    async with httpx.AsyncClient(timeout=30.0, headers=sent, trust_env=False) as http:
        config = ClientConfig(
            streaming=streaming, httpx_client=http, supported_protocol_bindings=[binding]
        )
        client = await create_client(root(server), client_config=config)
        try:
            yield client
        finally:
            await client.close()


def user_message(text: str = "", *, task: str = "", context: str = "") -> SendMessageRequest:
    message = Message(message_id=uuid.uuid4().hex, role=Role.ROLE_USER, task_id=task,
                      context_id=context)  # fmt: skip
    if text:
        message.parts.append(Part(text=text))
    return SendMessageRequest(message=message)


def state_of(response: StreamResponse) -> TaskState | None:
    """The task state a stream response reports (a snapshot or a status update), if any."""
    if response.HasField("task"):
        return response.task.status.state
    if response.HasField("status_update"):
        return response.status_update.status.state
    return None


def status_text(response: StreamResponse) -> str:
    """The text of a status update's message ("" for any other response)."""
    if not response.HasField("status_update"):
        return ""
    parts = response.status_update.status.message.parts
    return parts[0].text if parts else ""


def task_id_of(response: StreamResponse) -> str:
    if response.HasField("task"):
        return response.task.id
    if response.HasField("status_update"):
        return response.status_update.task_id
    return response.artifact_update.task_id


async def collect(stream: AsyncIterator[StreamResponse]) -> list[StreamResponse]:
    """Every response of a stream until the server ends it."""
    return [response async for response in stream]


async def hang_up(stream: AsyncIterator[StreamResponse]) -> None:
    """Close a stream half read: the client disconnects, as one that lost its connection."""
    aclose = getattr(stream, "aclose", None)
    if aclose is not None:
        await aclose()
