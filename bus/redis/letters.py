"""Dead letters on Redis: one stream for every session (``baton:dead``), trimmed with
``MAXLEN ~``."""

from __future__ import annotations

from baton.bus.messages import DeadLetter
from baton.bus.parts.dead import DEAD_LETTERS_KEPT, DeadLetters
from baton.bus.redis.core import RedisCore, flat_fields, stream_entries


class RedisDeadLetters(DeadLetters):
    """Each letter one stream entry of its fields (``id``, ``reason``, ``source``, ``session``,
    ``raw``)."""

    def __init__(self, core: RedisCore) -> None:
        self._core = core

    async def put(self, letter: DeadLetter) -> None:
        fields = {
            "id": letter.id,
            "reason": letter.reason,
            "source": letter.source,
            "session": letter.session or "",
            "raw": letter.raw,
        }
        dead = self._core.keys.dead
        await self._core.one(
            "XADD", dead, "MAXLEN", "~", DEAD_LETTERS_KEPT, "*", *flat_fields(fields)
        )

    async def recent(self, count: int = 100) -> list[DeadLetter]:
        rows = stream_entries(
            await self._core.one("XREVRANGE", self._core.keys.dead, "+", "-", "COUNT", count)
        )
        return [
            DeadLetter(
                id=f.get("id", entry_id),
                reason=f.get("reason", ""),
                source=f.get("source", ""),
                session=f.get("session") or None,
                raw=f.get("raw", ""),
            )
            for entry_id, f in ((i, f or {}) for i, f in reversed(rows))
        ]
