"""Routing under the guided policy: a request answered in words while nothing was delegated goes,
as written, where its words decide (the profiles it names; for a picture, the profile that makes
media, one ``route(to)`` call only when several do), and nowhere else: the model is never asked
to choose among profiles where nothing in the request decides it. Scripted model through the real
openai client, real bus; the detectors on the texts real small models wrote."""

from __future__ import annotations

import json

import pytest

from baton.bus.events import (
    RETRACTED_SENT_BACK,
    AgentSpawned,
    Event,
    TextRetracted,
    ToolResulted,
)
from baton.bus.messages import Envelope
from baton.lead.answer import Answer
from baton.lead.guided import GuidedPolicy
from baton.lead.heuristics import asks_for_media, disclaims, named_profiles
from baton.lead.outcome import LeadOutcome, check_answer
from baton.lead.policy import Facts, LeadPolicy, StructuralPolicy
from baton.lead.roster import Roster
from baton.lead.routing import ROUTE_NOTE
from baton.llm.script import Call, Reply
from baton.llm.types import Message
from tests.lead.scenario import PROFILES, Scenario, run_lead

FOX = "https://cdn.example/fox.png"
HERON = "https://cdn.example/heron.png"
GUIDED = GuidedPolicy()
THREE = "Make three pictures: a fox, a heron and a cat."


def calls(name: str, call_id: str, **args: str) -> Reply:
    return Reply(calls=[Call(name, json.dumps(args), id=call_id)])


def routing_requests(s: Scenario) -> list[int]:
    """The indexes of the model requests that offered the route tool."""
    return [
        index
        for index, request in enumerate(s.server.requests)
        if [t["function"]["name"] for t in request.body.get("tools", [])] == ["route"]
    ]


def tasks_sent(s: Scenario) -> dict[str, list[str]]:
    return {name: [sent.content for sent in a.sent] for name, a in s.lead.roster.agents.items()}


@pytest.mark.parametrize(
    "answer",
    [
        "As an AI language model, I do not have access to the results of the delegated work. "
        "However, I can provide you with some information about sailing ships.",
        "I cannot create images, but a lighthouse at night is a lovely subject.",
        "I don\u2019t have the ability to draw pictures.",
        "I am unable to generate pictures directly.",
    ],
)
def test_an_answer_that_says_it_cannot_make_the_thing_disclaims(answer: str) -> None:
    assert disclaims(answer)


def test_a_buried_disclaimer_is_none() -> None:
    long_answer = "The heron stands in the shallows. " * 12 + "As an AI, I cannot see it."
    assert not disclaims(long_answer)


async def test_a_picture_answered_in_words_is_routed_and_the_profile_gets_it_as_written() -> None:
    """Two profiles make media: one request offering only ``route(to)`` among them picks one,
    which gets the request exactly as written."""

    async def react(s: Scenario, event: Event) -> None:
        if isinstance(event, ToolResulted) and event.result.call_id == "r1":
            await s.report("painter", "three pictures", media=[FOX, HERON])

    s, outcome = await run_lead(
        [
            calls("answer", "c1", text="The fox, the heron, and the cat are three pictures."),
            calls("route", "r1", to="painter"),
            calls("answer", "c2", text=f"Here they are: {FOX} {HERON}"),
        ],
        react,
        task=THREE,
        tool_choice="required",
        policy=GUIDED,
        media_profiles={"painter", "writer"},
    )
    assert (outcome.status, outcome.media_urls) == ("completed", [FOX, HERON])
    assert tasks_sent(s) == {"painter": [THREE]}
    # the routing request offered only route(to), a profile enum, with a call required
    [index] = routing_requests(s)
    body = s.server.requests[index].body
    assert body["tool_choice"] == "required"
    [route] = body["tools"]
    assert route["function"]["parameters"]["properties"]["to"]["enum"] == ["painter", "writer"]
    assert s.server.requests[index].messages[-1]["content"].endswith(ROUTE_NOTE)
    # the lead's own context has the send as a send_message call, not the route tool
    final = s.server.requests[-1].messages
    sent = [m for m in final if m.get("role") == "assistant" and m.get("tool_calls")]
    assert [c["function"]["name"] for m in sent for c in m["tool_calls"]] == [
        "answer",  # the answer in words stays in the context, then what routing sent
        "send_message",
    ]
    assert json.loads(sent[-1]["tool_calls"][0]["function"]["arguments"])["content"] == THREE
    assert all(ROUTE_NOTE not in str(m.get("content")) for m in final)
    # the answer in words was taken back, and no send-back note was needed
    retracted = [e.why for e in s.events if isinstance(e, TextRetracted)]
    assert retracted == [RETRACTED_SENT_BACK]


async def test_a_route_that_picks_two_profiles_goes_to_the_first_chosen() -> None:
    """The model picks two profiles in its routing call: a second profile for the same request
    is refused as a repeated task, one agent does the whole request."""

    async def react(s: Scenario, event: Event) -> None:
        if isinstance(event, ToolResulted) and event.result.call_id == "r2":
            await s.report("painter", "a ship; ships sailed on wind", media=[FOX])

    task = "Draw an old sailing ship in a storm, then tell me one fact about sailing ships."
    s, outcome = await run_lead(
        [
            calls("answer", "c1", text="A stormy ship would look dramatic, with waves high."),
            Reply(
                calls=[
                    Call("route", json.dumps({"to": "painter"}), id="r1"),
                    Call("route", json.dumps({"to": "writer"}), id="r2"),
                ]
            ),
            calls("answer", "c3", text=f"The ship: {FOX}. Ships sailed on wind."),
        ],
        react,
        task=task,
        tool_choice="required",
        policy=GUIDED,
        media_profiles={"painter", "writer"},
    )
    assert outcome.status == "completed" and outcome.media_urls == [FOX]
    assert tasks_sent(s) == {"painter": [task]}
    assert routing_requests(s) == [1] and s.guards() == ["repeated"]


@pytest.mark.parametrize(
    ("task", "answer"),
    [
        ("What is the capital of France?", "Paris is the capital of France."),
        # answers in words to work a profile does, where no word of the request decides a route
        ("Peins-moi un renard, s'il te plaît.", "Votre renard est prêt."),
    ],
)
async def test_an_answer_no_word_of_the_request_routes_stands_after_one_request(
    task: str, answer: str
) -> None:
    """No model is asked to choose: over 43 such choices a 1.5B lead was right for 1 of 11
    picture requests in other languages and sent 5 questions to sub-agents (lead/guided.py)."""
    s, outcome = await run_lead(
        [calls("answer", "c1", text=answer)],
        task=task,
        tool_choice="required",
        policy=GUIDED,
        media_profiles={"painter"},
    )
    assert (outcome.status, outcome.answer) == ("completed", answer)
    assert routing_requests(s) == [] and s.spawned == [] and len(s.server.requests) == 1


async def test_a_routing_call_that_sends_nothing_leaves_the_answer_to_be_judged() -> None:
    """The route names no profile (a server that ignores the enum): nothing is sent, the lead
    does not wait for anybody, and the decline is judged as before (incomplete)."""
    s, outcome = await run_lead(
        [
            calls("answer", "c1", text="I'm sorry, but I can't paint pictures."),
            calls("route", "r1", to="nobody"),
        ],
        tool_choice="required",
        policy=GUIDED,
        media_profiles={"painter", "writer"},
    )
    assert s.spawned == [] and len(routing_requests(s)) == 1
    assert outcome.status == "incomplete"
    assert "declined" in outcome.error


async def test_under_the_structural_policy_words_are_never_routed_or_judged() -> None:
    """A decline in words with ``status`` left ``done`` is the model's answer: the structural
    policy does not read it (the guided one would route this picture request)."""
    s, outcome = await run_lead(
        [calls("answer", "c1", text="I'm sorry, but I can't paint pictures.")],
        tool_choice="required",
        media_profiles={"painter"},
    )
    assert routing_requests(s) == [] and s.spawned == []
    assert (outcome.status, len(s.server.requests)) == ("completed", 1)


async def _delegated_then(*finals: Reply) -> tuple[Scenario, LeadOutcome]:
    async def react(s: Scenario, event: Event) -> None:
        if isinstance(event, ToolResulted) and event.result.call_id == "c1":
            await s.report("painter", "a fox in the snow", media=[FOX])

    return await run_lead(
        [
            calls("send_message", "c1", to="painter", content="paint a fox", type="task"),
            Reply(text="The painter is on it."),
            *finals,
        ],
        react,
        policy=GUIDED,
    )


async def test_a_refusal_with_the_results_in_is_taken_back_and_the_answer_asked_again() -> None:
    s, outcome = await _delegated_then(
        Reply(text="I'm sorry, but I can't assist with that request."),
        Reply(text=f"Here is your fox: {FOX}"),
    )
    assert (outcome.status, outcome.answer) == ("completed", f"Here is your fox: {FOX}")
    last = s.server.requests[-1]
    assert "tools" not in last.body or last.body.get("tool_choice") == "none"
    assert last.messages[-1]["content"].startswith("[note from session] All delegated work is in")
    retracted = [e.chars for e in s.events if isinstance(e, TextRetracted)]
    assert retracted == [len("I'm sorry, but I can't assist with that request.")]


async def test_a_refusal_given_twice_is_no_answer_and_the_answer_is_composed() -> None:
    _, outcome = await _delegated_then(
        Reply(text="I'm sorry, but I can't assist with that request."),
        Reply(text="As an AI language model, I cannot create images."),
    )
    assert (outcome.status, outcome.composed) == ("completed", True)  # the painter delivered
    assert "a fox in the snow" in outcome.answer and FOX in outcome.answer
    assert "sorry" not in outcome.answer


@pytest.mark.parametrize(
    "request_text",
    [
        "Paint a fox sleeping in the snow.",
        "I need a picture of a red bicycle leaning against a wall.",
        "Make three pictures: a fox, a heron and a cat.",
        "Create an image of a mountain lake at sunrise.",
        "Can you get me a picture of a hot air balloon over green hills?",
        "Write a two-line poem, then draw the lighthouse it is about.",
        "could you sketch a cat",
        "I'd like a few photos of old trains.",
        "Paint me a sunset over the sea.",
        "Please draw two cats on a sofa.",
    ],
)
def test_a_request_for_a_picture_asks_for_media(request_text: str) -> None:
    assert asks_for_media(request_text)


@pytest.mark.parametrize(
    "request_text",
    [
        "Which image format is best for photographs?",
        "What is the capital of France?",
        "Describe the painting style of Monet in one sentence.",
        "Write a haiku about autumn.",
        "The paint on my wall is peeling; what should I do?",
        "Draw conclusions from this: revenue rose 5% while costs fell 2%.",
        "Draw attention to the risks in this plan.",
    ],
)
def test_a_question_about_pictures_asks_for_none(request_text: str) -> None:
    assert not asks_for_media(request_text)


def test_a_picture_asked_and_none_made_is_incomplete_whoever_was_asked() -> None:
    """Delegated to the writer alone (a 1.5B lead did): no media came back, so the request is not
    done, though the writer delivered; without a media-making profile on offer it is."""
    roster = Roster({"painter": "Paints.", "writer": "Writes."})
    roster.started("writer", "writer")
    roster.on_report(
        Envelope(
            session="s",
            sender="writer",
            recipient="lead",
            type="result",
            content="A heron stands in the river.",
            meta={"final": True, "reason": "finished"},
        )
    )
    assert roster.delivered
    request = "Paint a heron standing in a river."
    history: list[Message] = [{"role": "user", "content": request}]

    def judged(request: str, media_profiles: frozenset[str]) -> list[str]:
        check = check_answer("Done!", roster, history)
        facts = Facts(request, roster.profiles, media_profiles, roster, delegated=True)
        return GUIDED.judge(Answer("Done!"), check, facts)

    picture = "the request asked for a picture and no sub-agent produced any media"
    assert judged(request, frozenset({"painter"})) == [picture]
    assert judged(request, frozenset()) == []
    assert judged("Write a haiku.", frozenset({"painter"})) == []


async def test_a_silent_answer_to_a_picture_request_is_routed() -> None:
    """The lead parroted its own rules (no reply) to "paint a fox": routed at once to the one
    profile that makes media, with no model call."""

    async def react(s: Scenario, event: Event) -> None:
        if isinstance(event, AgentSpawned):
            await s.report("painter", "a fox", media=[FOX])

    rules = "You must call a tool in every reply: to reply to the user (your answer, or a short"
    s, outcome = await run_lead(
        [calls("answer", "c1", text=rules), calls("answer", "c2", text=f"Your fox: {FOX}")],
        react,
        task="Paint a fox sleeping in the snow.",
        tool_choice="required",
        policy=GUIDED,
        media_profiles={"painter"},
    )
    assert (outcome.status, outcome.media_urls) == ("completed", [FOX])
    assert tasks_sent(s) == {"painter": ["Paint a fox sleeping in the snow."]}


async def test_a_picture_request_answered_without_delegating_goes_to_its_one_painter() -> None:
    """With one media-making profile on offer, "get me a picture" answered in words (here one
    that reads like an answer) goes to it at once: no send-back, and no model call to choose."""

    async def react(s: Scenario, event: Event) -> None:
        if isinstance(event, AgentSpawned):
            await s.report("painter", "a balloon", media=[FOX])

    task = "Can you get me a picture of a hot air balloon over green hills?"
    s, outcome = await run_lead(
        [
            calls("answer", "c1", text="A balloon drifts over rolling green hills at dawn."),
            calls("answer", "c2", text=f"Your balloon: {FOX}"),
        ],
        react,
        task=task,
        tool_choice="required",
        policy=GUIDED,
        media_profiles={"painter"},
    )
    assert (outcome.status, outcome.media_urls) == ("completed", [FOX])
    assert tasks_sent(s) == {"painter": [task]} and routing_requests(s) == []
    assert len(s.server.requests) == 2
    sent_back = [m for r in s.server.requests for m in r.messages if "You answered without "
                 "delegating" in str(m.get("content"))]  # fmt: skip
    assert sent_back == []


async def test_a_picture_request_is_routed_among_the_media_making_profiles_only() -> None:
    async def react(s: Scenario, event: Event) -> None:
        if isinstance(event, ToolResulted) and event.result.call_id == "r1":
            await s.report("writer", "a lighthouse", media=[FOX])

    task = "Paint a lighthouse at night and write a two-line poem about it."
    s, outcome = await run_lead(
        [
            calls("answer", "c1", text="As an AI language model, I cannot paint."),
            calls("route", "r1", to="writer"),
            calls("answer", "c2", text=f"The lighthouse: {FOX}"),
        ],
        react,
        task=task,
        tool_choice="required",
        policy=GUIDED,
        media_profiles={"painter", "writer"},
    )
    assert outcome.status == "completed" and tasks_sent(s) == {"writer": [task]}
    [index] = routing_requests(s)
    [route] = s.server.requests[index].body["tools"]
    assert route["function"]["parameters"]["properties"]["to"]["enum"] == ["painter", "writer"]


async def test_a_picture_request_whose_answer_ran_away_is_routed_too() -> None:
    """A 0.5B lead's first answer to "make three pictures" ran past max_tokens twice: a cut turn
    is no reason to skip routing (the runtime would only ask it again, without tools)."""

    async def react(s: Scenario, event: Event) -> None:
        if isinstance(event, AgentSpawned):
            await s.report("painter", "three pictures", media=[FOX])

    cut = Reply(text="Here are the three pictures: " + "a fox, " * 40, finish_reason="length")
    s, outcome = await run_lead(
        [cut, cut, calls("answer", "c2", text=f"The pictures: {FOX}")],
        react,
        task=THREE,
        tool_choice="required",
        policy=GUIDED,
        media_profiles={"painter"},
    )
    assert tasks_sent(s) == {"painter": [THREE]}
    assert (outcome.status, outcome.media_urls) == ("completed", [FOX])


@pytest.mark.parametrize(
    ("request_text", "named"),
    [
        ("Have the writer write a short thank-you note.", ["writer"]),
        ("Ask the writer for a limerick, and the painter for a picture.", ["painter", "writer"]),
        ("Demande au painter un renard.", ["painter"]),
        ("paint a fox", []),
        ("The painters of Paris", []),
        ("a helper-2 said", []),
    ],
)
def test_the_profiles_a_request_names(request_text: str, named: list[str]) -> None:
    assert named_profiles(request_text, PROFILES) == named


async def test_a_request_naming_two_profiles_goes_to_each_as_written() -> None:
    """ "Ask the writer … and the painter …" answered in words by a small model: both named
    profiles get the request, no model call to choose, the same text to each (no repeat)."""

    async def react(s: Scenario, event: Event) -> None:
        if isinstance(event, AgentSpawned) and event.agent == "writer":  # the second one
            await s.report("writer", "a limerick")
            await s.report("painter", "a cat", media=[FOX])

    task = "Ask the writer for a limerick about a cat, and the painter for a picture of it."
    s, outcome = await run_lead(
        [
            calls("answer", "c1", text="There once was a cat..."),
            calls("answer", "c2", text=f"A limerick and your cat: {FOX}"),
        ],
        react,
        task=task,
        tool_choice="required",
        policy=GUIDED,
        media_profiles={"painter"},
    )
    assert tasks_sent(s) == {"painter": [task], "writer": [task]}
    assert routing_requests(s) == [] and outcome.status == "completed"


async def test_a_typed_cannot_or_delegated_claim_is_sent_back_under_the_guided_policy() -> None:
    """No model is asked to choose a profile for them: the default's typed send-back note comes
    instead, and the model's own next move stands (here, a send to the writer)."""

    async def react(s: Scenario, event: Event) -> None:
        if isinstance(event, AgentSpawned):
            await s.report(event.agent, "a note of thanks")

    task = "Thank my neighbour nicely for watering my plants."
    for status in ("cannot", "delegated"):
        typed = Reply(calls=[Call("answer", json.dumps({"text": "One moment.", "status": status}))])
        s, outcome = await run_lead(
            [
                typed,
                calls("send_message", "s1", to="writer", content=task, type="task"),
                calls("answer", "c2", text="Sent to the writer."),
                calls("answer", "c3", text="Done: thanks."),
            ],
            react,
            task=task,
            tool_choice="required",
            policy=GUIDED,
        )
        assert routing_requests(s) == [], status
        assert tasks_sent(s) == {"writer": [task]} and outcome.status == "completed"
        note = s.server.requests[1].messages[-1]["content"]
        assert note.startswith("[check from session]"), status


LIGHTHOUSE = "Paint a lighthouse at night and have the writer write a two-line poem about it."


async def each_reports_its_part(s: Scenario, event: Event) -> None:
    """Each agent reports as it starts, the painter with a picture."""
    if isinstance(event, AgentSpawned):
        media = [FOX] if event.agent == "painter" else []
        await s.report(event.agent, f"{event.agent}'s part", media=media)


async def _run_parts(
    task: str, script: list[Reply], policy: LeadPolicy = GUIDED
) -> tuple[Scenario, LeadOutcome]:
    return await run_lead(
        script,
        each_reports_its_part,
        task=task,
        tool_choice="required",
        policy=policy,
        media_profiles={"painter"},
    )


async def _part_delegated(
    task: str, first: tuple[str, str], *, policy: LeadPolicy = GUIDED
) -> tuple[Scenario, LeadOutcome]:
    """The lead sends ``first`` (profile, task), says in words that it cannot do the rest, then
    answers with what arrived."""
    to, content = first
    script = [
        calls("send_message", "s1", to=to, content=content, type="task"),
        calls("answer", "c1", text="I'm sorry, I don't know how to do the rest."),
        calls("answer", "c2", text=f"Here is everything: {FOX}"),
    ]
    return await _run_parts(task, script, policy)


async def test_a_picture_left_out_of_what_was_delegated_goes_to_the_painter() -> None:
    """A 1.5B lead sent the lighthouse request's poem to the writer only, then said it cannot
    paint: the picture went to nobody. It goes to the one media-making profile, as written (no
    model call to choose), and the answer waits for it."""
    s, outcome = await _part_delegated(LIGHTHOUSE, ("writer", "Write a two-line poem."))
    assert tasks_sent(s) == {"writer": ["Write a two-line poem."], "painter": [LIGHTHOUSE]}
    assert routing_requests(s) == []
    assert (outcome.status, outcome.media_urls) == ("completed", [FOX])


async def test_a_picture_left_out_is_routed_after_the_waves_are_spent() -> None:
    """A 1.5B lead spent both its delegation waves on the writer; asked without tools, it
    answered in words, and the picture went to nobody. The route is the runtime's send."""
    script = [  # each turn ends when a send finds the writer's report unread (news first)
        calls("send_message", "s1", to="writer", content="Write a two-line poem.", type="task"),
        calls("send_message", "s2", to="helper", content="Help the writer.", type="task"),
        calls("send_message", "s3", to="writer-2", content="A lighthouse poem.", type="task"),
        calls("send_message", "s4", to="helper", content="Help the writer.", type="task"),
        calls("answer", "c1", text="Here are the poems."),
        calls("answer", "c2", text=f"The poems and the picture: {FOX}"),
    ]
    s, outcome = await _run_parts(LIGHTHOUSE, script)
    assert "painter" in tasks_sent(s) and tasks_sent(s)["painter"] == [LIGHTHOUSE]
    without_tools = [r.body.get("tool_choice") == "none" for r in s.server.requests]
    assert without_tools.index(True) >= 4  # the waves were spent: asked without tools
    assert (outcome.status, outcome.media_urls) == ("completed", [FOX])


async def test_a_named_profile_left_out_of_what_was_delegated_gets_the_request() -> None:
    task = "Ask the writer for a limerick about a cat, and the painter for a picture of it."
    s, outcome = await _part_delegated(task, ("painter", "a cat"))
    assert tasks_sent(s) == {"painter": ["a cat"], "writer": [task]}
    assert routing_requests(s) == [] and outcome.status == "completed"


async def test_a_part_left_out_is_routed_before_a_refusal_beside_results_is_asked_again() -> None:
    """A 1.5B lead sent the lighthouse to the painter, then refused beside its picture; asked
    again it refused again, and the writer the request named was never asked."""
    script = [
        calls("send_message", "s1", to="painter", content="a lighthouse at night", type="task"),
        calls("send_message", "s2", to="helper", content="help", type="task"),  # news first
        calls("answer", "c2", text="I'm sorry, but I cannot paint the lighthouse."),
        calls("answer", "c3", text=f"The poem and the picture: {FOX}"),
    ]
    s, outcome = await _run_parts(LIGHTHOUSE, script)
    assert tasks_sent(s) == {"painter": ["a lighthouse at night"], "writer": [LIGHTHOUSE]}
    assert (outcome.status, outcome.answer) == ("completed", f"The poem and the picture: {FOX}")


async def test_nothing_is_routed_when_every_part_went_to_someone() -> None:
    s, _ = await _part_delegated("Paint a lighthouse at night.", ("painter", "a lighthouse"))
    assert tasks_sent(s) == {"painter": ["a lighthouse"]}


async def test_the_structural_policy_never_routes_a_part_left_out() -> None:
    s, _ = await _part_delegated(LIGHTHOUSE, ("writer", "Write a poem."), policy=StructuralPolicy())
    assert tasks_sent(s) == {"writer": ["Write a poem."]}


async def test_a_picture_left_out_by_routing_to_a_named_profile_is_routed_after_it() -> None:
    """The lighthouse request answered in words went, by the name in it, to the writer only;
    the picture is then routed too, once the writer's part is in."""
    script = [
        calls("answer", "c1", text="A lighthouse stands in the dark."),
        calls("answer", "c2", text="Here is the poem."),
        calls("answer", "c3", text=f"The poem and the picture: {FOX}"),
    ]
    s, outcome = await _run_parts(LIGHTHOUSE, script)
    assert tasks_sent(s) == {"writer": [LIGHTHOUSE], "painter": [LIGHTHOUSE]}
    assert routing_requests(s) == []
    assert (outcome.status, outcome.media_urls) == ("completed", [FOX])
