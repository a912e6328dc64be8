"""send_message's semantics, the successor started once, a roster read before each send, the
per-turn caps, the content repeat key, profile names used as tools: the lead driven by its
scripted model through the real openai client, on a real bus."""

from __future__ import annotations

import json
from pathlib import Path

import anyio

from baton.api import Session, SessionConfig
from baton.bus.events import AgentResult, Event, GuardFired, RoundEnded, ToolResulted
from baton.bus.messages import make_envelope
from baton.engine import LoopLimits, tool
from baton.lead import DelegationLimits
from baton.llm.script import Call, Reply
from baton.subagents.profiles import AgentLimits, Profile
from tests.lead.scenario import PROFILES, SESSION, Scenario, run_lead
from tests.support.events import logged_events
from tests.support.models import scripted


def send(to: str, content: str, call_id: str, kind: str = "task") -> Call:
    return Call(
        "send_message", json.dumps({"to": to, "content": content, "type": kind}), id=call_id
    )


async def test_tasks_to_a_profile_start_new_agents_and_agent_names_reach_them() -> None:
    async def react(s: Scenario, event: Event) -> None:
        if isinstance(event, ToolResulted) and event.result.call_id == "d":
            for name in ("painter", "painter-2", "painter-3"):
                await s.report(name, f"{name} painted")

    s, outcome = await run_lead(
        [
            Reply(
                calls=[
                    send("painter", "paint a fox", "a"),
                    send("painter", "paint a heron", "b"),
                    send("painter", "paint a cat", "c"),
                ]
            ),
            Reply(calls=[send("painter-2", "make the heron blue", "d", "message")]),
            Reply(text="Three painters are on it."),
            Reply(text="Here they are."),
        ],
        react,
    )
    assert (outcome.status, outcome.answer) == ("completed", "Here they are.")
    assert s.spawned == ["painter", "painter-2", "painter-3"]
    sent = {name: [m.content for m in r.sent] for name, r in s.lead.roster.agents.items()}
    assert sent == {
        "painter": ["paint a fox"],
        "painter-2": ["paint a heron", "make the heron blue"],
        "painter-3": ["paint a cat"],
    }
    results = s.tool_results()
    assert results["a"].startswith("Started painter, a new painter agent")
    assert results["b"].startswith("Started painter-2, a new painter agent")
    assert results["d"].startswith("Sent to painter-2 (profile painter)")
    # the running agents are offered beside the profiles, and dropped once they are done
    assert s.to_enum(0) == list(PROFILES)
    assert s.to_enum(1) == [*PROFILES, "painter-2", "painter-3"]  # "painter" is a profile already
    assert s.to_enum(3) == list(PROFILES)


async def test_messages_to_an_exited_agent_start_one_successor() -> None:
    """The painter's result is already in the inbox when the lead follows it up: the send reads
    it first and, as the model has not seen it, is not made; the turn ends, and the follow-up
    sent again with the result in view goes to one successor, the next one to the same one."""

    async def react(s: Scenario, event: Event) -> None:
        if isinstance(event, ToolResulted) and event.result.call_id == "c1":
            await s.report("painter", "a fox", media=["https://cdn.example/fox.png"])
        if isinstance(event, ToolResulted) and event.result.call_id == "c3":
            await s.report("painter-2", "a red fox in a hat", media=["https://cdn.example/red.png"])

    s, outcome = await run_lead(
        [
            Reply(calls=[send("painter", "paint a fox", "c1")]),
            Reply(calls=[send("painter", "make it red", "c0", "message")]),  # decided blind
            Reply(calls=[send("painter", "make it red", "c2", "message")]),
            Reply(calls=[send("painter", "add a hat", "c3", "message")]),
            Reply(text="On it."),
            Reply(text="A red fox in a hat: https://cdn.example/red.png"),
        ],
        react,
    )
    assert s.spawned == ["painter", "painter-2"]
    assert s.lead.roster.successors == {"painter": "painter-2"}
    assert [m.content for m in s.lead.roster.agents["painter-2"].sent] == [
        "make it red",
        "add a hat",
    ]
    results = s.tool_results()
    assert results["c0"].startswith("Not sent: painter reported after you last saw your inbox")
    assert s.server.requests[2].messages[-1]["content"].startswith("[result from painter]")
    assert results["c2"].startswith("painter had already finished, so painter-2")
    assert results["c3"].startswith("painter had finished; sent to painter-2")
    assert outcome.status == "completed"
    # both results reached the context, the one read early by the send included
    context = "\n".join(str(m.get("content")) for m in s.lead.history)
    assert "[result from painter] a fox" in context
    assert "[result from painter-2] a red fox in a hat" in context
    assert not s.lead.inbox.pending  # everything read (early too) was acked


async def test_sends_past_the_turn_caps_are_refused_and_blocked_rounds_end_the_turn() -> None:
    async def react(s: Scenario, event: Event) -> None:
        if isinstance(event, GuardFired) and event.outcome == "blocked-rounds":
            for name in ("painter", "painter-2", "writer"):
                await s.report(name)

    limits = DelegationLimits(
        max_sends_per_turn=3, max_new_agents_per_profile=2, max_sends_per_agent=1
    )
    s, outcome = await run_lead(
        [
            Reply(
                calls=[
                    send("painter", "a", "a"),
                    send("painter", "b", "b"),
                    send("painter", "c", "c"),
                ]
            ),
            Reply(calls=[send("painter-2", "more", "d", "message")]),
            Reply(calls=[send("writer", "w", "e")]),
            Reply(calls=[send("helper", "h", "f")]),
            Reply(calls=[send("helper", "h2", "g")]),
            Reply(text="Done."),
        ],
        react,
        delegation=limits,
    )
    results = s.tool_results()
    assert "started 2 painter agents this turn" in results["c"]
    assert "already sent 1 messages to painter-2" in results["d"]
    assert "already sent 3 messages this turn" in results["f"]
    assert all(results[i].startswith("Did not send") for i in "cdfg")
    assert s.spawned == ["painter", "painter-2", "writer"]
    assert s.guards().count("send-cap") == 4
    assert s.guards().count("blocked-rounds") == 1  # d alone did not: e went through after it
    # the turn ended after the second blocked round: the next request is a new turn
    assert len(s.server.requests) == 6
    assert s.server.requests[5].messages[-1]["content"].startswith("[result from painter]")
    # work was asked and refused: not done, whatever the answer says
    assert (outcome.status, outcome.answer) == ("incomplete", "Done.")
    assert outcome.error.startswith("4 send(s) to sub-agents were refused by the delegation caps")


async def test_a_shutdown_of_an_agent_given_work_in_the_same_turn_is_refused() -> None:
    """A 1.5B lead sent a painter its task and "Finish." in one reply, and the painter left
    without painting: the shutdown is refused (the task stands, the painter delivers), and being
    no refused work, it leaves the session ``completed``."""

    async def react(s: Scenario, event: Event) -> None:
        if isinstance(event, ToolResulted) and event.result.call_id == "b":
            await s.report("painter", "a moon", media=["https://cdn.example/moon.png"])

    s, outcome = await run_lead(
        [
            Reply(
                calls=[
                    send("painter", "paint a moon", "a"),
                    send("painter", "Finish.", "b", "shutdown"),
                ]
            ),
            Reply(text="Working on it."),
            Reply(text="The moon: https://cdn.example/moon.png"),
        ],
        react,
    )
    results = s.tool_results()
    assert results["b"].startswith("Did not shut down painter: you sent it work in this same turn")
    assert s.lead.roster.agents["painter"].results == ["a moon"]
    assert s.guards() == []
    assert (outcome.status, outcome.error) == ("completed", "")


async def test_the_same_task_cycled_over_targets_is_refused_until_a_new_request() -> None:
    async def react(s: Scenario, event: Event) -> None:
        if isinstance(event, RoundEnded) and event.round == 1 and event.tool_calls:
            await s.report("painter", "a fox")
        if isinstance(event, ToolResulted) and event.result.call_id == "d":
            request = make_envelope(
                session=SESSION,
                sender="user",
                recipient="lead",
                type="task",
                content="paint another fox",
            )
            await s.bus.inboxes.send(request)
        if isinstance(event, ToolResulted) and event.result.call_id == "f":
            await s.report("painter-2", "another fox")

    s, outcome = await run_lead(
        [
            Reply(
                calls=[
                    send("painter", "Paint a fox.", "a"),
                    send("helper", "paint a fox", "b"),
                    send("writer", "PAINT  A FOX", "c"),
                ]
            ),
            Reply(text="Asked."),
            Reply(calls=[send("painter", "paint a fox!", "d")]),  # again, its result in hand
            Reply(text="Here is the fox."),
            Reply(calls=[send("painter", "paint a fox", "f")]),  # the user asked again
            Reply(text="Here is another."),
            Reply(text="Done."),
        ],
        react,
    )
    results = s.tool_results()
    assert "painter is already working on this task" in results["b"]
    assert results["b"] == results["c"]
    assert "painter already did this task" in results["d"]
    assert results["f"].startswith("Started painter-2")
    assert s.spawned == ["painter", "painter-2"]
    assert s.guards().count("repeated") == 3
    assert outcome.status == "completed"


async def test_a_result_passed_on_as_a_new_agents_message_is_refused_as_no_task() -> None:
    # a 1.5B lead relayed the painter's one-line result to helper, writer and helper again as
    # type="message", each starting a new agent; a message that starts an agent is its task
    async def react(s: Scenario, event: Event) -> None:
        if isinstance(event, ToolResulted) and event.result.call_id == "a":
            await s.report("painter", "The fox sleeps in the snow.")
        if isinstance(event, ToolResulted) and event.result.call_id == "d":
            await s.report("writer", "A caption.")

    s, outcome = await run_lead(
        [
            Reply(calls=[send("painter", "Paint a fox.", "a")]),
            Reply(text="Asked."),
            Reply(calls=[send("helper", "the fox sleeps in the snow", "b", "message")]),
            Reply(calls=[send("writer", "Caption the fox picture.", "c", "message")]),
            Reply(calls=[send("helper", "caption the fox picture", "d", "message")]),
            Reply(text="The caption is coming."),
            Reply(text="Here is the fox, with its caption."),
        ],
        react,
    )
    results = s.tool_results()
    assert results["b"].startswith("Did not send: that is painter's result")
    assert results["c"].startswith("Started writer")  # a result with a task is work
    assert "writer is already working on this task" in results["d"]
    assert s.spawned == ["painter", "writer"]
    assert s.guards().count("repeated") == 2
    assert (outcome.status, outcome.answer) == ("completed", "Here is the fox, with its caption.")


async def test_a_result_sent_as_a_task_or_in_a_later_request_goes_out() -> None:
    # a task may be a result as it stands (text a publisher is to save), and a later request's
    # message may carry an earlier request's result: only a relay within the request is no task
    async def react(s: Scenario, event: Event) -> None:
        if isinstance(event, RoundEnded) and event.round == 1 and event.tool_calls:
            await s.report("writer", "A haiku about foxes.")
        if isinstance(event, ToolResulted) and event.result.call_id == "b":
            await s.report("painter", "saved")
            await s.bus.inboxes.send(
                make_envelope(
                    session=SESSION,
                    sender="user",
                    recipient="lead",
                    type="task",
                    content="ask the helper about it",
                )
            )
        if isinstance(event, ToolResulted) and event.result.call_id == "c":
            await s.report("helper", "a fine haiku")

    s, outcome = await run_lead(
        [
            Reply(calls=[send("writer", "Write a haiku about foxes.", "a")]),
            Reply(text="Asked."),
            Reply(calls=[send("painter", "a haiku about foxes", "b", "task")]),
            Reply(text="Saving it."),
            Reply(calls=[send("helper", "A haiku about foxes.", "c", "message")]),
            Reply(text="Asked the helper."),
            Reply(text="The helper likes it."),
        ],
        react,
    )
    results = s.tool_results()
    assert results["b"].startswith("Started painter")
    assert results["c"].startswith("Started helper")
    assert s.spawned == ["writer", "painter", "helper"]
    assert outcome.status == "completed"


async def test_news_holds_a_later_rounds_sends_but_never_splits_a_round() -> None:
    # a round's calls are one decision: the painter's result, read between its two sends, holds
    # neither; the next round, decided before the results were seen, is held whole
    async def react(s: Scenario, event: Event) -> None:
        if isinstance(event, ToolResulted) and event.result.call_id == "a":
            await s.report("painter", "a fox")
        if isinstance(event, ToolResulted) and event.result.call_id == "b":
            await s.report("writer", "a poem")  # before the next round's sends: it holds them
        if isinstance(event, ToolResulted) and event.result.call_id == "f":
            await s.report("helper", "a fact")
            await s.report("painter-2", "a cat")

    s, outcome = await run_lead(
        [
            Reply(calls=[send("painter", "Paint a fox.", "a"), send("writer", "A poem.", "b")]),
            Reply(calls=[send("helper", "A fact.", "c"), send("painter", "Paint a cat.", "d")]),
            Reply(calls=[send("helper", "A fact.", "e"), send("painter", "Paint a cat.", "f")]),
            Reply(text="Working on it."),
            Reply(text="A fox, a poem, a fact and a cat."),
        ],
        react,
    )
    results = s.tool_results()
    assert results["b"].startswith("Started writer")
    assert results["c"] == results["d"]
    assert results["c"].startswith("Not sent: painter, writer reported after you last saw")
    assert "[result from writer]" in s.server.requests[2].messages[-1]["content"]
    assert s.spawned == ["painter", "writer", "helper", "painter-2"]
    assert outcome.status == "completed"


async def test_a_task_whose_agent_failed_may_be_sent_again() -> None:
    async def react(s: Scenario, event: Event) -> None:
        if isinstance(event, ToolResulted) and event.result.call_id == "a":
            await s.report("painter", "the paint ran out", reason="error")
        if isinstance(event, ToolResulted) and event.result.call_id == "b":
            await s.report("painter-2", "a fox")

    s, outcome = await run_lead(
        [
            Reply(calls=[send("painter", "paint a fox", "a")]),
            Reply(text="Asked."),
            Reply(calls=[send("painter", "paint a fox", "b")]),
            Reply(text="Asked again."),
            Reply(text="Here is the fox."),
        ],
        react,
    )
    assert s.tool_results()["b"].startswith("Started painter-2")
    assert s.spawned == ["painter", "painter-2"] and outcome.status == "completed"


async def test_the_same_follow_up_cycled_is_a_repeat_for_the_engine() -> None:
    async def react(s: Scenario, event: Event) -> None:
        if isinstance(event, RoundEnded) and event.round == 2 and event.tool_calls:
            await s.report("painter", "a red fox")

    s, outcome = await run_lead(
        [
            Reply(calls=[send("painter", "paint a fox", "a")]),
            Reply(
                calls=[
                    send("painter", "Make it red.", "b", "message"),
                    send("painter", "make it RED", "c", "message"),
                    send("painter", "make  it red!", "d", "message"),
                    send("painter", "make it red", "e", "message"),
                ]
            ),
            Reply(text="Asked."),
            Reply(text="Done."),
        ],
        react,
        delegation=DelegationLimits(max_sends_per_agent=10),
        limits=LoopLimits(max_repeats=3),
    )
    results = s.tool_results()
    assert all(results[i].startswith("Sent to painter") for i in "bcd")
    assert not results["e"].startswith("Sent to painter")
    assert s.guards() == ["repeated"]  # the engine's guard, on send_message's repeat key
    assert [m.content for m in s.lead.roster.agents["painter"].sent][1:] == [
        "Make it red.",
        "make it RED",
        "make  it red!",
    ]
    assert outcome.status == "completed"


async def test_a_profile_called_as_a_tool_is_a_task_for_it() -> None:
    async def react(s: Scenario, event: Event) -> None:
        if isinstance(event, RoundEnded) and event.round == 1 and event.tool_calls:
            await s.report("painter")
            await s.report("writer")

    s, outcome = await run_lead(
        [
            Reply(
                calls=[
                    Call("painter", json.dumps({"prompt": "paint a fox"}), id="a"),
                    Call("writer", json.dumps({"style": "haiku"}), id="b"),
                ]
            ),
            Reply(text="Asked."),
            Reply(text="Done."),
        ],
        react,
    )
    assert s.spawned == ["painter", "writer"]
    sent = {name: [m.content for m in r.sent] for name, r in s.lead.roster.agents.items()}
    assert sent == {"painter": ["paint a fox"], "writer": ['{"style": "haiku"}']}
    assert outcome.status == "completed"


async def test_profile_tools_are_offered_unless_a_tool_has_the_name() -> None:
    @tool(name="writer")
    async def own_writer(text: str) -> str:
        """The caller's own tool named like a profile.

        Args:
            text: what to write
        """
        return f"wrote {text}"

    async def react(s: Scenario, event: Event) -> None:
        if isinstance(event, RoundEnded) and event.round == 1 and event.tool_calls:
            await s.report("painter")

    s, outcome = await run_lead(
        [
            Reply(calls=[Call("painter", json.dumps({"task": "paint a fox"}), id="a")]),
            Reply(text="Asked."),
            Reply(text="Done."),
        ],
        react,
        tools=[own_writer],
        profile_tools=True,
    )
    offered = {t["function"]["name"]: t["function"] for t in s.server.requests[0].body["tools"]}
    assert set(offered) == {"send_message", "answer", "writer", "painter", "helper"}
    assert offered["writer"]["description"].startswith("The caller's own tool")
    assert list(offered["painter"]["parameters"]["properties"]) == ["task"]
    assert s.spawned == ["painter"]
    assert s.tool_results()["a"].startswith("Started painter")
    assert outcome.status == "completed"


async def test_independent_tasks_to_one_profile_run_in_parallel(tmp_path: Path) -> None:
    """Three paintings at once: each painter's tool waits until all three are inside it, so the
    session ends only if they really run side by side (before: one after another)."""
    inside = 0
    all_in = anyio.Event()

    @tool(name="paint")
    async def paint(prompt: str) -> str:
        """Paint, together with the others.

        Args:
            prompt: what to paint
        """
        nonlocal inside
        inside += 1
        if inside == 3:
            all_in.set()
        await all_in.wait()  # one after another, the first would wait here until the test fails
        return f"painted {prompt}"

    painter = Profile(
        name="painter",
        description="Paints pictures.",
        system_prompt="[baton:subagent] You paint.",
        tools=(paint,),
        limits=AgentLimits(idle_timeout_s=30.0),
    )
    _, model = scripted(
        [
            Reply(
                calls=[
                    send("painter", "paint a fox", "a"),
                    send("painter", "paint a heron", "b"),
                    send("painter", "paint a cat", "c"),
                ]
            )
        ]
    )
    config = SessionConfig(task="paint a fox, a heron and a cat", profiles=[painter],
                           media_dir=tmp_path, worker_concurrency=4)  # fmt: skip
    with anyio.fail_after(20):
        async with Session(config, model=model) as session:
            result = await session.run()
            log = await logged_events(session.bus, session.id)
    assert result.status == "completed" and all_in.is_set()
    reported = {e.agent: e.content for e in log if isinstance(e, AgentResult)}
    assert reported == {
        "painter": "Done: paint a fox.",
        "painter-2": "Done: paint a heron.",
        "painter-3": "Done: paint a cat.",
    }
