"""Spawn requests in process, from the session's side: streams named and routed as on Redis
(:mod:`baton.bus.parts.routes`)."""

from __future__ import annotations

from collections.abc import Sequence

from baton.bus.errors import InvalidEnvelope
from baton.bus.memory.core import ROUTES, MemoryCore, spawn_channel
from baton.bus.messages import SpawnRequest, parse_spawn_request
from baton.bus.parts.spawns import Spawns, SpawnState, spawn_receipt, spawn_receipts_by_stream


class MemorySpawns(Spawns):
    """Submit, look at, withdraw and drop spawn requests in process."""

    def __init__(self, core: MemoryCore) -> None:
        super().__init__(core.options)
        self._core = core
        self._broker = core.broker

    async def _submit(self, request: SpawnRequest) -> str:
        self._core.check_open()
        stream = ROUTES.spawn_stream(request)
        entry_id = next(self._broker.seq)
        self._broker.spawn_stream(stream).add(entry_id, request.model_dump_json())
        self._broker.hub.wake(spawn_channel(stream))
        return spawn_receipt(stream, str(entry_id))

    async def withdraw(self, receipts: Sequence[str]) -> list[str]:
        self._core.check_open()
        withdrawn: list[str] = []
        for name, ids in spawn_receipts_by_stream(receipts).items():
            stream = self._broker.spawn_stream(name)
            for number in map(int, ids):
                raw = stream.withdraw(number)
                if raw is None:
                    continue
                withdrawn.append(spawn_receipt(name, str(number)))
                try:
                    request = parse_spawn_request(raw)
                except InvalidEnvelope:  # not a request: no inbox of an agent goes with it
                    continue
                self._broker.drop_inbox(request.session, request.agent)
        return withdrawn

    async def states(self, receipts: Sequence[str]) -> dict[str, SpawnState]:
        self._core.check_open()
        states: dict[str, SpawnState] = {}
        for name, ids in spawn_receipts_by_stream(receipts).items():
            stream = self._broker.spawn.get(name)
            for entry_id in ids:
                number = int(entry_id)
                state: SpawnState = "gone"
                if stream is not None and number in stream.entries:
                    state = "claimed" if number in stream.pending else "queued"
                states[spawn_receipt(name, entry_id)] = state
        return states

    async def drop_queue(self, session: str) -> int:
        self._core.check_open()
        stream = self._broker.spawn.pop(ROUTES.spawn_local(session), None)
        return 0 if stream is None else len(stream.entries)
