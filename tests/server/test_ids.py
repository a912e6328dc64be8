"""Ids in URLs and bodies follow the bus's one rule for names (``baton.bus.ids``).

The routes used to accept ``:`` in a session id and in ``to`` while the envelope refused it, so
posting to such a session answered 500. Every route now answers a 4xx that says what is wrong, and
an id the bus accepts is accepted by the routes too.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from baton.bus.errors import InvalidEnvelope
from baton.bus.events import SessionStarted
from baton.bus.ids import name_problem
from baton.bus.messages import Envelope
from tests.conftest import BusFactory
from tests.server.helpers import client, serving

RULE = "it must be 1 to 200 characters of A-Z a-z 0-9 _ . -, starting with a letter or digit"


@pytest.mark.parametrize("session", ["a:b", "s{1}", "x" * 201, "_s", "-s", ".hidden"])
async def test_a_session_id_the_bus_refuses_is_a_404_on_every_route(
    make_bus: BusFactory, tmp_path: Path, session: str
) -> None:
    async with make_bus() as bus, serving(bus, tmp_path) as server, client(server) as http:
        answers = [
            await http.post(f"/sessions/{session}/messages", json={"content": "hi"}),
            await http.post(f"/sessions/{session}/approvals/c1", json={"approved": True}),
            await http.post(f"/sessions/{session}/cancel"),
            await http.get(f"/sessions/{session}/state"),
            await http.get(f"/sessions/{session}/events"),
            await http.get(f"/sessions/{session}"),
        ]
        for answer in answers:
            assert answer.status_code == 404, (answer.request.url, answer.text)
        detail = answers[0].json()["detail"]
        assert detail.startswith(f"no session {session[:80]!r}: session id") and RULE in detail
        assert await bus.letters.recent() == []  # nothing reached the bus


@pytest.mark.parametrize("to", ["a:b", "", "x" * 201, "lead/approvals", ".", "..", "-painter"])
async def test_a_recipient_the_bus_refuses_is_a_422_that_says_why(
    make_bus: BusFactory, tmp_path: Path, to: str
) -> None:
    async with make_bus() as bus, serving(bus, tmp_path) as server, client(server) as http:
        answer = await http.post("/sessions/s-1/messages", json={"content": "hi", "to": to})
        assert answer.status_code == 422, answer.text
        assert answer.json()["detail"] == (
            f"to: Value error, agent name {to[:80]!r} is not valid: {RULE}"
        )


async def test_an_id_the_bus_accepts_is_accepted_by_the_routes(
    make_bus: BusFactory, tmp_path: Path
) -> None:
    """``s_.1`` and ``painter-`` fit the envelope's rule."""
    async with make_bus() as bus, serving(bus, tmp_path) as server, client(server) as http:
        await bus.log.emit(SessionStarted(session="s_.1", agent="lead", task="paint", model="m"))
        await bus.records.hold_lead("s_.1", "elsewhere", 30, {"status": "running"})
        answer = await http.post(
            "/sessions/s_.1/messages", json={"content": "hi", "to": "painter-"}
        )
        assert answer.status_code == 202, answer.text
        [envelope] = await bus.inboxes.read("s_.1", "painter-")
        assert isinstance(envelope, Envelope) and envelope.id == answer.json()["id"]


@pytest.mark.parametrize("name", [".", "..", ".baton", "_x", "-x"])
def test_a_name_is_never_a_dot_folder_and_starts_with_a_letter_or_digit(name: str) -> None:
    """A session id names its media folder: ``..`` would climb out of the media root."""
    assert name_problem(name, "session id") == f"session id {name!r} is not valid: {RULE}"
    with pytest.raises(ValidationError, match="pattern"):
        Envelope(session=name, sender="lead", recipient="painter", type="task")
    assert name_problem("0.x_y-z", "session id") is None


async def test_an_invalid_envelope_the_request_did_not_make_is_no_422(
    make_bus: BusFactory, tmp_path: Path
) -> None:
    """Only a message built from the request is the client's fault (422); an
    ``InvalidEnvelope`` from anywhere else is the server's (500), as any other bug."""
    async with make_bus() as bus, serving(bus, tmp_path) as server, client(server) as http:

        async def refused() -> list[str]:
            raise InvalidEnvelope("a bug in the server, not the request")

        bus.log.sessions = refused  # type: ignore[method-assign]
        answer = await http.get("/sessions")
        assert answer.status_code == 500, answer.text


async def test_a_message_the_bus_refuses_is_a_422_with_its_reason(
    make_bus: BusFactory, tmp_path: Path
) -> None:
    async with (
        make_bus(max_message_bytes=2_000) as bus,
        serving(bus, tmp_path) as server,
        client(server) as http,
    ):
        await bus.log.emit(SessionStarted(session="s-1", agent="lead", task="paint", model="m"))
        answer = await http.post("/sessions/s-1/messages", json={"content": "x" * 5_000})
        assert answer.status_code == 422, answer.text
        assert answer.json()["detail"].endswith("over the limit of 2000")
