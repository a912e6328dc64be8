"""How the lead's work ends when its model misbehaves: delegation waves capped per request, a
final answer that is cut, blocked or silent asked for once more (then composed or incomplete),
URLs only a sub-agent's prose mentions counted as invented, media asked and never made, the
session deadline bounding every turn, a retried lead turn announced, and the ``answer`` tool
there when the client escalates to ``required``. Scripted model through the real openai client,
real bus."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from baton.api import Session, SessionConfig
from baton.bus.connect import open_bus
from baton.bus.events import (
    RETRACTED_DEADLINE,
    AnswerChecked,
    ErrorEvent,
    Event,
    ModelRetried,
    TextDelta,
    TextRetracted,
    ToolResulted,
)
from baton.bus.messages import make_envelope
from baton.lead.delegation import DelegationLimits, Waves
from baton.lead.guided import GuidedPolicy
from baton.lead.heuristics import quotes_what_it_was_told
from baton.lead.prompt import OWN_FINAL_NOTE, note_block, system_prompt, waves_note
from baton.llm.script import Call, HttpError, Reply
from baton.llm.types import Message
from baton.session.compose import media_profiles
from baton.settings import delegation, load_settings
from baton.subagents.profiles import builtin_profiles
from tests.lead.scenario import PROFILES, SESSION, React, Scenario, run_lead
from tests.support.models import call, scripted

FOX = "https://cdn.example/fox.png"
CAT = "https://cdn.example/cat.png"


def send(to: str, content: str, call_id: str) -> Reply:
    args = json.dumps({"to": to, "content": content, "type": "task"})
    return Reply(calls=[Call("send_message", args, id=call_id)])


def reports_after(*sends: tuple[str, str, list[str], str]) -> React:
    """Once the send with call id ``c`` has run, agent ``name`` reports ``content`` (``media``)."""

    async def react(s: Scenario, event: Event) -> None:
        if isinstance(event, ToolResulted):
            for call_id, name, media, content in sends:
                if event.result.call_id == call_id:
                    await s.report(name, content, media=media)

    return react


def choices(s: Scenario) -> list[object]:
    return [request.body.get("tool_choice") for request in s.server.requests]


# -- delegation waves -------------------------------------------------------------------------


async def test_spent_waves_make_the_lead_answer_without_tools() -> None:
    """The real-model loop: one wave per turn, each with new wording (painter, then helper...).
    After two waves the next turn is asked with tool_choice "none" and told to answer."""
    s, outcome = await run_lead(
        [
            send("painter", "paint a fox sleeping in the snow", "c1"),
            Reply(text="The painter is on it."),
            send("helper", "help paint a fox asleep on snow", "c2"),
            Reply(text="Asked the helper too."),
            Reply(text=f"Here is your fox: {FOX}"),
        ],
        reports_after(("c1", "painter", [FOX], "a fox"), ("c2", "helper", [], "a sketch")),
        task="Paint a fox sleeping in the snow",
    )
    assert (outcome.status, outcome.answer) == ("completed", f"Here is your fox: {FOX}")
    assert s.spawned == ["painter", "helper"]
    assert choices(s) == [None, None, None, None, "none"]
    note = s.server.requests[4].messages[-1]["content"]
    assert note.startswith("[note from session] You have delegated enough for this request.")
    assert FOX in note


async def test_a_new_request_from_a_person_starts_the_waves_over() -> None:
    """Two waves spent, then a person asks for more: the next turn may delegate again."""

    async def react(s: Scenario, event: Event) -> None:
        await reports_after(("c1", "painter", [FOX], "a fox"))(s, event)
        if isinstance(event, ToolResulted) and event.result.call_id == "c2":
            follow_up = make_envelope(
                session=SESSION, sender="user", recipient="lead", type="task", content="a cat too"
            )
            await s.bus.inboxes.send(follow_up)
            await s.report("helper", "a sketch")
        if isinstance(event, ToolResulted) and event.result.call_id == "c3":
            await s.report("painter-2", "a cat", media=[CAT])

    s, outcome = await run_lead(
        [
            send("painter", "paint a fox", "c1"),
            Reply(text="On it."),
            send("helper", "sketch a fox", "c2"),
            Reply(text="Asked the helper."),
            send("painter", "paint a cat", "c3"),  # the third wave: a new request allows it
            Reply(text="The cat is coming."),
            Reply(text=f"A fox: {FOX} and a cat: {CAT}"),
        ],
        react,
    )
    assert (outcome.status, outcome.answer) == ("completed", f"A fox: {FOX} and a cat: {CAT}")
    assert s.spawned == ["painter", "helper", "painter-2"]
    assert choices(s) == [None] * 7  # a third wave, and no tool-less turn: the cat is new work


async def test_max_waves_is_configurable() -> None:
    s, outcome = await run_lead(
        [send("painter", "a fox", "c1"), Reply(text="On it."), Reply(text=f"Fox: {FOX}")],
        reports_after(("c1", "painter", [FOX], "a fox")),
        delegation=DelegationLimits(max_waves=1),
    )
    assert outcome.status == "completed"
    assert choices(s) == [None, None, "none"]


def test_waves_count_turns_that_sent_and_start_over_for_a_new_request(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    waves = Waves(2)
    waves.count(0)
    waves.count(3)
    assert (waves.spent, waves.exhausted) == (1, False)
    waves.count(1)
    assert waves.exhausted
    waves.reset()
    assert (waves.spent, waves.exhausted) == (0, False)
    assert DelegationLimits().max_waves == 2
    monkeypatch.setenv("BATON_MAX_WAVES", "4")
    limits = delegation(load_settings())
    assert limits is not None and limits.max_waves == 4


# -- the final answer -------------------------------------------------------------------------


async def test_a_silent_last_turn_is_asked_once_more_without_tools() -> None:
    s, outcome = await run_lead(
        [
            send("painter", "a fox", "c1"),
            Reply(text="On it."),
            Reply(text=""),
            Reply(text=f"The fox: {FOX}"),
        ],
        reports_after(("c1", "painter", [FOX], "a fox")),
    )
    assert (outcome.status, outcome.answer) == ("completed", f"The fox: {FOX}")
    assert choices(s)[-1] == "none"
    assert (
        s.server.requests[-1]
        .messages[-1]["content"]
        .startswith("[note from session] All delegated work is in, but you gave no final answer.")
    )


async def test_no_answer_even_when_asked_is_composed_from_the_results() -> None:
    """Every sub-agent delivered: the work is done, and the composed answer (which says who wrote
    it) carries all of it, so the session completed; the check says it was composed."""
    s, outcome = await run_lead(
        [send("painter", "a fox", "c1"), Reply(text="On it."), Reply(text=""), Reply(text="")],
        reports_after(("c1", "painter", [FOX], "a fox in the snow")),
    )
    assert (outcome.status, outcome.error, outcome.composed) == ("completed", "", True)
    assert outcome.answer.startswith("the lead gave no final answer, so this answer was composed")
    assert "- painter: a fox in the snow" in outcome.answer
    assert outcome.answer.endswith(f"Media:\n- {FOX}")
    [check] = [e for e in s.events if isinstance(e, AnswerChecked)]
    assert check.composed
    assert len(s.server.requests) == 4


async def test_no_answer_with_a_sub_agent_that_failed_is_composed_and_incomplete() -> None:
    async def react(s: Scenario, event: Event) -> None:
        if isinstance(event, ToolResulted) and event.result.call_id == "c2":
            await s.report("painter", "a fox", media=[FOX])
            await s.report("writer", "the model failed", reason="error")

    _, outcome = await run_lead(
        [
            send("painter", "a fox", "c1"),
            send("writer", "a poem", "c2"),
            Reply(text="On it."),
            Reply(text=""),
            Reply(text=""),
        ],
        react,
    )
    assert (outcome.status, outcome.error) == ("incomplete", "the lead gave no final answer")
    assert outcome.composed and FOX in outcome.answer


async def test_a_final_answer_cut_twice_is_composed_from_work_that_is_done() -> None:
    """A runaway summary of work every sub-agent delivered: the answer is composed from their
    reports (and says why), and the session completed."""
    cut = Reply(text="the fox " * 20, finish_reason="length")
    s, outcome = await run_lead(
        [send("painter", "a fox", "c1"), Reply(text="On it."), cut, cut, cut, cut],
        reports_after(("c1", "painter", [FOX], "a fox in the snow")),
    )
    assert (outcome.status, outcome.composed) == ("completed", True)
    assert outcome.answer.startswith("the lead's final answer was cut at the output limit")
    assert "- painter: a fox in the snow" in outcome.answer
    assert "the fox the fox" not in outcome.answer
    assert outcome.answer.endswith(f"Media:\n- {FOX}")
    assert choices(s)[-2:] == ["none", "none"]  # the last turn (and its shorter retry)


async def test_a_final_answer_cut_twice_is_incomplete_when_work_is_missing() -> None:
    async def react(s: Scenario, event: Event) -> None:
        if isinstance(event, ToolResulted) and event.result.call_id == "c1":
            await s.report("painter", "cut twice", media=[FOX], reason="error")

    cut = Reply(text="the fox " * 20, finish_reason="length")
    _, outcome = await run_lead(
        [send("painter", "a fox", "c1"), Reply(text="On it."), cut, cut, cut, cut], react
    )
    assert outcome.status == "incomplete" and not outcome.composed
    assert "cut at the output limit" in outcome.error
    assert outcome.answer.endswith(f"Media:\n- {FOX}")  # the media still reach the user


async def test_a_plain_answer_cut_twice_is_incomplete() -> None:
    cut = Reply(text="Paris " * 20, finish_reason="length")
    _, outcome = await run_lead([cut, cut, cut, cut], task="What is the capital of France?")
    assert outcome.status == "incomplete"
    assert "cut at the output limit" in outcome.error and not outcome.composed


# -- what counts as produced ------------------------------------------------------------------


async def test_a_url_only_a_subagents_prose_mentions_is_invented() -> None:
    made_up = "https://example.com/fox.png"
    here = Reply(text=f"Here: {made_up}")
    _, outcome = await run_lead(
        [send("painter", "a fox", "c1"), Reply(text="On it."), here, here],
        reports_after(("c1", "painter", [], f"here: {made_up}")),
    )
    assert outcome.status == "incomplete"
    assert outcome.invented_urls == [made_up] and outcome.media_urls == []


async def test_a_media_profile_asked_and_no_media_is_incomplete() -> None:
    _, outcome = await run_lead(
        [send("painter", "a fox", "c1"), Reply(text="On it."), Reply(text="The fox is painted.")],
        reports_after(("c1", "painter", [], "I painted a fox.")),
        media_profiles=frozenset({"painter"}),
    )
    assert outcome.status == "incomplete"
    assert outcome.error == "no media was produced though a media-making agent was asked (painter)"
    delivered, _ = await run_lead(
        [send("painter", "a fox", "c1"), Reply(text="On it."), Reply(text=f"Fox: {FOX}")],
        reports_after(("c1", "painter", [FOX], "a fox")),
        media_profiles=frozenset({"painter"}),
    )
    assert delivered.lead.roster.media_urls == [FOX]


def test_media_profiles_are_those_with_a_media_tool() -> None:
    assert media_profiles(builtin_profiles()) == {"painter"}


# -- the deadline -----------------------------------------------------------------------------


async def test_a_turn_held_past_the_deadline_gets_one_bounded_late_answer() -> None:
    """The server holds the reply back with no bytes (as llama-server does with output it cannot
    classify): the deadline cuts the turn, and one last turn without tools answers."""
    held = Reply(text="never", hold_after=0)
    s, outcome = await run_lead(
        [held, Reply(text="Sorry, I ran out of time.")], timeout=10.0, timeout_s=0.3
    )
    assert (outcome.status, outcome.answer) == ("timed_out", "Sorry, I ran out of time.")
    assert choices(s) == [None, "none"]
    assert "timed out after 0.3 s" in s.server.requests[1].messages[-1]["content"]


async def test_text_a_cut_turn_showed_is_taken_back_before_the_late_answer() -> None:
    """The deadline cut a reply mid-stream: what it showed is retracted, so the views hold the
    late answer alone, not the cut words before it."""
    cut = Reply(text=("I will paint ", "your fox now. ", "never"), hold_after=2)
    s, outcome = await run_lead([cut, Reply(text="Out of time.")], timeout=10.0, timeout_s=0.5)
    assert (outcome.status, outcome.answer) == ("timed_out", "Out of time.")
    lead = [e for e in s.events if isinstance(e, (TextDelta, TextRetracted))]
    [retraction] = [i for i, e in enumerate(lead) if isinstance(e, TextRetracted)]
    shown_before = sum(len(e.text) for e in lead[:retraction] if isinstance(e, TextDelta))
    taken_back = lead[retraction]
    assert isinstance(taken_back, TextRetracted)
    assert shown_before > 0 and taken_back.chars == shown_before
    assert taken_back.why == RETRACTED_DEADLINE
    after = "".join(e.text for e in lead[retraction + 1 :] if isinstance(e, TextDelta))
    assert after == "Out of time."


async def test_a_late_answer_held_too_is_composed_from_the_results() -> None:
    held = Reply(text="never", hold_after=0)
    _, outcome = await run_lead(
        [send("painter", "a fox", "c1"), held, held],
        reports_after(("c1", "painter", [FOX], "a fox")),
        timeout=10.0,
        timeout_s=0.3,
        late_answer_s=0.3,
    )
    assert outcome.status == "timed_out" and "timed out after 0.3 s" in outcome.error
    assert outcome.answer.startswith("The session timed out before the lead answered")
    assert outcome.media_urls == [FOX] and outcome.answer.endswith(f"Media:\n- {FOX}")


# -- retries and the answer tool --------------------------------------------------------------


async def test_a_retried_lead_request_is_announced() -> None:
    s, outcome = await run_lead(
        [HttpError(500, "the model server crashed"), Reply(text="Hello!")], task="hi", retries=1
    )
    assert (outcome.status, outcome.answer) == ("completed", "Hello!")
    kinds = [type(e) for e in s.events if isinstance(e, (ErrorEvent, ModelRetried))]
    assert kinds == [ModelRetried]  # a retry that worked is no error
    [retried] = [e for e in s.events if isinstance(e, ModelRetried)]
    assert (retried.agent, retried.attempt) == ("lead", 1)
    assert "the model server crashed" in retried.reason


async def test_an_escalated_request_can_still_answer_through_the_answer_tool() -> None:
    """llama-server rejects a call of a tool it was not offered; the client retries asking for
    "required", and the lead (tool_choice unset) can still reply: the answer tool is there."""
    answer = Reply(calls=[Call("answer", json.dumps({"text": "Hello!"}), id="a1")])
    s, outcome = await run_lead(
        [Reply(calls=[Call("greet", "{}", id="g1")]), answer], task="hi", llama=True
    )
    assert (outcome.status, outcome.answer) == ("completed", "Hello!")
    assert choices(s) == [None, "required"]
    assert s.spawned == []


async def test_a_reply_that_parrots_the_correction_is_no_answer() -> None:
    """A 1.5B lead, corrected after a call the server could not parse, "answered" with the
    correction itself: that is no answer, so the lead is asked once more without tools."""
    parrot = (
        "Your last reply could not be used: the server could not parse it. The only tools you "
        "can call are: send_message, answer."
    )
    s, outcome = await run_lead(
        [
            Reply(calls=[Call("greet", "{}", id="g1")]),
            Reply(calls=[Call("answer", json.dumps({"text": parrot}), id="a1")]),
            Reply(text="Hello!"),
        ],
        task="hi",
        llama=True,
        policy=GuidedPolicy(),  # an aid for small models: the default takes the model's words
    )
    assert (outcome.status, outcome.answer) == ("completed", "Hello!")
    assert choices(s) == [None, "required", "none"]


async def test_an_answer_call_written_as_text_is_the_answer() -> None:
    """Asked without tools, a 1.5B lead wrote its answer as an ``answer`` call in JSON text: the
    user gets the text of the call, not the JSON."""
    written = json.dumps({"name": "answer", "arguments": {"text": f"The fox: {FOX}"}})
    _, outcome = await run_lead(
        [send("painter", "a fox", "c1"), Reply(text="On it."), Reply(text=""), Reply(text=written)],
        reports_after(("c1", "painter", [FOX], "a fox")),
    )
    assert (outcome.status, outcome.answer) == ("completed", f"The fox: {FOX}")


@pytest.mark.parametrize(
    "parrot",
    [
        "[note from session] All delegated work is in, but you gave no final answer.",
        "Painter, a new painter agent, on this task. Its result will arrive in your inbox: do not "
        "wait or poll, answer the user now",
        "You gave no final answer.",
        "a few sentences at most, with no repetition. If you need a tool, call it through the "
        "tools interface instead of writing about it.",
        "Your previous reply was cut off after 3307 characters because it was longer than the "
        "output limit",
    ],
    ids=["note", "receipt", "note-without-its-opening", "reply-cut-note-tail", "reply-cut-note"],
)
async def test_a_final_answer_that_parrots_what_the_session_said_is_no_answer(parrot: str) -> None:
    """Asked for its final answer, a 1.5B lead repeated the session's note back, and a 0.5B lead
    the receipt of its send."""
    _, outcome = await run_lead(
        [send("painter", "a fox", "c1"), Reply(text="On it."), Reply(text=""), Reply(text=parrot)],
        reports_after(("c1", "painter", [FOX], "a fox")),
        policy=GuidedPolicy(),
    )
    assert (outcome.status, outcome.composed) == ("completed", True)  # the painter delivered
    assert parrot not in outcome.answer and FOX in outcome.answer


async def test_a_reply_read_as_no_answer_leaves_the_context_and_the_note_tells_the_truth() -> None:
    """A 1.5B lead answered a plain question by quoting its rules; asked for its answer with a
    note that said "all delegated work is in", it answered about a sub-agent that never existed.
    The screened reply is taken out of the context, and the note says only that no answer came."""
    rules = "To reply to the user, call answer(text, status, media), or write your reply as"
    s, outcome = await run_lead(
        [Reply(text=rules), Reply(text="Canberra.")],
        task="What is the capital of Australia?",
        policy=GuidedPolicy(),
    )
    assert (outcome.status, outcome.answer) == ("completed", "Canberra.")
    asked = s.server.requests[-1]
    assert choices(s)[-1] == "none" and s.spawned == []
    assert all(rules not in str(message.get("content")) for message in asked.messages[1:])
    assert asked.messages[-1]["content"] == "[note from session] " + OWN_FINAL_NOTE


def test_a_reply_quoting_a_tool_result_or_the_rules_of_the_lead_is_no_answer() -> None:
    """A 0.5B lead answered with the repeat guard's notice; quoting a sub-agent's result (a user
    message in the lead's context) is an answer, and so is a short overlap."""
    notice = (
        "send_message did not run: it was already called 3 times with the exact same arguments "
        "(limit 3). Do not retry it this turn; answer with what you have."
    )
    report = "[result from painter] I painted a red fox asleep in deep snow under a pale moon."
    history: list[Message] = [
        {"role": "system", "content": system_prompt(PROFILES, answer_tool=True, must_call=True)},
        {"role": "user", "content": report},
        {"role": "tool", "tool_call_id": "c1", "content": notice},
    ]
    parrot = "The task is already called 3 times with the exact same arguments (limit 3), sorry."
    assert quotes_what_it_was_told(parrot, history)
    # a 1.5B lead "answered" a lighthouse request with its rules
    rules = "You must call a tool in every reply: to reply to the user (your answer, or a short"
    assert quotes_what_it_was_told(rules, history)
    said = "Here it is: I painted a red fox asleep in deep snow."
    assert not quotes_what_it_was_told(said, history)
    assert not quotes_what_it_was_told("It did not run: already called 3 times today.", history)


def test_a_reply_quoting_a_note_from_the_session_is_no_answer() -> None:
    """A 0.5B lead answered with the note that its delegation waves were spent; the note is the
    session's by its block, whatever its words. A result block quoted stays an answer."""
    note = note_block("note", waves_note([], []))
    report = "[result from writer] Soft rain on the roof, the gutters hum their one note all night."
    history: list[Message] = [{"role": "user", "content": report}, note]
    parrot = "You have delegated enough for this request. All delegated work is in."
    assert quotes_what_it_was_told(parrot, history)
    assert not quotes_what_it_was_told("Soft rain on the roof, the gutters hum their one note.",
                                       history)  # fmt: skip


async def test_a_last_reply_that_only_writes_out_a_send_is_no_answer() -> None:
    """Asked for its final answer without tools, a 1.5B lead wrote a send_message call as JSON
    text: that is no answer, so the answer is composed from the results."""
    written = json.dumps({"name": "send_message", "arguments": {"to": "helper", "content": "bye"}})
    s, outcome = await run_lead(
        [send("painter", "a fox", "c1"), Reply(text="On it."), Reply(text=""), Reply(text=written)],
        reports_after(("c1", "painter", [FOX], "a fox")),
    )
    assert (outcome.status, outcome.composed) == ("completed", True)  # the painter delivered
    assert outcome.answer.endswith(f"Media:\n- {FOX}") and "send_message" not in outcome.answer
    assert choices(s)[-1] == "none" and s.spawned == ["painter"]


async def test_a_session_whose_painter_made_no_picture_is_incomplete(tmp_path: Path) -> None:
    """The session derives the media profiles from the tools (generate_image makes media): a
    painter that reports without painting leaves the session incomplete, not completed."""
    _, painter_model = scripted(
        [call("send_message", content="I painted a fox.", type="result")], fallback=False
    )
    _, lead_model = scripted()  # the offline lead: delegates, then sums the results up
    config = SessionConfig(
        task="paint a fox", profiles=[builtin_profiles()["painter"]], media_dir=tmp_path
    )
    async with open_bus() as bus:
        async with Session(
            config, bus=bus, model=lead_model, subagent_models=lambda _: painter_model
        ) as session:
            result = await session.run()
    assert result.status == "incomplete" and result.media_urls == []
    assert result.error == "no media was produced though a media-making agent was asked (painter)"
