"""Spawn requests on Redis, from the session's side: one stream per route.

Routing is by key (``docs/protocol.md``, *Spawn requests and worker pools*): a session's own
stream ``baton:{S}:spawn``, read only by the worker inside that session, and a stream per pool and
profile ``baton:spawn:{P}:<profile>``, read only by that pool's workers that know the profile
(:mod:`baton.bus.parts.routes`). A submit appends and wakes the stream's workers in one script; a
withdrawal deletes a request only while no worker has it (:file:`scripts/withdraw_spawn.lua`), and
the agent's inbox with it. Workers take requests in :mod:`baton.bus.redis.claims`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from baton.bus.errors import InvalidEnvelope
from baton.bus.messages import SpawnRequest, parse_spawn_request
from baton.bus.parts.spawns import Spawns, SpawnState, spawn_receipt, spawn_receipts_by_stream
from baton.bus.redis.core import RedisCore, entry_fields
from baton.bus.redis.keys import SPAWN_GROUP
from baton.bus.redis.scripts import SPAWN_STATES, WITHDRAW_SPAWN, Script


async def per_stream(
    core: RedisCore, script: Script, grouped: dict[str, list[str]], *args: str | int
) -> list[Any]:
    """Run ``script`` once per stream of ``grouped`` (stream → entry ids) with the spawn
    group, ``args`` and the stream's ids, all in one round trip; the replies in stream order."""
    return await core.call(
        *(script.call(stream, SPAWN_GROUP, *args, *ids) for stream, ids in grouped.items())
    )


class RedisSpawns(Spawns):
    """Submit, look at, withdraw and drop spawn requests on Redis."""

    def __init__(self, core: RedisCore) -> None:
        super().__init__(core.options)
        self._core = core

    async def _submit(self, request: SpawnRequest) -> str:
        keys = self._core.keys
        stream = keys.spawn_stream(request)
        entry_id = await self._core.append(
            stream, "req", request.model_dump_json(), keys.spawn_channel(stream)
        )
        return spawn_receipt(stream, entry_id)

    async def withdraw(self, receipts: Sequence[str]) -> list[str]:
        if not receipts:
            return []
        core = self._core
        grouped = spawn_receipts_by_stream(receipts)
        replies = await per_stream(core, WITHDRAW_SPAWN, grouped)
        withdrawn: list[str] = []
        inboxes: list[str] = []
        for stream, reply in zip(grouped, replies, strict=True):
            for entry_id, flat in zip(reply[::2], reply[1::2], strict=True):
                withdrawn.append(spawn_receipt(stream, str(entry_id)))
                raw = (entry_fields(flat) or {}).get("req")
                try:
                    request = parse_spawn_request(raw or "")
                except InvalidEnvelope:  # not a request: no inbox of an agent goes with it
                    continue
                inboxes.append(core.keys.inbox(request.session, request.agent))
        if inboxes:  # the agents never ran: what was sent to them goes too
            await core.call(*(("DEL", key) for key in inboxes))
            core.groups.deleted(inboxes)
        return withdrawn

    async def states(self, receipts: Sequence[str]) -> dict[str, SpawnState]:
        if not receipts:
            return {}
        grouped = spawn_receipts_by_stream(receipts)
        replies = await per_stream(self._core, SPAWN_STATES, grouped)
        states: dict[str, SpawnState] = {}
        for (stream, ids), reply in zip(grouped.items(), replies, strict=True):
            for entry_id, state in zip(ids, reply, strict=True):
                word = str(state)
                known: SpawnState = (
                    "queued" if word == "queued" else "claimed" if word == "claimed" else "gone"
                )
                states[spawn_receipt(stream, entry_id)] = known
        return states

    async def drop_queue(self, session: str) -> int:
        core = self._core
        key = core.keys.spawn_local(session)
        held, _ = await core.call(("XLEN", key), ("DEL", key))
        core.groups.deleted([key])
        return int(held)
