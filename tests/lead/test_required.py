"""A lead whose requests require a tool call (``tool_choice="required"``) still replies: through
the terminal ``answer`` tool, after delegating and to a plain question, its text streamed as the
lead's text. Scripted model through the real openai client, real bus."""

from __future__ import annotations

import json

from baton.bus.events import Event, TextDelta, ToolResulted
from baton.engine import tool
from baton.llm.script import Call, Reply
from tests.lead.scenario import Scenario, run_lead

FOX = "https://cdn.example/fox.png"


def calls(name: str, call_id: str, **args: str) -> Reply:
    return Reply(calls=[Call(name, json.dumps(args), id=call_id)])


async def test_a_required_tool_choice_delegates_then_answers_through_the_answer_tool() -> None:
    async def react(s: Scenario, event: Event) -> None:
        if isinstance(event, ToolResulted) and event.result.call_id == "c1":
            await s.report("painter", "a fox", media=[FOX])

    s, outcome = await run_lead(
        [
            calls("send_message", "c1", to="painter", content="paint a fox", type="task"),
            calls("answer", "c2", text="The painter is on it."),
            calls("answer", "c3", text=f"Here is your fox: {FOX}"),
        ],
        react,
        tool_choice="required",
    )
    assert (outcome.status, outcome.answer) == ("completed", f"Here is your fox: {FOX}")
    bodies = [request.body for request in s.server.requests]
    assert [body["tool_choice"] for body in bodies] == ["required"] * 3
    assert "answer" in {t["function"]["name"] for t in bodies[0]["tools"]}
    assert "call answer(text, status, media)" in bodies[0]["messages"][0]["content"]
    # the turn ended with its answer call: the next request is the next turn, with the result
    assert bodies[2]["messages"][-1]["content"].startswith("[result from painter] a fox")
    shown = "".join(e.text for e in s.events if isinstance(e, TextDelta))
    assert shown == f"The painter is on it.Here is your fox: {FOX}"


async def test_a_required_tool_choice_answers_a_plain_question_without_delegating() -> None:
    s, outcome = await run_lead(
        [calls("answer", "c1", text="Hello! How can I help?")], task="hi", tool_choice="required"
    )
    assert (outcome.status, outcome.answer) == ("completed", "Hello! How can I help?")
    assert s.spawned == [] and len(s.server.requests) == 1


async def test_the_answer_tool_is_offered_unless_none_and_a_callers_answer_tool_wins() -> None:
    """A request the client escalates to "required" (after a parse error) must still be able to
    reply, so the answer tool is offered with any tool_choice but "none" (and is optional then)."""

    @tool(name="answer")
    async def own_answer(question: str) -> str:
        """The caller's own tool named answer.

        Args:
            question: what to look up
        """
        return f"looked up {question}"

    plain, _ = await run_lead([Reply(text="Hi.")], task="hi")
    none, _ = await run_lead([Reply(text="Hi.")], task="hi", tool_choice="none")
    own, _ = await run_lead(
        [Reply(text="Hi.")], task="hi", tool_choice="required", tools=[own_answer]
    )
    names = [t["function"]["name"] for t in plain.server.requests[0].body["tools"]]
    assert names == ["send_message", "answer"]
    system = plain.server.requests[0].body["messages"][0]["content"]
    assert "call answer(text, status, media), or" in system
    assert "You must call a tool" not in system
    assert [t["function"]["name"] for t in none.server.requests[0].body["tools"]] == [
        "send_message"
    ]
    offered = {t["function"]["name"]: t for t in own.server.requests[0].body["tools"]}
    assert offered["answer"]["function"]["description"].startswith("The caller's own tool")
    assert "call answer(text" not in own.server.requests[0].body["messages"][0]["content"]
