"""A post is read or refused, never dropped: the lead closes its session in one step with a look
at its inbox (``hold_lead(if_read=...)``, ``docs/protocol.md``). A follow-up that lands between
the lead's last read and its end used to sit unread in a finished session's inbox while its
sender was told it was sent."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path

import anyio
import pytest

from baton.bus.errors import SessionNotRunning
from baton.bus.events import AgentSpawned, AnswerChecked
from baton.bus.parts.records import LeadLease, Records
from baton.session import Session, SessionConfig
from tests.conftest import BusFactory


class PostsBefore(Records):
    """A bus's records, but the lead record's write with the status ``status`` lets ``post``
    land first, once: for ``closing``, the moment after the lead's last read found its inbox
    empty; for ``finishing``, after a lead that never closed stopped reading."""

    def __init__(
        self, records: Records, status: str, post: Callable[[], Awaitable[object]]
    ) -> None:
        self._records = records
        self._status = status
        self._post: Callable[[], Awaitable[object]] | None = post

    async def hold_lead(
        self,
        session: str,
        holder: str,
        lease_s: float,
        fields: Mapping[str, str] | None = None,
        *,
        if_read: str | None = None,
    ) -> LeadLease:
        if (fields or {}).get("status") == self._status and self._post is not None:
            post, self._post = self._post, None
            await post()
        return await self._records.hold_lead(session, holder, lease_s, fields, if_read=if_read)

    async def set_agent(
        self,
        session: str,
        agent: str,
        fields: Mapping[str, str],
        *,
        if_owner: str | None = None,
    ) -> bool:
        return await self._records.set_agent(session, agent, fields, if_owner=if_owner)

    async def agent(self, session: str, agent: str) -> dict[str, str]:
        return await self._records.agent(session, agent)

    async def lead(self, session: str) -> dict[str, str]:
        return await self._records.lead(session)

    async def lead_lease(self, session: str) -> LeadLease | None:
        return await self._records.lead_lease(session)


async def test_a_follow_up_that_lands_after_the_last_read_is_answered(
    make_bus: BusFactory, tmp_path: Path
) -> None:
    config = SessionConfig(task="paint a fox", media_dir=tmp_path)
    with anyio.fail_after(60):
        async with make_bus() as bus:
            async with Session(config, bus=bus) as session:
                follow_up = session.post("also paint a heron")  # as `baton post` would, then
                bus.records = PostsBefore(bus.records, "closing", lambda: follow_up)
                result = await session.run()
    assert result.status == "completed"
    assert len(result.media_urls) == 2, result.answer  # the fox, and the heron asked late


async def test_a_post_after_the_lead_closed_is_refused_not_lost(tmp_path: Path) -> None:
    config = SessionConfig(task="paint a fox", media_dir=tmp_path)
    refused: list[SessionNotRunning] = []
    with anyio.fail_after(60):
        async with Session(config) as session:
            async for event in session.events():
                if isinstance(event, AnswerChecked):  # the lead answered and read its last
                    with pytest.raises(SessionNotRunning) as raised:
                        await session.post("also paint a heron")
                    refused.append(raised.value)
            result = await session.run()
    assert result.status == "completed" and len(result.media_urls) == 1
    assert [exc.status for exc in refused] == ["closing"]


async def test_a_post_no_lead_will_read_goes_to_the_dead_letters_with_why(
    make_bus: BusFactory, tmp_path: Path
) -> None:
    """A cancelled lead stops reading without closing: a post that lands before its outcome is
    recorded is set aside with the reason, not left unread."""
    config = SessionConfig(task="paint a fox", media_dir=tmp_path)
    with anyio.fail_after(60):
        async with make_bus() as bus:
            async with Session(config, bus=bus) as session:
                late = session.post("also paint a heron")
                bus.records = PostsBefore(bus.records, "finishing", lambda: late)
                async for event in session.events():
                    if isinstance(event, AgentSpawned):
                        session.cancel()
                result = await session.run()
            letters = await bus.letters.recent()
    assert result.status == "cancelled"
    assert [(letter.session, letter.reason) for letter in letters] == [
        (session.id, "the session ended (cancelled) before its lead read this post")
    ]
    assert "also paint a heron" in letters[0].raw
