"""The server's approval policy is a ceiling on what a client asks for (``baton serve
--approve``): looser is refused with nothing started, stricter is always allowed, unsaid is
``ask`` or the policy where that is stricter. The rule itself, then ``POST /sessions`` over real
HTTP on a real bus (MCP's ``run`` is in ``test_mcp_server.py`` and ``mcp_helpers.py``)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from baton.bus.messages import ApproveMode
from baton.server.approval_policy import ApprovalTooLoose, session_approve
from tests.conftest import BusFactory
from tests.server.helpers import client, read_all, serving, start_session

MODES: list[ApproveMode] = ["auto", "ask", "deny"]
"""From the loosest to the strictest."""


@pytest.mark.parametrize("policy", MODES)
@pytest.mark.parametrize("asked", MODES)
def test_a_client_gets_what_it_asks_unless_that_is_looser(
    policy: ApproveMode, asked: ApproveMode
) -> None:
    if MODES.index(asked) < MODES.index(policy):
        with pytest.raises(ApprovalTooLoose) as refused:
            session_approve(asked, policy)
        said = str(refused.value)
        assert f'policy ("{policy}")' in said and f"--approve {asked}" in said
        assert f"BATON_APPROVE={asked}" in said
    else:
        assert session_approve(asked, policy) == asked


@pytest.mark.parametrize(("policy", "given"), [("auto", "ask"), ("ask", "ask"), ("deny", "deny")])
def test_a_client_that_says_nothing_gets_ask_or_the_stricter_policy(
    policy: ApproveMode, given: ApproveMode
) -> None:
    assert session_approve(None, policy) == given


async def test_a_looser_mode_is_refused_and_starts_nothing(
    make_bus: BusFactory, tmp_path: Path
) -> None:
    async with make_bus() as bus, serving(bus, tmp_path) as server, client(server) as http:
        refused = await http.post("/sessions", json={"task": "publish the news", "approve": "auto"})
        assert refused.status_code == 403, refused.text
        detail = refused.json()["detail"]
        assert 'approval policy ("ask")' in detail and "--approve auto" in detail
        assert (await http.get("/sessions")).json()["sessions"] == []
        assert await bus.log.sessions() == []
        session = await start_session(http, "publish the news", profiles=["publisher"],
                                      approve="deny")  # fmt: skip
        events = await read_all(http, session)
    decided = [e.json() for e in events if e.event == "approval.decided"]
    assert decided and all(d["policy"] == "deny" and not d["approved"] for d in decided)


async def test_under_a_deny_policy_an_unsaid_mode_is_deny_and_ask_is_refused(
    make_bus: BusFactory, tmp_path: Path
) -> None:
    async with (
        make_bus() as bus,
        serving(bus, tmp_path, approve="deny") as server,
        client(server) as http,
    ):
        asked = await http.post("/sessions", json={"task": "publish the news", "approve": "ask"})
        assert asked.status_code == 403 and 'policy ("deny")' in asked.json()["detail"]
        session = await start_session(http, "publish the news", profiles=["publisher"])
        events = await read_all(http, session)
    decided = [e.json() for e in events if e.event == "approval.decided"]
    assert decided and all(d["policy"] == "deny" for d in decided)


async def test_an_auto_policy_lets_a_client_ask_auto(make_bus: BusFactory, tmp_path: Path) -> None:
    async with (
        make_bus() as bus,
        serving(bus, tmp_path, approve="auto") as server,
        client(server) as http,
    ):
        session = await start_session(http, "publish the news", profiles=["publisher"],
                                      approve="auto")  # fmt: skip
        events = await read_all(http, session)
    decided = [e.json() for e in events if e.event == "approval.decided"]
    assert decided and all(d["policy"] == "auto" and d["approved"] for d in decided)
    assert events[-1].json()["status"] == "completed"


@pytest.mark.parametrize(
    ("policy", "offered", "selected"),
    [
        ("auto", ["ask", "auto", "deny"], "ask"),
        ("ask", ["ask", "deny"], "ask"),
        ("deny", ["deny"], "deny"),
    ],
)
async def test_the_start_page_offers_only_what_the_policy_allows(
    tmp_path: Path, policy: ApproveMode, offered: list[str], selected: str
) -> None:
    from baton.bus.memory import MemoryBus

    async with (
        MemoryBus() as bus,
        serving(bus, tmp_path, approve=policy) as server,
        client(server) as http,
    ):
        page = (await http.get("/")).text
    assert re.findall(r'<option value="(\w+)"', page) == offered
    assert re.findall(r'<option value="(\w+)" selected', page) == [selected]
