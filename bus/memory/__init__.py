"""The in-process bus (``memory://``): the embedded default, shipped in the package.

:class:`MemoryBus` bundles one module per part (``inboxes``, ``log``, ``spawns``, ``claims``,
``workers``, ``records``, ``budget``, ``store``, ``letters``, ``retention``) over the state they
share (``core``: the broker every peer of a bus holds, and the bound on finished sessions).
"""

from __future__ import annotations

from baton.bus.memory.bus import DEFAULT_FINISHED_KEPT, MemoryBus

__all__ = ["DEFAULT_FINISHED_KEPT", "MemoryBus"]
