"""Where a spawn request goes: the routing rule, and the names of the streams it routes to.

The rule is part of the wire contract (``docs/protocol.md``, *Spawn requests and worker pools*):
a request for the ``local`` pool goes to its session's own stream, read only by the worker inside
that session; any other to the stream of its pool and profile, read only by that pool's workers
that know the profile. So no worker is ever handed a request it must not or cannot serve.

The names are Redis key names (``docs/protocol.md``, *Redis layout*: a producer in any language
writes there) and both backends use them, so a receipt (``<entry id>@<stream>``) reads the same on
each; :class:`baton.bus.redis.keys.Keys`, the rest of the Redis layout, builds on this class.
"""

from __future__ import annotations

from dataclasses import dataclass

from baton.bus.errors import InvalidEnvelope
from baton.bus.messages import LOCAL_POOL, SpawnRequest
from baton.bus.parts.claims import SpawnQueue


@dataclass(frozen=True, slots=True)
class SpawnRoutes:
    """The spawn streams and their wake-up channels under one key ``prefix``."""

    prefix: str = "baton"

    def spawn_local(self, session: str) -> str:
        """The session's own spawn queue (a stream), read only by the worker inside the session;
        the same name is its wake-up channel."""
        return f"{self.prefix}:{{{session}}}:spawn"

    def spawn_pool(self, pool: str, profile: str) -> str:
        """A pool's spawn queue for one profile (a stream). The pool is the hash tag: a claim
        over several of one pool's streams is one script, in one Redis Cluster slot."""
        return f"{self.spawn_wake(pool)}:{profile}"

    def spawn_wake(self, pool: str) -> str:
        """The wake-up channel of a pool's workers (every profile of the pool)."""
        return f"{self.prefix}:spawn:{{{pool}}}"

    def spawn_stream(self, request: SpawnRequest) -> str:
        """The stream a request belongs in: the whole routing rule (``docs/protocol.md``)."""
        if request.pool == LOCAL_POOL:
            return self.spawn_local(request.session)
        return self.spawn_pool(request.pool, request.profile)

    def check_spawn_stream(
        self, request: SpawnRequest, stream: str, queue: SpawnQueue, raw: str
    ) -> None:
        """Raise ``InvalidEnvelope`` unless ``request`` belongs in ``stream``, where a worker of
        ``queue`` met it (``raw``): a producer writing by hand can put a request where another
        session's worker, or a worker lacking its profile, would run it."""
        belongs = self.spawn_stream(request)
        if belongs != stream:
            raise InvalidEnvelope(
                f"misrouted spawn request: its session, pool and profile put it in "
                f"{belongs!r}, but it sits in {stream!r} ({queue})",
                raw,
            )

    def spawn_queue(self, queue: SpawnQueue) -> tuple[tuple[str, ...], str]:
        """The streams a worker of ``queue`` reads (a pool's in profile order) and the one
        channel that wakes it."""
        if queue.session is not None:
            own = self.spawn_local(queue.session)
            return (own,), own
        streams = tuple(self.spawn_pool(queue.pool, profile) for profile in sorted(queue.profiles))
        return streams, self.spawn_wake(queue.pool)

    def spawn_leases(self, channel: str) -> str:
        """The workers' leases on the streams ``channel`` wakes (a sorted set: consumer -> when
        its lease lapses), in those streams' hash tag: ``<prefix>:leases:{P}`` for a pool,
        ``<prefix>:{S}:leases`` for a session's own stream. Never under ``<prefix>:spawn:{P}:``,
        where any name may be a profile's stream."""
        pool_part = f"{self.prefix}:spawn:"
        if channel.startswith(pool_part + "{"):
            return f"{self.prefix}:leases:{channel[len(pool_part) :]}"
        return f"{channel.removesuffix(':spawn')}:leases"

    def spawn_channel(self, stream: str) -> str:
        """The wake-up channel of a spawn stream: a pool's streams share their pool's, a
        session's own stream is its own channel. Pool and session names carry no braces, so the
        first ``}`` closes the pool's hash tag."""
        pool_part = f"{self.prefix}:spawn:{{"
        if stream.startswith(pool_part):
            return stream[: stream.index("}", len(pool_part)) + 1]
        return stream
