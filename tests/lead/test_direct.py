"""Under the guided policy (aids for small models, lead/guided.py), a request's answer that
delegated nothing is checked once ("confirm direct") by a routing call that may keep it: the
model picks a profile for work it cannot do, or ``none``, from an enum. Small models answer
"paint a fox" with an apology or "The fox is available at [url]" otherwise, in any language.
The default (structural) policy lets the first answer stand. Scripted model through the real
openai client, real bus."""

from __future__ import annotations

import dataclasses
import json

from baton.bus.events import RETRACTED_SENT_BACK, Event, TextDelta, TextRetracted, ToolResulted
from baton.bus.messages import make_envelope
from baton.compose import plain_profiles
from baton.engine import tool
from baton.lead.guided import GuidedPolicy
from baton.lead.routing import keep_choice
from baton.llm.script import Call, Reply
from baton.subagents.a2a_config import A2AConfig
from baton.subagents.mcp_config import McpServerConfig
from baton.subagents.profiles import ProfileModel, builtin_profiles
from tests.lead.scenario import PROFILES, SESSION, Scenario, run_lead

FOX = "https://cdn.example/fox.png"
CONFIRM = GuidedPolicy()
SENT_BACK = "[check from session]"
CHECKED = f"{SENT_BACK} Check your answer against the request"


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


async def test_a_plain_answer_is_checked_once_by_a_route_that_keeps_it() -> None:
    s, outcome = await run_lead(
        [calls("answer", "c1", text="Paris."), calls("route", "r1", to="none")],
        task="What is the capital of France?",
        tool_choice="required",
        policy=CONFIRM,
    )
    assert (outcome.status, outcome.answer) == ("completed", "Paris.")
    assert s.spawned == [] and len(s.server.requests) == 2
    check = s.server.requests[1]
    assert check.messages[-1]["content"].startswith(CHECKED)
    assert "'none'" in check.messages[-1]["content"]
    [offered] = check.body["tools"]
    assert offered["function"]["name"] == "route" and check.body["tool_choice"] == "required"
    assert offered["function"]["parameters"]["properties"]["to"]["enum"] == ["none", *PROFILES]
    # the answer was kept, so nothing was taken back: the view shows it once
    assert not [e for e in s.events if isinstance(e, TextRetracted)]
    assert "".join(e.text for e in s.events if isinstance(e, TextDelta)) == "Paris."


async def test_a_claimed_picture_is_routed_by_the_check_and_the_first_answer_taken_back() -> None:
    """ "Your fox is ready" with nothing delegated, in words no heuristic reads: the check's
    typed choice sends the request as written to the painter, and the claim is retracted."""

    async def react(s: Scenario, event: Event) -> None:
        if isinstance(event, ToolResulted) and event.result.call_id == "r1":
            await s.report("painter", "a fox", media=[FOX])

    s, outcome = await run_lead(
        [
            calls("answer", "c1", text="Votre renard est prêt."),
            calls("route", "r1", to="painter"),
            calls("answer", "c3", text=f"Voici votre renard : {FOX}"),
        ],
        react,
        task="Peins-moi un renard, s'il te plaît.",
        tool_choice="required",
        policy=CONFIRM,
    )
    assert (outcome.status, outcome.media_urls) == ("completed", [FOX])
    assert s.spawned == ["painter"]
    [retracted] = [e for e in s.events if isinstance(e, TextRetracted)]
    assert (retracted.chars, retracted.why) == (len("Votre renard est prêt."), RETRACTED_SENT_BACK)


async def test_invented_media_is_sent_back_before_the_check() -> None:
    """A 1.5B lead answered "There are 366 days in a leap year." presenting a picture nobody
    made; the check kept the answer (none) and the session ended incomplete. The made-up URL
    is sent back first, as under the structural policy; the corrected answer is then checked."""
    made_up = json.dumps({"text": "366.", "media": ["https://example.com/days.png"]})
    s, outcome = await run_lead(
        [
            Reply(calls=[Call("answer", made_up, id="c1")]),
            calls("answer", "c2", text="366."),
            calls("route", "r1", to="none"),
        ],
        task="How many days are there in a leap year?",
        tool_choice="required",
        policy=CONFIRM,
    )
    assert (outcome.status, outcome.answer) == ("completed", "366.")
    sent_back, checked = notes(s)
    assert "presents media that no tool produced" in sent_back and checked.startswith(CHECKED)


async def test_the_check_offers_only_profiles_that_add_a_capability() -> None:
    """A plain profile (no tools, no model of its own) would answer again with the same model:
    the check leaves it out, and with no other profile there is no check at all."""
    s, outcome = await run_lead(
        [calls("answer", "c1", text="Paris."), calls("route", "r1", to="none")],
        task="What is the capital of France?",
        tool_choice="required",
        policy=CONFIRM,
        plain_profiles=frozenset({"helper"}),
    )
    assert (outcome.status, outcome.answer) == ("completed", "Paris.")
    enum = s.server.requests[1].body["tools"][0]["function"]["parameters"]["properties"]["to"]
    assert enum["enum"] == ["none", "painter", "writer"]

    s, outcome = await run_lead(
        [calls("answer", "c1", text="Paris.")],
        task="What is the capital of France?",
        tool_choice="required",
        policy=CONFIRM,
        plain_profiles=frozenset(PROFILES),
    )
    assert (outcome.status, outcome.answer) == ("completed", "Paris.")
    assert len(s.server.requests) == 1 and s.spawned == []


def test_plain_profiles_are_those_without_tools_model_or_servers() -> None:
    profiles = builtin_profiles()
    assert plain_profiles(profiles) == {"helper"}
    helper = profiles["helper"]
    adds_something = {
        "named model": dataclasses.replace(helper, model="a-bigger-model"),
        "own endpoint": dataclasses.replace(
            helper, model=ProfileModel(base_url="http://127.0.0.1:9/v1")
        ),
        "mcp": dataclasses.replace(helper, mcp={"clock": McpServerConfig(url="http://x/mcp")}),
        "a2a": dataclasses.replace(helper, tools=(), a2a=A2AConfig(url="http://127.0.0.1:9/a2a")),
    }
    for why, profile in adds_something.items():
        assert plain_profiles({"p": profile}) == set(), why
    warmer = dataclasses.replace(helper, model=ProfileModel(temperature=1.0))
    assert plain_profiles({"p": warmer}) == {"p"}  # sampling alone: the same model


async def test_the_keep_choice_steps_aside_for_a_profile_named_none() -> None:
    assert keep_choice({"none": "a profile"}) == "none_"
    assert keep_choice({"painter": "pictures"}) == "none"


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


async def test_a_reply_that_parrots_a_session_note_is_no_answer() -> None:
    """A small model that answers with a note's own words has not answered: asked once more
    (without tools), it gives the answer; asked without tools, it is not checked by a route."""
    s, outcome = await run_lead(
        [
            Reply(text="[note from session] All delegated work is in."),
            Reply(text="Paris, the capital of France."),
        ],
        task="What is the capital of France?",
        policy=CONFIRM,
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
