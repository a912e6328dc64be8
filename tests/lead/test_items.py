"""Deliverables the model declares (``send_message`` ``items``) are counted: one agent per item,
each tracked to a result, the session ``incomplete`` while one has none; and a send that quotes
what the runtime told the lead is no task. The lead's model is scripted through the real client;
sub-agents are played by the test (tests/lead/scenario.py) or, for whole sessions, by the offline
model's painter."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from baton.bus.errors import ExitCode
from baton.bus.events import AgentSpawned, AnswerChecked, Event, ToolResulted
from baton.cli.run import EXIT_CODES
from baton.lead import DelegationLimits
from baton.lead.dispatch import WAIT_HINT
from baton.lead.items import DeclaredItem, declared_items, item_task, missing_items
from baton.lead.roster import Roster
from baton.llm import Call, Reply, answer
from baton.llm.offline import offline_reply, role_of
from baton.llm.scripted import ScriptedServer
from baton.session import Session, SessionConfig
from tests.lead.scenario import Scenario, run_lead
from tests.support.events import logged_events
from tests.support.models import _client

BIRDS = ["an owl", "a parrot", "a penguin"]


def send(call_id: str, to: str = "painter", content: str = "Paint this bird.", **more: Any) -> Call:
    return Call("send_message", json.dumps({"to": to, "content": content, **more}), id=call_id)


def checked(events: list[Event]) -> AnswerChecked:
    [check] = [e for e in events if isinstance(e, AnswerChecked)]
    return check


# -- whole sessions: the scripted capable lead, the offline painters -------------------------------


class CapableLead:
    """A capable lead that declares the three birds in one send, then answers with every media
    URL its painters reported; every sub-agent request gets the offline model's reply."""

    def __init__(self) -> None:
        self.lead_requests = 0

    def __call__(self, body: dict[str, Any]) -> Any:
        messages, tools = list(body["messages"]), list(body.get("tools", []))
        if role_of(messages, tools) != "lead":
            return offline_reply(body)
        self.lead_requests += 1
        if not any(m.get("role") == "assistant" for m in messages):
            note = {"text": "Three painters are on it.", "status": "delegated"}
            return Reply(calls=[send("s1", items=BIRDS), Call("answer", json.dumps(note))])
        tool_texts = " ".join(str(m.get("content")) for m in messages if m.get("role") == "user")
        urls = sorted({word for word in tool_texts.split() if word.startswith("file://")})
        return answer("Here are your three birds:\n" + "\n".join(urls), media=urls)


async def test_one_send_with_three_items_makes_three_tasks_three_pictures_one_answer(
    tmp_path: Path,
) -> None:
    lead = CapableLead()
    server = ScriptedServer(responder=lead, record=True)
    model = _client(server, "gpt-4o", 0)
    config = SessionConfig(
        task="Paint three birds, each in its own picture: an owl, a parrot and a penguin.",
        media_dir=tmp_path,
        tool_choice="required",
    )
    with anyio.fail_after(60):
        async with model, Session(config, model=model) as session:
            result = await session.run()
            log = await logged_events(session.bus, session.id)
    spawned = [e.agent for e in log if isinstance(e, AgentSpawned)]
    assert spawned == ["painter", "painter-2", "painter-3"]
    assert result.status == "completed" and EXIT_CODES[result.status] is ExitCode.OK
    assert len(result.media_urls) == 3
    assert all(url in result.answer for url in result.media_urls)  # the answer presents all three
    check = checked(log)
    assert (check.missing_items, check.missing_media, check.reasons) == ([], [], [])
    assert lead.lead_requests == 2  # the delegation, then the answer


# -- the lead alone, its sub-agents played by the test --------------------------------------------


async def test_each_item_goes_to_its_own_agent_told_its_own_item() -> None:
    async def react(s: Scenario, event: Event) -> None:
        if isinstance(event, ToolResulted) and event.result.call_id == "s1":
            for name in ("painter", "painter-2", "painter-3"):
                await s.report(name, f"{name} painted", media=[f"https://cdn.example/{name}.png"])

    s, outcome = await run_lead(
        [Reply(calls=[send("s1", items=BIRDS)]), answer("On it."), answer("Three birds.")],
        react,
        task="Paint an owl, a parrot and a penguin, one picture each.",
        media_profiles={"painter"},
    )
    assert outcome.status == "completed"
    sent = {name: [m.content for m in r.sent] for name, r in s.lead.roster.agents.items()}
    names = ["painter", "painter-2", "painter-3"]
    assert sent == {
        name: [item_task("Paint this bird.", bird)] for name, bird in zip(names, BIRDS, strict=True)
    }
    assert sent["painter-2"][0].startswith("Paint this bird.\n\nYour item:\na parrot\n")
    told = s.tool_results()["s1"]
    assert all(bird in told for bird in BIRDS) and "do not wait or poll" in told
    assert [(i.text, i.agents) for i in s.lead.state.items] == [
        (bird, [name]) for bird, name in zip(BIRDS, names, strict=True)
    ]
    assert checked(s.events).missing_items == []


async def test_an_item_without_its_picture_makes_the_session_incomplete_and_is_named() -> None:
    async def react(s: Scenario, event: Event) -> None:
        if isinstance(event, ToolResulted) and event.result.call_id == "s1":
            await s.report("painter", "an owl", media=["https://cdn.example/owl.png"])
            await s.report("painter-2", "a parrot", media=["https://cdn.example/parrot.png"])
            await s.report("painter-3", "I could not paint it.")  # finished, and no picture

    s, outcome = await run_lead(
        [Reply(calls=[send("s1", items=BIRDS)]), answer("On it."), answer("Your birds.")],
        react,
        task="Paint an owl, a parrot and a penguin.",
        media_profiles={"painter"},
    )
    assert outcome.status == "incomplete"
    assert EXIT_CODES[outcome.status] is ExitCode.INCOMPLETE
    check = checked(s.events)
    assert check.missing_items == ["a penguin"]
    assert "a penguin (painter-3 made no media)" in outcome.error
    assert any("declared item(s) without a result" in reason for reason in check.reasons)


LONG = " on the old mill by the river at dawn, in four lines"  # items past the echo's length


@pytest.mark.parametrize("tail", ["", LONG], ids=["short", "long"])
async def test_an_item_whose_agent_failed_is_missing_and_one_sent_again_and_done_is_not(
    tail: str,
) -> None:
    """A long item sent again is no quote: the reply to its first send named it in part."""

    async def react(s: Scenario, event: Event) -> None:
        if isinstance(event, ToolResulted) and event.result.call_id == "s1":
            await s.report("writer", "poem one")
            await s.report("writer-2", "", reason="timeout")
        if isinstance(event, ToolResulted) and event.result.call_id == "s2":
            await s.report("writer-3", "poem two, at last")

    items = [f"a poem about rain{tail}", f"a poem about snow{tail}"]
    s, outcome = await run_lead(
        [
            Reply(calls=[send("s1", to="writer", content="Write it.", items=items)]),
            answer("One poem is late."),
            # the model sends the failed item again, as an item
            Reply(calls=[send("s2", to="writer", content="Write it.", items=items[1:])]),
            answer("The second poem is on its way."),
            answer("Both poems are in."),
        ],
        react,
        task="Two poems: rain and snow.",
    )
    # the second send gave "a poem about snow" a new agent, which finished: nothing missing
    assert [(i.text, i.agents) for i in s.lead.state.items] == [
        (items[0], ["writer"]),
        (items[1], ["writer-2", "writer-3"]),
    ]
    assert "quoted" not in s.guards()
    assert (outcome.status, checked(s.events).missing_items) == ("completed", [])


async def test_items_past_the_caps_are_refused_declared_and_missing() -> None:
    limits = DelegationLimits(max_new_agents_per_profile=2)

    async def react(s: Scenario, event: Event) -> None:
        if isinstance(event, ToolResulted) and event.result.call_id == "s1":
            await s.report("painter", "an owl", media=["https://cdn.example/owl.png"])
            await s.report("painter-2", "a parrot", media=["https://cdn.example/parrot.png"])

    s, outcome = await run_lead(
        [Reply(calls=[send("s1", items=BIRDS)]), answer("On it."), answer("Two birds.")],
        react,
        task="Paint an owl, a parrot and a penguin.",
        media_profiles={"painter"},
        delegation=limits,
    )
    assert s.spawned == ["painter", "painter-2"]
    assert "- a penguin: Did not send" in s.tool_results()["s1"]
    assert outcome.status == "incomplete"
    assert checked(s.events).missing_items == ["a penguin"]
    assert "a penguin (not sent)" in outcome.error


async def test_too_many_items_are_refused_and_a_follow_up_declares_none() -> None:
    many = [f"item {n}" for n in range(17)]

    async def react(s: Scenario, event: Event) -> None:
        if isinstance(event, ToolResulted) and event.result.call_id == "m":
            await s.report("writer", "a poem about the sea")

    s, outcome = await run_lead(
        [
            Reply(
                calls=[
                    send("x", items=many),
                    # a message declares nothing: it goes as one plain message
                    send("m", to="writer", content="A poem, please.", type="message", items=["a"]),
                ]
            ),
            answer("The writer is on it."),
            answer("Here is the poem."),
        ],
        react,
        task="Write things.",
    )
    results = s.tool_results()
    assert "17 items is more than one send may declare (16)" in results["x"]
    assert results["m"].startswith("Started writer")
    assert s.spawned == ["writer"] and s.lead.state.items == []
    assert [m.content for m in s.lead.roster.agents["writer"].sent] == ["A poem, please."]
    assert outcome.status == "completed"


def test_the_schema_asks_for_items_before_the_task_and_a_call_without_them_stands() -> None:
    from baton.lead.tools import send_message_tool

    async def deliver(to: str, content: str, kind: str, items: list[str] | None) -> str:
        return to

    tool = send_message_tool(deliver, ["painter"])
    parameters: dict[str, Any] = dict(tool.schema["function"]["parameters"])
    assert list(parameters["properties"]) == ["to", "items", "content", "type"]
    assert parameters["required"] == ["to", "items", "content"]
    assert parameters["properties"]["items"]["type"] == "array"
    assert parameters["properties"]["items"]["maxItems"] == 16  # bounded for a decoding server
    parsed = tool.parse(json.dumps({"to": "painter", "content": "Paint a fox."}))
    assert parsed["items"] is None  # a model or client that leaves it out sends as before


async def test_without_items_nothing_is_counted() -> None:
    """One send of the whole request to one painter is judged by what it delivered: nothing the
    model did not declare is counted (no words are read)."""

    async def react(s: Scenario, event: Event) -> None:
        if isinstance(event, ToolResulted) and event.result.call_id == "s1":
            await s.report("painter", "an owl", media=["https://cdn.example/owl.png"])

    whole = send("s1", content="Paint an owl, a parrot and a penguin.")
    s, outcome = await run_lead(
        [Reply(calls=[whole]), answer("Done."), answer("Done: the owl.")],
        react,
        task="Paint an owl, a parrot and a penguin.",
        media_profiles={"painter"},
    )
    assert (outcome.status, checked(s.events).missing_items) == ("completed", [])


# -- a send that quotes the runtime ----------------------------------------------------------------


async def test_a_task_that_quotes_a_receipt_is_refused_and_spawns_nothing() -> None:
    """The 1.5B lead's move: the receipt of its first send, sent on as a task to a helper."""
    receipt = f"Started painter, a new painter agent, on this task. {WAIT_HINT}"
    s, outcome = await run_lead(
        [
            Reply(calls=[send("a", content="Paint an owl on a branch.")]),
            Reply(calls=[send("b", to="helper", content=receipt)]),
            answer("On it."),
            answer("Here is the owl."),
        ],
        lambda s, e: _report_at(s, e, "b", "painter"),
        task="Paint an owl.",
    )
    results = s.tool_results()
    assert results["a"] == receipt  # what the model was told, word for word
    assert results["b"].startswith("Did not send: the task repeats what baton told you")
    assert s.spawned == ["painter"]  # no helper
    assert "quoted" in s.guards()
    assert outcome.status == "completed"


async def test_an_item_that_quotes_the_runtime_is_refused_and_owed_nothing() -> None:
    """A 0.5B lead declared the URL a note had listed as an item: no task, so no deliverable —
    the real items alone are judged, and the session completes when they are delivered."""
    receipt = f"Started painter, a new painter agent, on this task. {WAIT_HINT}"

    async def react(s: Scenario, event: Event) -> None:
        if isinstance(event, ToolResulted) and event.result.call_id == "s2":
            for name in ("painter", "painter-2", "painter-3"):
                await s.report(name, f"{name} painted", media=[f"https://cdn.example/{name}.png"])

    s, outcome = await run_lead(
        [
            Reply(calls=[send("s1", content="Paint a lighthouse at night.")]),
            Reply(calls=[send("s2", items=["an owl", receipt, "a parrot"])]),
            answer("On it."),
            answer("The birds."),
        ],
        react,
        task="Paint an owl and a parrot.",
        media_profiles={"painter"},
    )
    told = s.tool_results()["s2"]
    assert "the task repeats what baton told you" in told
    assert [(i.text, i.agents) for i in s.lead.state.items] == [
        ("an owl", ["painter-2"]),
        ("a parrot", ["painter-3"]),
    ]
    assert s.spawned == ["painter", "painter-2", "painter-3"]  # none for the quote
    assert "quoted" in s.guards()
    assert outcome.status == "completed" and checked(s.events).missing_items == []


async def test_items_of_a_send_whose_shared_content_quotes_the_runtime_are_still_owed() -> None:
    """The send is no task, but its items are the model's own deliverables: declared, and
    missing while nothing delivers them."""
    receipt = f"Started painter, a new painter agent, on this task. {WAIT_HINT}"

    async def react(s: Scenario, event: Event) -> None:
        if isinstance(event, ToolResulted) and event.result.call_id == "s2":
            await s.report("painter", "a lighthouse", media=["https://cdn.example/l.png"])

    s, outcome = await run_lead(
        [
            Reply(calls=[send("s1", content="Paint a lighthouse at night.")]),
            Reply(calls=[send("s2", content=receipt, items=["an owl", "a parrot"])]),
            answer("On it."),
            answer("Done."),
        ],
        react,
        task="Paint a lighthouse, an owl and a parrot.",
        media_profiles={"painter"},
    )
    assert s.spawned == ["painter"]  # neither item went out
    assert [(i.text, i.agents) for i in s.lead.state.items] == [
        ("an owl", []),
        ("a parrot", []),
    ]
    assert outcome.status == "incomplete"
    assert checked(s.events).missing_items == ["an owl", "a parrot"]


async def test_a_task_quoting_a_refusal_is_refused_one_quoting_the_request_is_not() -> None:
    request = "Write a limerick about a cat who learned to play the violin at midnight."
    refusal = (
        "Did not send: 17 items is more than one send may declare (16). Declare the deliverables "
        "the user asked for, one item each."
    )
    s, _ = await run_lead(
        [
            Reply(calls=[send("a", to="writer", items=[f"item {n}" for n in range(17)])]),
            Reply(
                calls=[
                    send("b", to="writer", content=f"Please: {refusal}"),
                    send("c", to="writer", content=request),  # the person's words: a task
                ]
            ),
            answer("The writer is on it."),
            answer("Here is the limerick."),
        ],
        lambda s, e: _report_at(s, e, "c", "writer"),
        task=request,
    )
    results = s.tool_results()
    assert results["a"] == refusal
    assert results["b"].startswith("Did not send: the task repeats what baton told you")
    assert results["c"].startswith("Started writer")
    assert s.spawned == ["writer"]


async def _report_at(s: Scenario, event: Event, call_id: str, agent: str) -> None:
    if isinstance(event, ToolResulted) and event.result.call_id == call_id:
        await s.report(agent, "done", media=["https://cdn.example/done.png"])


# -- units ---------------------------------------------------------------------------------------


def test_declared_items_are_stripped_deduplicated_and_kept_in_order() -> None:
    assert declared_items([" an owl ", "", "An  Owl", "a parrot", "  "]) == ["an owl", "a parrot"]


def test_an_item_held_by_a_successor_that_finished_has_its_result() -> None:
    roster = Roster({"painter": "Paints."})
    roster.started("painter", "painter")
    roster.agents["painter"].state, roster.agents["painter"].exit_reason = "done", "finished"
    item = DeclaredItem(text="an owl", profile="painter", agents=["painter"])
    assert [m.why for m in missing_items([item], roster, {"painter"})] == ["painter made no media"]
    roster.started("painter-2", "painter", succeeds="painter")
    record = roster.agents["painter-2"]
    record.state, record.exit_reason, record.media_urls = "done", "finished", ["file:///owl.png"]
    assert missing_items([item], roster, {"painter"}) == []


async def test_sends_sharing_an_instruction_for_other_items_are_no_repeats() -> None:
    """The repeat guard keys a send by its content and its items: four sends of "Paint this
    bird." for four birds are four sends, not one repeated past ``max_repeats`` (3)."""
    birds = [*BIRDS, "a crow"]
    painters = ["painter", "painter-2", "painter-3", "painter-4"]

    async def react(s: Scenario, event: Event) -> None:
        if isinstance(event, ToolResulted) and event.result.call_id == "s3":
            for name in painters:
                await s.report(name, "painted", media=[f"https://cdn.example/{name}.png"])

    sends = [send(f"s{n}", items=[bird]) for n, bird in enumerate(birds)]
    s, _ = await run_lead(
        [Reply(calls=sends), answer("On it."), answer("Four birds.")], react, task="Four birds."
    )
    assert s.spawned == ["painter", "painter-2", "painter-3", "painter-4"]
    assert "repeated" not in s.guards()
    assert [item.text for item in s.lead.state.items] == birds


async def test_an_item_sent_twice_has_its_result_when_either_agent_delivered_it() -> None:
    """A 0.5B lead declared the owl again in new words: the first painter painted it, the
    second made nothing; the owl is delivered."""

    async def react(s: Scenario, event: Event) -> None:
        if isinstance(event, ToolResulted) and event.result.call_id == "s2":
            await s.report("painter", "an owl", media=["https://cdn.example/owl.png"])
            await s.report("painter-2", "I painted nothing.")

    again = send("s2", content="Paint the owl again, please.", items=["an owl"])
    s, outcome = await run_lead(
        [Reply(calls=[send("s1", items=["an owl"]), again]), answer("On it."), answer("An owl.")],
        react,
        task="Paint an owl.",
        media_profiles={"painter"},
    )
    assert [(i.text, i.agents) for i in s.lead.state.items] == [
        ("an owl", ["painter", "painter-2"])
    ]
    assert (outcome.status, checked(s.events).missing_items) == ("completed", [])
