"""Under the guided policy (aids for small models, lead/guided.py), an answer that delegated
nothing stands unless something structural or the request's own words say otherwise: invented
media are sent back first, a note parroted is no answer, and nothing is sent back after
delegating, after the lead used its own tools, or while a sub-agent works. The default
(structural) policy lets the first answer stand. Scripted model through the real openai client,
real bus."""

from __future__ import annotations

import json

from baton.bus.events import Event, TextDelta, ToolResulted
from baton.bus.messages import make_envelope
from baton.engine import tool
from baton.lead.guided import GuidedPolicy
from baton.llm.script import Call, Reply
from tests.lead.scenario import SESSION, Scenario, run_lead

FOX = "https://cdn.example/fox.png"
GUIDED = GuidedPolicy()
SENT_BACK = "[check from session]"


def calls(name: str, call_id: str, **args: str) -> Reply:
    return Reply(calls=[Call(name, json.dumps(args), id=call_id)])


def notes(s: Scenario) -> list[str]:
    """Every session check note the lead was shown, over all its requests."""
    found = []
    for request in s.server.requests:
        for message in request.messages:
            content = message.get("content")
            if isinstance(content, str) and content.startswith(SENT_BACK) and content not in found:
                found.append(content)
    return found


async def test_invented_media_are_sent_back_and_the_corrected_answer_stands() -> None:
    """A 1.5B lead answered "There are 366 days in a leap year." presenting a picture nobody
    made: the made-up URL is sent back once with the fact, as under the structural policy, and
    the corrected answer stands."""
    made_up = json.dumps({"text": "366.", "media": ["https://example.com/days.png"]})
    s, outcome = await run_lead(
        [Reply(calls=[Call("answer", made_up, id="c1")]), calls("answer", "c2", text="366.")],
        task="How many days are there in a leap year?",
        tool_choice="required",
        policy=GUIDED,
    )
    assert (outcome.status, outcome.answer) == ("completed", "366.")
    [sent_back] = notes(s)
    assert "presents media that no tool produced" in sent_back and len(s.server.requests) == 2


async def test_an_answer_after_delegating_is_never_sent_back() -> None:
    async def react(s: Scenario, event: Event) -> None:
        if isinstance(event, ToolResulted) and event.result.call_id == "c1":
            await s.report("painter", "a fox", media=[FOX])

    s, outcome = await run_lead(
        [
            calls("send_message", "c1", to="painter", content="paint a fox", type="task"),
            Reply(text="On it."),
            Reply(text=f"Here is your fox: {FOX}"),
        ],
        react,
        policy=GUIDED,
    )
    assert outcome.status == "completed" and outcome.media_urls == [FOX]
    assert notes(s) == [] and len(s.server.requests) == 3


async def test_a_lead_that_used_its_own_tool_is_not_sent_back() -> None:
    @tool
    async def clock() -> str:
        """The time of day."""
        return "noon"

    s, outcome = await run_lead(
        [calls("clock", "c1"), Reply(text="It is noon.")],
        task="what time is it?",
        tools=[clock],
        policy=GUIDED,
    )
    assert (outcome.status, outcome.answer) == ("completed", "It is noon.")
    assert notes(s) == [] and len(s.server.requests) == 2


async def test_under_the_structural_policy_the_first_answer_stands() -> None:
    s, outcome = await run_lead([Reply(text="Paris.")], task="What is the capital of France?")
    assert (outcome.status, outcome.answer) == ("completed", "Paris.")
    assert notes(s) == [] and len(s.server.requests) == 1


async def test_a_reply_that_parrots_a_session_note_is_no_answer() -> None:
    """A small model that answers with a note's own words has not answered: asked once more
    (without tools), it gives the answer."""
    s, outcome = await run_lead(
        [
            Reply(text="[note from session] All delegated work is in."),
            Reply(text="Paris, the capital of France."),
        ],
        task="What is the capital of France?",
        policy=GUIDED,
    )
    assert (outcome.status, outcome.answer) == ("completed", "Paris, the capital of France.")
    assert len(s.server.requests) == 2 and s.server.requests[1].body.get("tool_choice") == "none"


async def test_a_follow_up_answered_while_a_subagent_works_is_not_sent_back() -> None:
    """A person asks something small while the painter works: the answer stands (sending it back
    would show the lead "delegate now" with the painting still in its context)."""

    async def react(s: Scenario, event: Event) -> None:
        if isinstance(event, ToolResulted) and event.result.call_id == "c1":
            question = make_envelope(
                session=SESSION, sender="user", recipient="lead", type="message", content="2+2?"
            )
            await s.bus.inboxes.send(question)
        if isinstance(event, TextDelta) and event.text == "4.":
            await s.report("painter", "a fox", media=[FOX])

    s, outcome = await run_lead(
        [
            calls("send_message", "c1", to="painter", content="paint a fox", type="task"),
            Reply(text="On it."),
            Reply(text="4."),
            Reply(text=f"Here is your fox: {FOX}"),
        ],
        react,
        policy=GUIDED,
    )
    assert (outcome.status, outcome.media_urls) == ("completed", [FOX])
    assert notes(s) == [] and len(s.server.requests) == 4


async def test_a_lead_asked_without_tools_is_not_sent_back() -> None:
    s, outcome = await run_lead(
        [Reply(text="Paris.")], task="Capital of France?", tool_choice="none", policy=GUIDED
    )
    assert (outcome.status, outcome.answer) == ("completed", "Paris.")
    assert notes(s) == [] and len(s.server.requests) == 1
