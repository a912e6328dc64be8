"""The in-process bus (``memory://``): the embedded default, shipped in the package."""

from __future__ import annotations

from baton.bus.memory.bus import DEFAULT_FINISHED_KEPT, MemoryBus

__all__ = ["DEFAULT_FINISHED_KEPT", "MemoryBus"]
