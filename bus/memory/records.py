"""Agent state records and the lead's lease and record, in process."""

from __future__ import annotations

from collections.abc import Mapping

import anyio

from baton.bus.memory.core import MemoryCore
from baton.bus.parts.records import LeadLease, Records


class MemoryRecords(Records):
    """Records as dicts on the broker; a lease is its holder and when it ends (anyio's clock).
    No await between a look and its write: each call is one step, as the scripts are on Redis."""

    def __init__(self, core: MemoryCore) -> None:
        self._core = core
        self._broker = core.broker

    async def set_agent(
        self,
        session: str,
        agent: str,
        fields: Mapping[str, str],
        *,
        if_owner: str | None = None,
    ) -> bool:
        self._core.check_open()
        record = self._broker.agents.get((session, agent), {})
        if if_owner is not None and record.get("owner") != if_owner:
            return False
        self._broker.agents[(session, agent)] = record
        record.update(fields)
        return True

    async def agent(self, session: str, agent: str) -> dict[str, str]:
        self._core.check_open()
        return dict(self._broker.agents.get((session, agent), {}))

    async def hold_lead(
        self,
        session: str,
        holder: str,
        lease_s: float,
        fields: Mapping[str, str] | None = None,
        *,
        if_read: str | None = None,
    ) -> LeadLease:
        self._core.check_open()
        now = anyio.current_time()
        current = self._broker.lead_leases.get(session)
        if current is not None and current[0] != holder and current[1] > now:
            return LeadLease(held=False, holder=current[0], ttl_s=current[1] - now)
        inbox = None if if_read is None else self._broker.inboxes.get((session, if_read))
        unread = inbox is not None and bool(inbox.undelivered)
        if fields and not unread:
            self._broker.leads.setdefault(session, {}).update(fields)
        if lease_s > 0:
            self._broker.lead_leases[session] = (holder, now + lease_s)
        else:
            self._broker.lead_leases.pop(session, None)
        return LeadLease(held=True, unread=unread)

    async def lead(self, session: str) -> dict[str, str]:
        self._core.check_open()
        return dict(self._broker.leads.get(session, {}))

    async def lead_lease(self, session: str) -> LeadLease | None:
        self._core.check_open()
        now = anyio.current_time()
        current = self._broker.lead_leases.get(session)
        if current is None or current[1] <= now:
            return None
        return LeadLease(held=True, holder=current[0], ttl_s=current[1] - now)
