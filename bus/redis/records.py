"""Agent state records and the lead's lease and record on Redis.

An agent's record is a hash (``baton:{S}:agent:<name>``); the lead's record a hash
(``baton:{S}:lead``) fenced by its lease, a string with a TTL (``baton:{S}:lead:lease``), which
one script (:file:`scripts/hold_lead.lua`) takes or renews together with the record's write.
"""

from __future__ import annotations

from collections.abc import Mapping

from baton.bus.parts.records import LeadLease, Records
from baton.bus.redis.core import RedisCore, entry_fields, flat_fields
from baton.bus.redis.keys import INBOX_GROUP
from baton.bus.redis.scripts import HOLD_LEAD, SET_IF_OWNER


class RedisRecords(Records):
    """Agent records and the lead's lease and record, a command or a script each."""

    def __init__(self, core: RedisCore) -> None:
        self._core = core

    async def set_agent(
        self,
        session: str,
        agent: str,
        fields: Mapping[str, str],
        *,
        if_owner: str | None = None,
    ) -> bool:
        key = self._core.keys.agent(session, agent)
        if if_owner is not None:
            command = SET_IF_OWNER.call_keys([key], if_owner, *flat_fields(fields))
            return bool(int(await self._core.one(*command)))
        if fields:
            await self._core.one("HSET", key, *flat_fields(fields))
        return True

    async def agent(self, session: str, agent: str) -> dict[str, str]:
        reply = await self._core.one("HGETALL", self._core.keys.agent(session, agent))
        return entry_fields(reply) or {}

    async def hold_lead(
        self,
        session: str,
        holder: str,
        lease_s: float,
        fields: Mapping[str, str] | None = None,
        *,
        if_read: str | None = None,
    ) -> LeadLease:
        keys = self._core.keys
        lease_ms = max(1, round(lease_s * 1000)) if lease_s > 0 else 0
        touched = [keys.lead_lease(session), keys.lead(session)]
        if if_read is not None:
            touched.append(keys.inbox(session, if_read))
        command = HOLD_LEAD.call_keys(
            touched,
            holder,
            lease_ms,
            INBOX_GROUP if if_read is not None else "",
            *flat_fields(fields or {}),
        )
        held, other, ttl_ms = await self._core.one(*command)
        if int(held) == 2:
            return LeadLease(held=True, unread=True)
        if int(held):
            return LeadLease(held=True)
        return LeadLease(held=False, holder=str(other), ttl_s=max(0, int(ttl_ms)) / 1000)

    async def lead(self, session: str) -> dict[str, str]:
        return entry_fields(await self._core.one("HGETALL", self._core.keys.lead(session))) or {}

    async def lead_lease(self, session: str) -> LeadLease | None:
        key = self._core.keys.lead_lease(session)
        holder, ttl_ms = await self._core.call(("GET", key), ("PTTL", key))
        if holder is None or int(ttl_ms) < 0:  # gone (a lease is always written with a TTL)
            return None
        return LeadLease(held=True, holder=str(holder), ttl_s=int(ttl_ms) / 1000)
