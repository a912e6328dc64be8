"""The lead's honest outcome and a lead that survives its model: media the answer left out is
appended, invented URLs are flagged, work that produced nothing is ``incomplete``; a failed turn
is retried while results keep arriving, and a lead that fails for good still answers with every
sub-agent's result and media URL. Scripted model through the real openai client, real bus."""

from __future__ import annotations

import json
from typing import Any

import pytest

from baton.bus.base import Bus
from baton.bus.events import AnswerChecked, ErrorEvent, Event, ToolResulted
from baton.bus.spend import SpendLimits
from baton.engine.spend import BusSpend
from baton.lead.outcome import declines
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


async def test_urls_nobody_produced_are_invented_and_without_media_incomplete() -> None:
    s, outcome = await run_lead(
        [Reply(text="Done: https://via.placeholder.com/fox.png and https://docs.example/guide.")],
        task="draw a fox like the one on https://docs.example/guide",
    )
    assert outcome.status == "incomplete"
    assert outcome.invented_urls == ["https://via.placeholder.com/fox.png"]  # the user's is not
    assert checked(s).invented_urls == outcome.invented_urls
    assert "via.placeholder.com" in outcome.error


async def test_a_plain_answer_without_delegation_is_completed() -> None:
    s, outcome = await run_lead([Reply(text="Hello! How can I help?")], task="hi")
    assert (outcome.status, outcome.answer, outcome.invented_urls) == (
        "completed",
        "Hello! How can I help?",
        [],
    )
    assert (checked(s).missing_media, checked(s).invented_urls) == ([], [])


async def test_a_lead_that_declines_without_delegating_is_incomplete() -> None:
    s, outcome = await run_lead([Reply(text="I'm sorry, but I can't assist with that.")])
    assert outcome.status == "incomplete" and s.spawned == []
    assert outcome.error == "the lead declined the request without asking any sub-agent"


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
    assert outcome.error == "work was delegated and no sub-agent delivered a result"
    assert s.lead.roster.agents["painter"].exit_reason == "error"


async def test_a_failed_turn_is_retried_while_results_keep_arriving() -> None:
    """The model fails right after delegating; the painter's result arrives during the lead's
    wait for news; the retried turn answers with it."""

    async def react(s: Scenario, event: Event) -> None:
        if isinstance(event, ErrorEvent):
            await s.report("painter", "a fox", media=[FOX])

    s, outcome = await run_lead(
        [
            send("painter", "a fox"),
            HttpError(500, "the model server crashed"),
            Reply(text=f"Here is your fox: {FOX}"),
        ],
        react,
        failure_backoff_s=30.0,  # the news, not the backoff, ends the wait (else: test timeout)
        timeout=20.0,
    )
    assert (outcome.status, outcome.answer) == ("completed", f"Here is your fox: {FOX}")
    assert outcome.media_urls == [FOX]
    retried = s.server.requests[2].messages
    assert retried[-1]["content"].startswith("[result from painter] a fox")


async def test_a_lead_that_fails_for_good_answers_with_the_subagents_work() -> None:
    """Every try fails while the painter works; the lead waits for it (bounded) and the failed
    outcome still carries its result and media."""
    errors = 0

    async def react(s: Scenario, event: Event) -> None:
        nonlocal errors
        if isinstance(event, ErrorEvent):
            errors += 1
            if errors == 3:  # the last try: the painter reports only now
                await s.report("painter", "a fox in the snow", media=[FOX])

    s, outcome = await run_lead(
        [send("painter", "a fox"), *[HttpError(500, "the model server crashed")] * 3],
        react,
        failure_backoff_s=0.01,
    )
    assert outcome.status == "failed" and "the model server crashed" in outcome.error
    assert outcome.media_urls == [FOX]
    assert "- painter: a fox in the snow" in outcome.answer
    assert outcome.answer.endswith(f"Media:\n- {FOX}")
    assert len(s.server.requests) == 4  # the first try and the two retries allowed


async def test_a_refused_configuration_is_not_retried() -> None:
    s, outcome = await run_lead([HttpError(401, "bad key", "invalid_api_key")])
    assert outcome.status == "failed" and "bad key" in outcome.error
    assert len(s.server.requests) == 1


async def test_a_spent_budget_ends_the_lead_with_what_the_subagents_made() -> None:
    """Two model calls allowed: the delegation and the note after it. The painter's result
    arrives, the next call is refused before it is made, and the outcome is built from it."""

    async def budget(bus: Bus) -> dict[str, Any]:
        await bus.set_spend_limits(SESSION, SpendLimits(max_model_calls=2))
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
