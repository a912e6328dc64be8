"""Helpers for the sub-agent tests: a lead's-eye view of the bus, test profiles, PNG checks.

Scripted models, event waits and media paths are shared by every package's tests:
:mod:`tests.support`.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from baton.bus.base import Bus
from baton.bus.messages import Envelope, MessageType
from baton.engine import LoopLimits, Tool
from baton.llm.script import Json
from baton.llm.types import ChatModel
from baton.subagents.loop import AgentParts, Seat, SubAgent
from baton.subagents.profiles import AgentLimits, Profile
from baton.subagents.tools import builtin_tools

SESSION = "s1"


def profile(
    *tools: str | Tool,
    max_steps: int = 4,
    idle_timeout_s: float = 30.0,
    name: str = "tester",
    loop: LoopLimits | None = None,
) -> Profile:
    catalogue = builtin_tools()
    resolved = tuple(catalogue[t] if isinstance(t, str) else t for t in tools)
    return Profile(
        name=name,
        description="a test agent",
        system_prompt="[baton:subagent] You are a test agent.",
        tools=resolved,
        limits=AgentLimits(
            max_steps=max_steps, idle_timeout_s=idle_timeout_s, loop=loop or LoopLimits()
        ),
    )


def seated(
    bus: Bus, profile: Profile, model: ChatModel, name: str, media_dir: Path, **seat: Any
) -> SubAgent:
    """A sub-agent ``name`` of the test session, its media under ``media_dir``; ``seat``: the
    rest of its :class:`Seat` (``spawn_id``, ``owner``, …)."""
    return SubAgent(
        bus, profile, model, Seat(SESSION, name, **seat), AgentParts(media_dir=media_dir)
    )


def task(recipient: str, content: str, *, type: MessageType = "task", **extra: Any) -> Envelope:
    return Envelope(
        session=SESSION, sender="lead", recipient=recipient, type=type, content=content, **extra
    )


@dataclass
class Lead:
    """Reads the lead's inbox the way a lead would, keeping what came in."""

    bus: Bus
    session: str = SESSION
    name: str = "lead"
    messages: list[Envelope] = field(default_factory=list)

    @property
    def results(self) -> list[Envelope]:
        return [m for m in self.messages if m.type == "result"]

    def results_from(self, agent: str) -> list[Envelope]:
        return [m for m in self.results if m.sender == agent]

    @property
    def progress(self) -> list[Envelope]:
        return [m for m in self.messages if m.type == "progress"]

    async def collect(self) -> list[Envelope]:
        fresh = await self.bus.inboxes.read(self.session, self.name)
        if fresh:
            await self.bus.inboxes.ack(self.session, self.name, [m.id for m in fresh])
        self.messages.extend(fresh)
        return fresh

    async def until_results(self, count: int, timeout: float = 20.0) -> list[Envelope]:
        """Wait (on bus wake-ups) until ``count`` results came in; fails after ``timeout``."""
        with anyio.fail_after(timeout):
            await self.collect()
            while len(self.results) < count:
                await self.bus.inboxes.wait(self.session, self.name, 1.0)
                await self.collect()
        return self.results


def read_png(path: Path) -> tuple[int, int, bytes]:
    """Validate a PNG (signature, chunk CRCs, IDAT size) and return width, height, raw rows."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, chunks = 8, {}
    idat = b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind = data[pos + 4 : pos + 8]
        body = data[pos + 8 : pos + 8 + length]
        (crc,) = struct.unpack(">I", data[pos + 8 + length : pos + 12 + length])
        assert zlib.crc32(kind + body) & 0xFFFFFFFF == crc, f"bad CRC in {kind!r}"
        chunks[kind] = body
        if kind == b"IDAT":
            idat += body
        pos += 12 + length
    width, height = struct.unpack(">II", chunks[b"IHDR"][:8])
    raw = zlib.decompress(idat)
    assert len(raw) == height * (1 + 3 * width)
    assert b"IEND" in chunks
    return width, height, raw


def last_user_text(body: Json) -> str:
    users = [m for m in body.get("messages", []) if m.get("role") == "user"]
    return str(users[-1]["content"]) if users else ""
