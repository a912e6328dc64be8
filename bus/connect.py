"""Choose a backend from a URL: ``memory://`` (the default) or ``redis://``/``rediss://``/``unix://``."""

from __future__ import annotations

from urllib.parse import urlsplit

from baton.bus.base import Bus, BusOptions
from baton.bus.errors import ConfigError, redact_url

REDIS_SCHEMES = frozenset({"redis", "rediss", "unix"})


def open_bus(
    url: str = "memory://", options: BusOptions | None = None, *, prefix: str = "baton"
) -> Bus:
    """A not-yet-started bus for ``url``; use it as ``async with open_bus(url) as bus``.

    ``prefix`` is the Redis key prefix (the memory bus has no keys). Raises ``ConfigError`` for
    a URL no backend understands. The Redis backend is imported only when asked for, so the
    in-process default does not pay for it.
    """
    scheme = urlsplit(url).scheme.lower()
    if scheme == "memory":
        from baton.bus.memory import MemoryBus

        return MemoryBus(options, url=url)
    if scheme in REDIS_SCHEMES:
        from baton.bus.redis import RedisBus

        return RedisBus(url, options, prefix=prefix)
    raise ConfigError(
        f"unknown bus URL {redact_url(url)!r}: use memory://, redis://HOST:PORT/DB, rediss://... or unix://PATH"
    )
