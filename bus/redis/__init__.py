"""The Redis backend (``redis://``, ``rediss://``, ``unix://``): :class:`RedisBus` and its parts.

One module per part of the bus, over :mod:`baton.bus.redis.core` (retries, fault epochs,
wake-ups; its clients in :mod:`baton.bus.redis.connections`); every key name in
:mod:`baton.bus.redis.keys` and every Lua script in :mod:`baton.bus.redis.scripts` (the
``scripts/*.lua`` beside it), so a client for another Redis topology needs to change only the core
and its connections.
"""

from __future__ import annotations

from baton.bus.redis.bus import RedisBus

__all__ = ["RedisBus"]
