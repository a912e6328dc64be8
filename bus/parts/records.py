"""Records: each agent's state, and the session lead's lease and record."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass

LEAD_LEASE_S = 10.0
"""How long a session's lead lease lasts unless renewed (the ``lead_lease`` setting's default):
how long ``baton resume`` waits after a lead died, and how soon ``baton watch`` sees it lost."""


@dataclass(frozen=True, slots=True)
class LeadLease:
    """How :meth:`Records.hold_lead` went: ``held`` (the fields were written), or the lead that
    holds the lease instead (``holder``) and how long it still has (``ttl_s``). ``unread``: the
    lease is this holder's (taken or renewed), but the fields were not written, because the inbox
    the write was made conditional on holds messages nobody has read (``if_read``)."""

    held: bool
    holder: str = ""
    ttl_s: float = 0.0
    unread: bool = False


class Records(ABC):
    """Small string-to-string records any process of a session reads and merges into.

    An agent's record holds its status, its worker, its checkpoint; the lead's holds the
    session's status, setup and checkpoint, fenced by a lease so that one lead runs a session
    (``docs/protocol.md``). Every method may raise ``BusUnreachable`` when the backend cannot be
    reached after its retries, and ``BusClosed`` after the bus was closed.
    """

    @abstractmethod
    async def set_agent(
        self,
        session: str,
        agent: str,
        fields: Mapping[str, str],
        *,
        if_owner: str | None = None,
    ) -> bool:
        """Merge fields into the agent's state record (status, worker, checkpoint...); True
        when written.

        ``if_owner``: only while the record's ``owner`` is that worker, in one step (False: the
        record names another owner, or none, and nothing was written). A worker whose lease
        lapsed and whose agent another took over must not write over the new owner's
        checkpoint; a look, then a write, leaves a window between them and costs a second round
        trip on every round of every agent.
        """

    @abstractmethod
    async def agent(self, session: str, agent: str) -> dict[str, str]:
        """The agent's state record; empty when it has none."""

    @abstractmethod
    async def hold_lead(
        self,
        session: str,
        holder: str,
        lease_s: float,
        fields: Mapping[str, str] | None = None,
        *,
        if_read: str | None = None,
    ) -> LeadLease:
        """Take or renew the session's lead lease for ``holder`` and merge ``fields`` into the
        lead's record, in one step; when another holder's lease is live, write nothing.

        ``lease_s`` 0 writes, then gives the lease up (a lead that finished). The lease lets one
        lead run a session and fences its checkpoints (``docs/protocol.md``).

        ``if_read`` names an agent of the session (the lead): the step then writes no field
        (the lease is still taken or renewed) while that agent's inbox holds an entry delivered
        to no reader yet, and answers ``unread``. A lead closes its session this way: the look at
        its inbox and the status that stops posts (``send_if_running``) are one step, so a post
        either lands before it (and is read) or is refused (``SessionNotRunning``), never lost
        between the lead's last read and its end.
        """

    @abstractmethod
    async def lead(self, session: str) -> dict[str, str]:
        """The lead's record (status, setup, checkpoint...); empty when it has none."""

    @abstractmethod
    async def lead_lease(self, session: str) -> LeadLease | None:
        """Who holds the session's lead lease now (``held`` True, the holder, the time it has
        left), without touching it; None when nobody does (no lead yet, or its lease lapsed)."""
