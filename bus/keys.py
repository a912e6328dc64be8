"""Every Redis key and channel name baton uses, in one place (DESIGN §2).

The session id is wrapped in a hash tag (``{S}``) so all of one session's keys land in one Redis
Cluster slot, which is what lets ``send`` be a single atomic script. Spawn requests are routed by
key: a session's own stream, or one stream per pool and profile (:meth:`Keys.spawn_stream`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from baton.bus.errors import InvalidEnvelope
from baton.bus.messages import LOCAL_POOL, SpawnRequest

if TYPE_CHECKING:
    from baton.bus.base import SpawnQueue

INBOX_GROUP = "agents"
SPAWN_GROUP = "workers"


@dataclass(frozen=True, slots=True)
class Keys:
    prefix: str = "baton"

    def inbox(self, session: str, agent: str) -> str:
        return f"{self.prefix}:{{{session}}}:inbox:{agent}"

    def wake(self, session: str, agent: str) -> str:
        return f"{self.prefix}:{{{session}}}:wake:{agent}"

    def events(self, session: str) -> str:
        """The session event log (a stream); the same name is its wake-up channel."""
        return f"{self.prefix}:{{{session}}}:events"

    def agent(self, session: str, agent: str) -> str:
        return f"{self.prefix}:{{{session}}}:agent:{agent}"

    def lead(self, session: str) -> str:
        """The lead's record and checkpoint (a hash; ``docs/protocol.md``)."""
        return f"{self.prefix}:{{{session}}}:lead"

    def lead_lease(self, session: str) -> str:
        """The lead's lease: a string holding its holder's name, with a TTL."""
        return f"{self.prefix}:{{{session}}}:lead:lease"

    def spend(self, session: str) -> str:
        """The session's budget: a hash of calls, tokens and their caps (``scripts/spend.lua``)."""
        return f"{self.prefix}:{{{session}}}:spend"

    def tokens(self, session: str) -> str:
        """The session's HTTP tokens: a hash of token digest → scope (``docs/http.md``)."""
        return f"{self.prefix}:{{{session}}}:tokens"

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

    def workers(self, pool: str) -> str:
        """The workers serving a pool (a sorted set: each worker's announcement, scored by when
        it lapses, in server milliseconds); the pool's hash tag, like its spawn streams."""
        return f"{self.prefix}:workers:{{{pool}}}"

    def spawn_channel(self, stream: str) -> str:
        """The wake-up channel of a spawn stream: a pool's streams share their pool's, a
        session's own stream is its own channel. Pool and session names carry no braces, so the
        first ``}`` closes the pool's hash tag."""
        pool_part = f"{self.prefix}:spawn:{{"
        if stream.startswith(pool_part):
            return stream[: stream.index("}", len(pool_part)) + 1]
        return stream

    def session_pattern(self) -> str:
        """A ``SCAN MATCH`` pattern for every key of every session: a session's id is the hash
        tag of each of its keys, and nothing else under the prefix starts with ``{``."""
        escaped = "".join(f"\\{c}" if c in "*?[]\\" else c for c in self.prefix)
        return f"{escaped}:{{*}}:*"

    def session_of(self, key: str) -> str | None:
        """The session a key belongs to (its hash tag), or None for a key of no session."""
        head = f"{self.prefix}:{{"
        if not key.startswith(head):
            return None
        end = key.find("}", len(head))
        return key[len(head) : end] if end > len(head) else None

    def probe(self, token: str) -> str:
        """A channel (never a key) a health probe publishes on once (:meth:`RedisCore.probe`)."""
        return f"{self.prefix}:probe:{token}"

    @property
    def dead(self) -> str:
        return f"{self.prefix}:dead"

    @property
    def sessions(self) -> str:
        """A sorted set of session ids scored by the time their log was last written."""
        return f"{self.prefix}:sessions"
