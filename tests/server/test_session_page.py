"""The session page's first paint, as the server sends it, before any script runs (issue 22).

It used to be an empty shell until its JavaScript had replayed the stream ("pending", "none
pending" while an approval waited), and it put the server's absolute media directory in a
``<meta>`` tag. Now the server writes the session as it stands: status, task, the lead's text,
each sub-agent's card, the pending approvals with their call ids, the final answer with its
pictures as ``/media/`` links, and the log's last cursor the script resumes from; and no server
path. Read here with an HTML parser from the real server's answer; the browser test
(``test_browser.py``) shows the same page live.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

import httpx2

from baton.bus.base import Bus
from baton.bus.events import (
    AgentClaimed,
    AgentProgress,
    AgentResult,
    AgentSpawned,
    AgentUnclaimed,
    ApprovalRequested,
    BudgetUpdated,
    Event,
    RoundStarted,
    SessionFinished,
    SessionStarted,
    TextDelta,
    ToolCallInfo,
)
from baton.bus.memory import MemoryBus
from tests.server.helpers import client, serving

VOID = {"meta", "link", "img", "input", "br", "hr"}


@dataclass
class Node:
    tag: str
    attrs: dict[str, str | None]
    children: list[Node] = field(default_factory=list)
    text_parts: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "".join(self.text_parts)

    @property
    def hidden(self) -> bool:
        return "hidden" in self.attrs


class Page(HTMLParser):
    """The elements of a page, each with its attributes and all the text inside it."""

    def __init__(self, markup: str) -> None:
        super().__init__()
        self.nodes: list[Node] = []
        self._open: list[Node] = []
        self.feed(markup)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = Node(tag, dict(attrs))
        if self._open:
            self._open[-1].children.append(node)
        self.nodes.append(node)
        if tag not in VOID:
            self._open.append(node)

    def handle_endtag(self, tag: str) -> None:
        while self._open:
            if self._open.pop().tag == tag:
                break

    def handle_data(self, data: str) -> None:
        for node in self._open:
            node.text_parts.append(data)

    def by_id(self, id_: str) -> Node:
        (found,) = [node for node in self.nodes if node.attrs.get("id") == id_]
        return found

    def all(self, class_: str) -> list[Node]:
        return [n for n in self.nodes if class_ in (n.attrs.get("class") or "").split()]

    def meta(self, name: str) -> str:
        (found,) = [n for n in self.nodes if n.tag == "meta" and n.attrs.get("name") == name]
        return found.attrs["content"] or ""


S = "s-paint"
CALL = ToolCallInfo(call_id="call_publish_1", name="publish", arguments='{"text": "haiku"}')


def fox_url(media: Path) -> str:
    path = media / S / "fox.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\x89PNG\r\n\x1a\n")
    return path.as_uri()


def waiting(fox: str) -> list[Event]:
    """A session whose painter is done, whose publisher waits for an approval."""
    return [
        SessionStarted(session=S, agent="lead", task="paint a fox <b>{{LEAD_TEXT}}</b>",
                       model="m", offline=True),
        RoundStarted(session=S, agent="lead", round=1),
        TextDelta(session=S, agent="lead", text="Asking the painter."),
        RoundStarted(session=S, agent="lead", round=2),
        TextDelta(session=S, agent="lead", text="And the publisher."),
        AgentSpawned(session=S, agent="painter", profile="painter"),
        AgentProgress(session=S, agent="painter", content="drawing"),
        AgentResult(session=S, agent="painter", content="Drew a fox", media_urls=[fox]),
        AgentSpawned(session=S, agent="publisher", profile="publisher"),
        AgentProgress(session=S, agent="publisher", content="about to publish"),
        ApprovalRequested(session=S, agent="publisher", calls=[CALL]),
        BudgetUpdated(session=S, agent="lead", calls=3, tokens=1200, max_calls=3),
    ]  # fmt: skip


async def page_of(bus: Bus, tmp_path: Path, events: list[Event]) -> tuple[str, list[str]]:
    """The page's HTML, and the cursors of ``events`` once logged."""
    cursors = [await bus.log.emit(event) for event in events]
    async with serving(bus, tmp_path) as server, client(server) as http:
        answer: httpx2.Response = await http.get(f"/sessions/{S}")
    assert answer.status_code == 200, answer.text
    return answer.text, cursors


async def test_a_waiting_session_is_painted_with_its_approval_and_agents(tmp_path: Path) -> None:
    async with MemoryBus() as bus:
        fox = fox_url(tmp_path / "media")
        markup, cursors = await page_of(bus, tmp_path, waiting(fox))
    page = Page(markup)
    assert page.by_id("status").text == "running"
    assert page.by_id("status").attrs["data-status"] == "running"
    assert page.by_id("task").text == "paint a fox <b>{{LEAD_TEXT}}</b>"  # text, not markup
    assert page.by_id("model").text == "model: m (offline: built-in, canned answers)"
    assert page.by_id("lead-text").text == "Asking the painter.\n\nAnd the publisher."
    assert page.by_id("lead-text").attrs["data-round-chars"] == str(len("And the publisher."))
    assert page.by_id("budget").text == "budget: 3/3 model calls, 1,200 tokens"
    assert page.by_id("budget").attrs["data-spent"] == "true"

    (approval,) = page.all("approval")
    assert approval.attrs["data-agent"] == "publisher"
    assert approval.attrs["data-call"] == "call_publish_1"
    assert "call id call_publish_1" in approval.text  # shown, for `baton approve`
    assert 'publish({"text": "haiku"})' in approval.text
    assert page.by_id("no-approvals").hidden  # not "none pending" while one waits

    cards = {card.attrs["data-agent"]: card for card in page.all("agent")}
    assert set(cards) == {"painter", "publisher"}
    assert cards["painter"].attrs["data-status"] == "done"
    assert "Drew a fox" in cards["painter"].text and "profile: painter" in cards["painter"].text
    (img,) = [n for n in cards["painter"].children[-1].children if n.tag == "img"]
    assert img.attrs["src"] == f"/media/{S}/fox.png"
    assert cards["publisher"].attrs["data-status"] == "working"

    assert page.meta("baton-cursor") == cursors[-1]  # the script resumes after what is painted
    assert page.by_id("event-count").text == str(len(cursors))
    assert page.by_id("final").hidden and not page.by_id("post").hidden
    media_root = str((tmp_path / "media").resolve())
    assert media_root not in markup  # no server path on the page
    assert "file://" not in markup
    assert not [n for n in page.nodes if n.tag == "meta" and "media" in str(n.attrs.get("name"))]


async def test_a_finished_session_is_painted_whole_and_closed(tmp_path: Path) -> None:
    async with MemoryBus() as bus:
        fox = fox_url(tmp_path / "media")
        done = SessionFinished(session=S, agent="lead", status="completed",
                               answer="Here is the fox.", media_urls=[fox])  # fmt: skip
        events = [*waiting(fox)[:8], done]
        markup, _ = await page_of(bus, tmp_path, events)
    page = Page(markup)
    assert page.by_id("status").text == "completed"
    assert not page.by_id("final").hidden
    assert page.by_id("answer").text == "Here is the fox."
    (img,) = [n for n in page.by_id("final-media").children if n.tag == "img"]
    assert img.attrs["src"] == f"/media/{S}/fox.png"
    assert page.by_id("post").hidden and not page.by_id("post-closed").hidden
    assert page.by_id("post-closed").text.startswith("The session ended: completed")
    assert "disabled" in page.by_id("cancel").attrs
    assert page.by_id("no-approvals").text == "none pending"
    assert not page.by_id("no-approvals").hidden
    assert "file://" not in markup


def test_the_script_counts_every_event_type() -> None:
    """The page's script listens for each type by name (SSE has no "any type"): one it does
    not know would go uncounted after the server's paint, which counts every event."""
    root = Path(__file__).parents[2]
    types = set(re.findall(r'Literal\["([a-z._]+)"\]', (root / "bus/events.py").read_text()))
    script = (root / "orchestrator/server/assets/session.js").read_text()
    handlers = script.split("const handlers = {", 1)[1].split("\n};", 1)[0]
    handled = set(re.findall(r'^  "([a-z._]+)": ', handlers, flags=re.MULTILINE))
    assert types and handled == types


async def test_a_card_says_which_worker_runs_it_or_that_it_waits_for_one(tmp_path: Path) -> None:
    events: list[Event] = [
        SessionStarted(session=S, agent="lead", task="paint", model="m"),
        AgentSpawned(session=S, agent="painter", profile="painter"),
        AgentUnclaimed(session=S, agent="painter", profile="painter", pool="gpu", waited_s=15,
                       workers=0),
        AgentSpawned(session=S, agent="writer", profile="writer"),
        AgentClaimed(session=S, agent="writer", profile="writer", worker="w-7"),
    ]  # fmt: skip
    async with MemoryBus() as bus:
        markup, _ = await page_of(bus, tmp_path, events)
    cards = {card.attrs["data-agent"]: card for card in Page(markup).all("agent")}
    worker = {name: [n for n in card.children if n.attrs.get("class") == "worker"]
              for name, card in cards.items()}  # fmt: skip
    assert [n.text for n in worker["painter"]] == ["waiting for a worker of pool gpu"]
    assert [n.text for n in worker["writer"]] == ["worker w-7"]
    assert worker["painter"][0].attrs.get("data-waiting") == "true"
