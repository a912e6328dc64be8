"""The lead's honest outcome and a lead that survives its model: media the answer left out is
appended, invented URLs are flagged, work that produced nothing is ``incomplete``; a failed turn
is retried while results keep arriving, and a lead that fails for good still answers with every
sub-agent's result and media URL. Scripted model through the real openai client, real bus."""

from __future__ import annotations

import json
from typing import Any

import pytest

from baton.bus.base import Bus
from baton.bus.events import (
    AgentSpawned,
    AnswerChecked,
    ErrorEvent,
    Event,
    ModelRetried,
    ToolResulted,
)
from baton.bus.spend import SpendLimits
from baton.engine.spend import BusSpend
from baton.lead.guided import GuidedPolicy
from baton.lead.heuristics import declines
from baton.llm.script import Call, HttpError, Reply
from tests.lead.scenario import SESSION, React, Scenario, run_lead

FOX = "https://cdn.example/fox.png"
HERON = "file:///tmp/media/heron.png"


def send(to: str, content: str, call_id: str = "c1") -> Reply:
    args = json.dumps({"to": to, "content": content, "type": "task"})
    return Reply(calls=[Call("send_message", args, id=call_id)])


def after_the_send(*reports: tuple[str, list[str], str]) -> React:
    """A reaction: once the lead's first send has run, the named agents report."""

    async def react(s: Scenario, event: Event) -> None:
        if isinstance(event, ToolResulted) and event.result.call_id == "c1":
            for name, media, reason in reports:
                await s.report(name, f"{name} is done", media=media, reason=reason)

    return react


def checked(s: Scenario) -> AnswerChecked:
    [event] = [e for e in s.events if isinstance(e, AnswerChecked)]
    return event


async def test_media_the_answer_left_out_is_appended() -> None:
    s, outcome = await run_lead(
        [
            Reply(calls=[*send("painter", "a fox").calls, *send("writer", "a heron", "c2").calls]),
            Reply(text="Both are on it."),
            Reply(text=f"Here is the fox: {FOX}."),
        ],
        after_the_send(("painter", [FOX], "finished"), ("writer", [HERON], "finished")),
    )
    assert outcome.status == "completed"
    assert outcome.answer == f"Here is the fox: {FOX}.\n\nMedia:\n- {HERON}"
    assert outcome.media_urls == [FOX, HERON] and outcome.invented_urls == []
    assert (checked(s).missing_media, checked(s).invented_urls) == ([HERON], [])


async def test_media_nobody_produced_is_sent_back_once_then_judged_incomplete() -> None:
    """An answer presenting a picture no tool made is sent back once with the fact; presented
    again, the session is incomplete. A link the person gave is no invention."""
    made_up = "Done: https://via.placeholder.com/fox.png and https://docs.example/guide."
    s, outcome = await run_lead(
        [Reply(text=made_up), Reply(text=made_up)],
        task="draw a fox like the one on https://docs.example/guide",
    )
    assert outcome.status == "incomplete"
    assert outcome.invented_urls == ["https://via.placeholder.com/fox.png"]  # the user's is not
    assert checked(s).invented_urls == outcome.invented_urls
    assert "presents media that no tool produced" in outcome.error
    note = s.server.requests[1].messages[-1]["content"]
    assert "https://via.placeholder.com/fox.png" in note and "No sub-agent has reported" in note


async def test_a_link_nobody_gave_is_reported_but_not_judged() -> None:
    """A capable model citing documentation it knows: reported as invented (the event and the
    result say so), and the answer stands: only media presented are judged."""
    answer = "Lists are ordered and mutable: https://docs.python.org/3/tutorial/datastructures"
    s, outcome = await run_lead([Reply(text=answer)], task="Are Python lists ordered?")
    assert (outcome.status, outcome.answer) == ("completed", answer)
    assert outcome.invented_urls == ["https://docs.python.org/3/tutorial/datastructures"]
    assert len(s.server.requests) == 1


async def test_a_plain_answer_without_delegation_is_completed() -> None:
    s, outcome = await run_lead([Reply(text="Hello! How can I help?")], task="hi")
    assert (outcome.status, outcome.answer, outcome.invented_urls) == (
        "completed",
        "Hello! How can I help?",
        [],
    )
    assert (checked(s).missing_media, checked(s).invented_urls) == ([], [])


async def test_a_lead_that_declines_without_delegating_is_incomplete_under_guided() -> None:
    s, outcome = await run_lead(
        [Reply(text="I'm sorry, but I can't assist with that.")] * 2,
        task="tell me a secret",
        policy=GuidedPolicy(),
    )
    assert outcome.status == "incomplete" and s.spawned == []
    assert outcome.error == "the lead declined the request without asking any sub-agent"


async def test_a_typed_cannot_is_sent_back_once_then_incomplete_in_any_language() -> None:
    """The decline is a field, not words: a French "cannot" is judged as an English one."""
    cannot = Reply(
        calls=[Call("answer", json.dumps({"text": "Je ne peux pas.", "status": "cannot"}))]
    )
    s, outcome = await run_lead([cannot, cannot], task="Réserve-moi un vol.")
    assert (outcome.status, outcome.answer) == ("incomplete", "Je ne peux pas.")
    assert outcome.error == "the lead answered that it cannot do this"
    assert len(s.server.requests) == 2 and s.spawned == []


async def test_a_typed_delegated_with_nothing_sent_is_sent_back_once_then_incomplete() -> None:
    """A 1.5B lead answered a German picture request "Delegating task... please wait." and sent
    nothing. Typed, that claim is checked against the sends, in any language."""
    claim = Reply(
        calls=[Call("answer", json.dumps({"text": "Einen Moment bitte.", "status": "delegated"}))]
    )
    s, outcome = await run_lead([claim, claim], task="Male ein Bild von einem Leuchtturm.")
    assert (outcome.status, outcome.answer) == ("incomplete", "Einen Moment bitte.")
    assert outcome.error == "the lead answered that the work is delegated, but it sent nothing"
    note = s.server.requests[1].messages[-1]["content"]
    assert "Your answer says the work is delegated, but you sent nothing" in note
    assert len(s.server.requests) == 2 and s.spawned == []


async def test_a_delegated_claim_sent_back_is_followed_by_the_send_it_claimed() -> None:
    claim = Reply(calls=[Call("answer", json.dumps({"text": "On it.", "status": "delegated"}))])
    sent = Reply(calls=[Call("send_message", json.dumps({"to": "painter", "content": "a fox"}))])
    note = Reply(calls=[Call("answer", json.dumps({"text": "Sent.", "status": "delegated"}))])

    async def react(s: Scenario, event: Event) -> None:
        if isinstance(event, AgentSpawned):
            await s.report(event.agent, "a fox", media=[FOX])

    s, outcome = await run_lead(
        [claim, sent, note, Reply(text=f"Your fox: {FOX}")], react, task="Paint a fox."
    )
    assert (outcome.status, outcome.answer) == ("completed", f"Your fox: {FOX}")
    assert s.spawned == ["painter"]


@pytest.mark.parametrize(
    ("answer", "declined"),
    [
        ("I'm sorry, but I can't assist with that.", True),
        ("Sorry, I cannot help with that request.", True),
        ("Unfortunately I am unable to paint pictures.", True),
        ("I apologize, but I do not have any work in this session to delegate.", True),
        ("Sorry for the wait! Here is the answer: 42.", False),
        ("Paris is the capital of France. I can't recall its population.", False),
        ("The painter can't start: ask again later.", False),
        ("I\u2019m sorry, but I can\u2019t help with that.", True),
        ("Apologies, I won't be able to draw that.", True),
        ("Unfortunately, I don't have real-time data, but Paris is the capital.", False),
    ],
)
def test_what_counts_as_declining(answer: str, declined: bool) -> None:
    assert declines(answer) is declined


async def test_delegated_work_that_every_subagent_failed_is_incomplete() -> None:
    s, outcome = await run_lead(
        [send("painter", "a fox"), Reply(text="On it."), Reply(text="The fox is ready!")],
        after_the_send(("painter", [], "error")),
    )
    assert outcome.status == "incomplete"
    assert outcome.error == "painter did not deliver (error): painter is done"
    assert s.lead.roster.agents["painter"].exit_reason == "error"


async def test_n_model_retries_are_n_retries_in_all() -> None:
    """``--model-retries 3`` is three retries of a failing request, and no more: the lead does
    not retry a turn the client already retried (3 retries were once 12 attempts)."""
    s, outcome = await run_lead(
        [HttpError(500, "the model server crashed")] * 12,
        task="hi",
        retries=3,
    )
    assert outcome.status == "failed" and "gave up after 4 attempt(s)" in outcome.error
    assert len(s.server.requests) == 4
    retried = [e for e in s.events if isinstance(e, ModelRetried)]
    assert [e.attempt for e in retried] == [1, 2, 3]


async def test_a_lead_that_fails_for_good_answers_with_the_subagents_work() -> None:
    """Every try fails while the painter works; the lead waits for it (bounded) and the failed
    outcome still carries its result and media."""
    errors = 0

    async def react(s: Scenario, event: Event) -> None:
        nonlocal errors
        if isinstance(event, ErrorEvent):
            errors += 1
            if errors == 1:  # the model failed for good: the painter reports only now
                await s.report("painter", "a fox in the snow", media=[FOX])

    s, outcome = await run_lead(
        [send("painter", "a fox"), *[HttpError(500, "the model server crashed")] * 3],
        react,
        retries=2,
    )
    assert outcome.status == "failed" and "the model server crashed" in outcome.error
    assert outcome.media_urls == [FOX]
    assert "- painter: a fox in the snow" in outcome.answer
    assert outcome.answer.endswith(f"Media:\n- {FOX}")
    assert len(s.server.requests) == 4  # the delegation, the first try and the two retries


async def test_a_refused_configuration_is_not_retried() -> None:
    s, outcome = await run_lead([HttpError(401, "bad key", "invalid_api_key")])
    assert outcome.status == "failed" and "bad key" in outcome.error
    assert len(s.server.requests) == 1


async def test_a_spent_budget_ends_the_lead_with_what_the_subagents_made() -> None:
    """Two model calls allowed: the delegation and the note after it. The painter's result
    arrives, the next call is refused before it is made, and the outcome is built from it."""

    async def budget(bus: Bus) -> dict[str, Any]:
        await bus.budget.set_limits(SESSION, SpendLimits(max_model_calls=2))
        return {"spend": BusSpend(bus, SESSION)}

    s, outcome = await run_lead(
        [send("painter", "a fox"), Reply(text="On it."), Reply(text="never asked")],
        after_the_send(("painter", [FOX], "finished")),
        setup=budget,
    )
    assert outcome.status == "failed" and outcome.media_urls == [FOX]
    assert "- painter: painter is done" in outcome.answer
    assert len(s.server.requests) == 2
    assert "budget" in s.guards()


async def test_a_delegated_claim_once_every_result_is_in_is_sent_back_once_with_the_fact() -> None:
    """A 1.5B lead answered a translation ``delegated`` after its helper had reported: the person
    would wait for work that is done. The claim is checked against the roster (nothing
    outstanding, nothing read and waiting), in any language; the second answer stands."""
    on_it = Reply(calls=[Call("answer", json.dumps({"text": "On it.", "status": "delegated"}))])
    still = Reply(
        calls=[Call("answer", json.dumps({"text": "Un momento.", "status": "delegated"}))]
    )
    done = Reply(calls=[Call("answer", json.dumps({"text": f"Tu zorro: {FOX}", "status": "done"}))])
    s, outcome = await run_lead(
        [send("painter", "a fox"), on_it, still, done],
        after_the_send(("painter", [FOX], "finished")),
        task="Pinta un zorro.",
    )
    assert (outcome.status, outcome.answer) == ("completed", f"Tu zorro: {FOX}")
    note = s.server.requests[3].messages[-1]["content"]
    assert "all the work you delegated is in" in note and FOX in note
    assert len(s.server.requests) == 4 and s.spawned == ["painter"]

    s, outcome = await run_lead(
        [send("painter", "a fox"), on_it, still, still],
        after_the_send(("painter", [FOX], "finished")),
        task="Pinta un zorro.",
    )
    assert (outcome.status, len(s.server.requests)) == ("completed", 4)  # sent back once
    assert outcome.answer.startswith("Un momento.") and FOX in outcome.answer
