"""The Redis bus's health probe: one wake-up round trip, what every waiting agent relies on.

``Bus.probe`` (the server's health check, ``GET /health``) asks more of the bus than a ``PING``:
that a wake-up published now reaches this process's dispatcher. Built from the core's own
operations (watch, publish, wait), apart from it: the core serves the parts, this only checks
them.
"""

from __future__ import annotations

import uuid

import anyio

from baton.bus.errors import BusUnreachable
from baton.bus.redis.core import RedisCore


async def wake_round_trip(core: RedisCore, timeout_s: float) -> None:
    """One wake-up round trip on a fresh channel (SUBSCRIBE, PUBLISH, the message back
    through the dispatcher), within ``timeout_s``; ``BusUnreachable`` saying which step
    did not finish. Exercises what every waiting agent relies on, for three commands."""
    channel = core.keys.probe(uuid.uuid4().hex)
    step = "the subscription was not confirmed"
    try:
        with anyio.move_on_after(timeout_s):
            watch = await core.watch(channel)
            mark = watch.generation
            step = "the wake-up was not published"
            await core.one("PUBLISH", channel, "probe")
            step = "the wake-up did not come back"
            await watch.wait(timeout_s, since=mark)
            if watch.generation != mark:
                return
    finally:
        await core.unwatch(channel)
    core.check_open()
    raise BusUnreachable(core.url, f"no wake-up round trip within {timeout_s:g} s: {step}")
