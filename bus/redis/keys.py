"""Every Redis key and channel name baton uses, in one place (DESIGN §2, ``docs/protocol.md``).

The session id is wrapped in a hash tag (``{S}``) so all of one session's keys land in one Redis
Cluster slot, which is what lets ``send`` be a single atomic script. Spawn requests are routed by
key: a session's own stream, or one stream per pool and profile. Those names are the routing rule
of the wire contract, which the memory bus follows too, so they come from
:class:`~baton.bus.parts.routes.SpawnRoutes` (``spawn_local``, ``spawn_pool``, ``spawn_wake``,
``spawn_stream``, ``spawn_queue``, ``spawn_channel``); every other name is here.
"""

from __future__ import annotations

from dataclasses import dataclass

from baton.bus.parts.routes import SpawnRoutes
from baton.bus.parts.store import StoreTable

INBOX_GROUP = "agents"
SPAWN_GROUP = "workers"


@dataclass(frozen=True, slots=True)
class Keys(SpawnRoutes):
    """The key and channel names under one ``prefix`` (``baton`` unless ``--prefix`` says)."""

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

    def table(self, session: str, table: StoreTable) -> str:
        """One table of the session's store (a hash): ``tokens`` (token digest → scope,
        ``docs/http.md``) or ``mcp_tasks`` (task id digest → task record,
        ``docs/mcp-server.md``)."""
        return f"{self.prefix}:{{{session}}}:{table}"

    def workers(self, pool: str) -> str:
        """The workers serving a pool (a sorted set: each worker's announcement, scored by when
        it lapses, in server milliseconds); the pool's hash tag, like its spawn streams."""
        return f"{self.prefix}:workers:{{{pool}}}"

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
