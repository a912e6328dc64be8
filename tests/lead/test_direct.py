"""Under the guided policy (aids for small models, lead/guided.py), a request's answer that
delegated nothing is sent back once ("confirm direct"): with the profiles in view the model
delegates what it cannot do, or gives the same answer again. Small models answer "paint a fox"
with an apology or "The fox is available at [url]" otherwise. The default (structural) policy
lets the first answer stand. Scripted model through the real openai client, real bus."""

from __future__ import annotations

import json

from baton.bus.events import RETRACTED_SENT_BACK, Event, TextDelta, TextRetracted, ToolResulted
from baton.bus.messages import make_envelope
from baton.engine import tool
from baton.lead.guided import GuidedPolicy
from baton.llm.script import Call, Reply
from tests.lead.scenario import PROFILES, SESSION, Scenario, run_lead

FOX = "https://cdn.example/fox.png"
CONFIRM = GuidedPolicy()
SENT_BACK = "[check from session] You answered without delegating"


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


async def test_a_plain_answer_is_sent_back_once_and_the_confirmed_answer_shown_once() -> None:
    s, outcome = await run_lead(
        [
            calls("answer", "c1", text="Paris."),
            calls("answer", "c2", text="Paris."),
        ],
        task="What is the capital of France?",
        tool_choice="required",
        policy=CONFIRM,
    )
    assert (outcome.status, outcome.answer) == ("completed", "Paris.")
    assert s.spawned == [] and len(s.server.requests) == 2
    [note] = notes(s)
    assert s.server.requests[1].messages[-1]["content"] == note
    for name, description in PROFILES.items():
        assert f"{name}: {description}" in note
    assert "call answer again" in note
    # the first answer was taken back, so the view shows the confirmed one once
    retractions = [e for e in s.events if isinstance(e, TextRetracted)]
    assert [(e.chars, e.why) for e in retractions] == [(len("Paris."), RETRACTED_SENT_BACK)]
    retracted = [e.chars for e in retractions]
    shown = "".join(e.text for e in s.events if isinstance(e, TextDelta))
    assert shown == "Paris.Paris." and len(shown) - sum(retracted) == len("Paris.")


async def test_a_claimed_picture_sent_back_becomes_a_delegation_and_the_picture_arrives() -> None:
    async def react(s: Scenario, event: Event) -> None:
        if isinstance(event, ToolResulted) and event.result.call_id == "c2":
            await s.report("painter", "a fox", media=[FOX])

    s, outcome = await run_lead(
        [
            calls("answer", "c1", text="Your fox is ready, and it looks lovely."),
            calls("send_message", "c2", to="painter", content="paint a fox", type="task"),
            calls("answer", "c3", text="The painter is on it."),
            calls("answer", "c4", text=f"Here is your fox: {FOX}"),
        ],
        react,
        tool_choice="required",
        policy=CONFIRM,
    )
    assert (outcome.status, outcome.answer) == ("completed", f"Here is your fox: {FOX}")
    assert outcome.media_urls == [FOX] and s.spawned == ["painter"]
    assert len(notes(s)) == 1  # once delegated, later answers are not sent back


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
        policy=CONFIRM,
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
        policy=CONFIRM,
    )
    assert (outcome.status, outcome.answer) == ("completed", "It is noon.")
    assert notes(s) == [] and len(s.server.requests) == 2


async def test_under_the_structural_policy_the_first_answer_stands() -> None:
    s, outcome = await run_lead([Reply(text="Paris.")], task="What is the capital of France?")
    assert (outcome.status, outcome.answer) == ("completed", "Paris.")
    assert notes(s) == [] and len(s.server.requests) == 1


async def test_a_reply_that_parrots_the_check_note_is_no_answer() -> None:
    """A small model that answers with the note's own words has not answered: asked once more
    (without tools), it gives the answer."""
    s, outcome = await run_lead(
        [
            Reply(text="Paris."),
            Reply(text="You answered without delegating anything for this request."),
            Reply(text="Paris, the capital of France."),
        ],
        task="What is the capital of France?",
        policy=CONFIRM,
    )
    assert (outcome.status, outcome.answer) == ("completed", "Paris, the capital of France.")
    assert len(notes(s)) == 1


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
        policy=CONFIRM,
    )
    assert (outcome.status, outcome.media_urls) == ("completed", [FOX])
    assert notes(s) == [] and len(s.server.requests) == 4


async def test_a_lead_asked_without_tools_is_not_sent_back() -> None:
    s, outcome = await run_lead(
        [Reply(text="Paris.")], task="Capital of France?", tool_choice="none", policy=CONFIRM
    )
    assert (outcome.status, outcome.answer) == ("completed", "Paris.")
    assert notes(s) == [] and len(s.server.requests) == 1
