"""The HTTP API refuses to send into a session that signs with a key the server lacks, as
``baton post`` and ``baton approve`` do (issue 22): the message would be dead-lettered unread
while the API answered ``202``. Both backends: the server's bus is a peer of the session's, with
no key or another one."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
from pydantic import SecretStr

from baton.bus.base import Bus
from baton.bus.signing import key_id
from baton.session import open_session
from tests.conftest import BusFactory
from tests.server.helpers import client, serving

LEAD_KEY = SecretStr("the session's signing key")


@asynccontextmanager
async def signing_session(bus: Bus, tmp_path: Path) -> AsyncIterator[str]:
    """A session on ``bus`` (which signs) that runs for as long as the block: its sub-agent
    waits for a pool nobody serves."""
    session = open_session("paint a fox", bus=bus, local_workers=False, pool="nobody",
                           unclaimed_s=600, timeout_s=600, media_dir=tmp_path)  # fmt: skip
    async with session:
        session.start()
        with anyio.fail_after(20):  # session.started follows the setup, with its key id
            async for event in session.events():
                if event.type == "session.started":
                    break
        yield session.id
        session.cancel()


@pytest.mark.parametrize("server_key", [None, "another key"], ids=["no key", "another key"])
async def test_a_message_or_an_answer_without_the_session_s_key_is_refused_unsent(
    make_bus: BusFactory, tmp_path: Path, server_key: str | None
) -> None:
    signed = make_bus(signing_key=LEAD_KEY)
    other = make_bus(signing_key=SecretStr(server_key) if server_key else None)
    async with signed, other, signing_session(signed, tmp_path) as session:
        async with serving(other, tmp_path) as server, client(server) as http:
            posted = await http.post(
                f"/sessions/{session}/messages", json={"content": "also a heron", "to": "lead"}
            )
            answered = await http.post(
                f"/sessions/{session}/approvals/call_1", json={"approved": True, "reason": ""}
            )
        letters = [d for d in await signed.letters.recent() if d.session == session]
    for response in (posted, answered):
        assert response.status_code == 409, response.text
        detail = response.json()["detail"]
        assert "signing key mismatch" in detail and f"key id {key_id(LEAD_KEY)}" in detail
    assert letters == []  # nothing was sent to be refused


async def test_with_the_session_s_key_the_message_goes_out(
    make_bus: BusFactory, tmp_path: Path
) -> None:
    signed, peer = make_bus(signing_key=LEAD_KEY), make_bus(signing_key=LEAD_KEY)
    async with signed, peer, signing_session(signed, tmp_path) as session:
        async with serving(peer, tmp_path) as server, client(server) as http:
            posted = await http.post(
                f"/sessions/{session}/messages", json={"content": "also a heron", "to": "lead"}
            )
    assert posted.status_code == 202, posted.text
