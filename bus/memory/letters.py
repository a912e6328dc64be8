"""Dead letters in process: the newest :data:`~baton.bus.parts.dead.DEAD_LETTERS_KEPT`."""

from __future__ import annotations

from baton.bus.memory.core import MemoryCore
from baton.bus.messages import DeadLetter
from baton.bus.parts.dead import DeadLetters


class MemoryDeadLetters(DeadLetters):
    """A bounded deque on the broker, shared by every peer."""

    def __init__(self, core: MemoryCore) -> None:
        self._dead = core.broker.dead

    async def put(self, letter: DeadLetter) -> None:
        self._dead.append(letter)

    async def recent(self, count: int = 100) -> list[DeadLetter]:
        return list(self._dead)[-count:]
