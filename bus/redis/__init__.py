"""The Redis backend (``redis://``, ``rediss://``, ``unix://``): :class:`RedisBus` and its parts.

One module per part of the bus, over :mod:`baton.bus.redis.core` (connections, retries, fault
epochs, wake-ups); every key name in :mod:`baton.bus.redis.keys` and every Lua script in
:mod:`baton.bus.redis.scripts` (the ``scripts/*.lua`` beside it), so a client for another Redis
topology needs to change only the core.
"""

from __future__ import annotations

from baton.bus.redis.bus import RedisBus

__all__ = ["RedisBus"]
