"""Worker announcements: which workers serve a pool now, and for which profiles."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Collection


class Workers(ABC):
    """What a session asks before it gives up on a request nobody claims: is anyone there?

    Both methods may raise ``BusUnreachable`` when the backend cannot be reached after its
    retries, and ``BusClosed`` after the bus was closed.
    """

    @abstractmethod
    async def announce(
        self, pool: str, worker: str, profiles: Collection[str], ttl_s: float
    ) -> None:
        """Say that ``worker`` serves ``pool`` for ``profiles`` for the next ``ttl_s`` seconds
        (a live worker renews it; ``ttl_s`` 0 withdraws it at once: the worker stopped).

        A worker announces the same profiles for its whole life: on Redis an announcement is
        the worker's name with its profiles, so one with other profiles is another
        announcement, which lives (and is withdrawn) on its own."""

    @abstractmethod
    async def live(self, pool: str) -> dict[str, frozenset[str]]:
        """The workers of ``pool`` whose announcement is live, each with the profiles it
        serves."""
