"""The HTTP API keeps the promises of docs/http.md where a message or a task could be lost
quietly: unknown and finished sessions, blank text, and the small routes a browser asks for."""

from __future__ import annotations

import re
from pathlib import Path

from baton.bus.events import SessionFinished, SessionStarted
from tests.conftest import BusFactory
from tests.server.helpers import TOKEN, client, read_all, serving, start_session


async def test_messages_to_unknown_or_finished_sessions_are_refused(
    make_bus: BusFactory, tmp_path: Path
) -> None:
    async with make_bus() as bus, serving(bus, tmp_path) as server, client(server) as http:
        unknown = await http.post("/sessions/s-nope/messages", json={"content": "hello"})
        assert unknown.status_code == 404, unknown.text
        assert unknown.json()["detail"] == "no session 's-nope' on this server's bus"
        assert await bus.inboxes.read("s-nope", "lead") == []

        # Finished elsewhere (its log says so): nothing reads its inboxes any more.
        await bus.log.emit(SessionStarted(session="s-done", agent="lead", task="paint", model="m"))
        await bus.log.emit(SessionFinished(session="s-done", agent="lead", status="completed"))
        late = await http.post("/sessions/s-done/messages",
                               json={"content": "also a cat", "to": "painter"})  # fmt: skip
        assert late.status_code == 409, late.text
        detail = late.json()["detail"]
        assert detail.startswith("session 's-done' has finished (completed)")
        assert "start a new session" in detail
        assert await bus.inboxes.read("s-done", "painter") == []

        # Finished here: the same, whatever way it ended.
        session = await start_session(http, "paint a fox", profiles=["painter"])
        assert (await read_all(http, session))[-1].json()["status"] == "completed"
        follow_up = await http.post(f"/sessions/{session}/messages", json={"content": "more"})
        assert follow_up.status_code == 409
        assert "has finished (completed)" in follow_up.json()["detail"]


async def test_blank_task_or_message_gets_422_and_starts_nothing(
    make_bus: BusFactory, tmp_path: Path
) -> None:
    async with make_bus() as bus, serving(bus, tmp_path) as server, client(server) as http:
        for task in ("   ", "\n\t "):
            blank = await http.post("/sessions", json={"task": task})
            assert blank.status_code == 422, blank.text
            assert blank.json()["detail"] == "task: String should not be blank (only whitespace)"
            assert blank.json()["errors"][0]["type"] == "blank"
        assert (await http.get("/sessions")).json() == {"sessions": []}
        assert await bus.log.sessions() == []

        await bus.log.emit(SessionStarted(session="s-live", agent="lead", task="paint", model="m"))
        empty = await http.post("/sessions/s-live/messages", json={"content": " \n "})
        assert empty.status_code == 422
        assert empty.json()["detail"].startswith("content: String should not be blank")
        assert await bus.inboxes.read("s-live", "lead") == []

        document = (await http.get("/openapi.json")).json()
        schemas = document["components"]["schemas"]
        assert schemas["StartSession"]["properties"]["task"]["pattern"] == r"\S"
        assert schemas["PostMessage"]["properties"]["content"]["pattern"] == r"\S"
        answers = document["paths"]["/sessions/{id}/messages"]["post"]["responses"]
        assert {"202", "404", "409", "422"} <= set(answers)


async def test_favicon_and_the_page_of_an_unknown_session(
    make_bus: BusFactory, tmp_path: Path
) -> None:
    async with (
        make_bus() as bus,
        serving(bus, tmp_path, token=TOKEN) as server,
        client(server) as stranger,
        client(server, headers={"Authorization": f"Bearer {TOKEN}"}) as http,
    ):
        icon = await http.get("/favicon.ico")
        assert icon.status_code == 200
        assert icon.headers["content-type"].startswith("image/svg+xml")
        assert icon.text.startswith("<svg")
        # The pages link the same icon, so a browser never meets a 404 for it.
        link = re.search(r'<link rel="icon" href="([^"]+)"', (await http.get("/")).text)
        assert link is not None
        assert (await http.get(link.group(1))).text == icon.text
        assert (await stranger.get("/favicon.ico")).status_code == 401  # the token guards it too

        missing = await http.get("/sessions/s-nope")
        assert missing.status_code == 404
        assert missing.headers["content-type"].startswith("text/html")
        assert "No such session" in missing.text and "<code>s-nope</code>" in missing.text
        assert "session.js" not in missing.text  # nothing that would wait for events
        assert "content-security-policy" in missing.headers
        invalid = await http.get("/sessions/no:such")
        assert invalid.status_code == 404 and "No such session" in invalid.text

        await bus.log.emit(SessionStarted(session="s-here", agent="lead", task="paint", model="m"))
        page = await http.get("/sessions/s-here")
        assert page.status_code == 200 and "session.js" in page.text
