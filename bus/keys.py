"""Every Redis key and channel name baton uses, in one place (DESIGN §2).

The session id is wrapped in a hash tag (``{S}``) so all of one session's keys land in one Redis
Cluster slot, which is what lets ``send`` be a single atomic script.
"""

from __future__ import annotations

from dataclasses import dataclass

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

    def spend(self, session: str) -> str:
        """The session's budget: a hash of calls, tokens and their caps (``scripts/spend.lua``)."""
        return f"{self.prefix}:{{{session}}}:spend"

    @property
    def spawn(self) -> str:
        """The spawn queue (a stream); the same name is its wake-up channel."""
        return f"{self.prefix}:spawn"

    @property
    def dead(self) -> str:
        return f"{self.prefix}:dead"

    @property
    def sessions(self) -> str:
        """A sorted set of session ids scored by the time their log was last written."""
        return f"{self.prefix}:sessions"
