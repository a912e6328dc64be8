"""The lead's checkpoint and its lease, on the in-memory bus: what is written when, what a
restored lead does with it, and who may take a session's lead (``baton.lead.checkpoint``,
``baton.lead.keeper``). Killed processes and Redis: ``tests/cli/test_resume.py``."""

from __future__ import annotations

import json
from functools import partial
from typing import Any

import anyio
import pytest

from baton.api import Session, SessionConfig
from baton.bus.base import Bus
from baton.bus.connect import open_bus
from baton.bus.errors import ConfigError
from baton.bus.events import AgentSpawned, Event, SessionFinished, ToolResulted
from baton.bus.messages import SpawnRequest, make_envelope
from baton.bus.payloads import ResultReport
from baton.lead.agent import Lead, LeadOutcome
from baton.lead.checkpoint import LeadCheckpoint, Progress, roster_state
from baton.lead.keeper import LeadKeeper, LeadTakenOver, ResumeRefused, SessionExists
from baton.lead.roster import Roster, Sent
from baton.llm.script import Call, Reply
from baton.session import open_session
from baton.session.setup import setup_of
from tests.lead.scenario import PROFILES, SESSION, Scenario, claimed, make_lead, run_lead
from tests.support.models import scripted

FOX = "https://cdn.example/fox.png"


def send(to: str, content: str, call_id: str) -> Reply:
    args = json.dumps({"to": to, "content": content, "type": "task"})
    return Reply(calls=[Call("send_message", args, id=call_id)])


class Recorder:
    """A checkpoint sink keeping a copy of each checkpoint, as the bus would store it."""

    def __init__(self) -> None:
        self.saved: list[tuple[LeadCheckpoint, list[Any] | None]] = []

    async def save(self, checkpoint: LeadCheckpoint, history: list[Any] | None) -> None:
        copy = LeadCheckpoint.model_validate_json(checkpoint.model_dump_json())
        self.saved.append((copy, None if history is None else json.loads(json.dumps(history))))

    async def close(self) -> bool:
        return True

    def stored(self) -> tuple[list[Any], LeadCheckpoint]:
        """What the lead's record would hold now: the last step's history, the last state."""
        history = next(h for _, h in reversed(self.saved) if h is not None)
        return history, self.saved[-1][0]


async def result(bus: Bus, sender: str, content: str, media: list[str], reply_to: str) -> str:
    envelope = make_envelope(
        session=SESSION, sender=sender, recipient="lead", type="result", content=content,
        media_urls=media, reply_to=reply_to, meta=ResultReport(reason="finished").to_meta(),
    )  # fmt: skip
    await claimed(bus, sender)
    return await bus.inboxes.send(envelope)


async def test_each_step_and_each_send_is_checkpointed_a_spawn_before_it_is_logged() -> None:
    recorder = Recorder()
    at_spawn: list[tuple[LeadCheckpoint, list[Any] | None]] = []

    async def react(s: Scenario, event: Event) -> None:
        if isinstance(event, AgentSpawned):
            at_spawn.append(recorder.saved[-1])
        if isinstance(event, ToolResulted) and event.result.call_id == "c1":
            await s.report("painter", "a fox", media=[FOX])

    _, outcome = await run_lead(
        [send("painter", "paint a fox", "c1"), Reply(text="On it."), Reply(text=f"Here: {FOX}")],
        react,
        checkpoints=recorder,
    )
    assert (outcome.status, outcome.answer) == ("completed", f"Here: {FOX}")
    first, history = recorder.saved[0]
    assert history is not None and history[-1] == {"role": "user", "content": "paint a fox"}
    assert (first.progress.phase, first.agents) == ("turn", [])
    ((spawned, no_history),) = at_spawn  # written before agent.spawned was logged
    assert no_history is None and spawned.mid_turn
    assert [(a.name, a.state) for a in spawned.agents] == [("painter", "running")]
    assert [(t.to, t.content) for t in spawned.turn_sends] == [("painter", "paint a fox")]
    after_turn = next(
        c for c, h in recorder.saved if h is not None and c.progress.phase == "gather"
    )
    assert after_turn.progress.last.reply == "On it." and not after_turn.turn_sends
    history, last = recorder.stored()
    (painter,) = last.agents
    assert painter.state == "done" and painter.media_urls == [FOX]
    assert painter.noted and painter.noted[0] in last.taken  # taken in, then acked
    assert any("[result from painter] a fox" in str(m.get("content")) for m in history)


async def test_a_lead_restored_mid_turn_waits_for_what_it_sent_and_does_not_send_it_again() -> None:
    """The first lead dies right after its spawn (abandoned: it touches nothing more); the
    painter reports while no lead runs; the restored lead answers with it, delegating nothing."""
    recorder = Recorder()
    async with open_bus() as bus:
        server, model = scripted([send("painter", "paint a fox", "c1")], fallback=False)
        first: list[Lead] = []

        async def die(event: Event) -> None:
            if isinstance(event, AgentSpawned):
                first[0].abandon(LeadTakenOver(SESSION, "the test"))

        first.append(make_lead(bus, model, session=SESSION, profiles=PROFILES, events=die,
                          checkpoints=recorder))  # fmt: skip
        with pytest.raises(LeadTakenOver), anyio.fail_after(20):
            await first[0].run("paint a fox")
        history, checkpoint = recorder.stored()
        assert checkpoint.mid_turn and len(history) == 2  # the system prompt and the task
        (task,) = [e for e in await bus.inboxes.read(SESSION, "painter") if e.type == "task"]
        await result(bus, "painter", "a fox", [FOX], task.id)

        events: list[Event] = []
        server, model = scripted([Reply(text=f"Here: {FOX}")], fallback=False)
        lead = make_lead(bus, model, session=SESSION, profiles=PROFILES, events=_append(events))
        lead.restore(history, checkpoint)
        with anyio.fail_after(20):
            outcome = await lead.run(None)
    assert (outcome.status, outcome.answer) == ("completed", f"Here: {FOX}")
    assert outcome.media_urls == [FOX] and not any(isinstance(e, AgentSpawned) for e in events)
    (request,) = server.requests  # one turn: the answer
    assistant, tool, news = request.messages[2:]
    (call,) = assistant["tool_calls"]
    assert json.loads(call["function"]["arguments"])["to"] == "painter"
    assert tool["content"].startswith("Started painter") and "a fox" in news["content"]


def _append(events: list[Event]) -> Any:
    async def sink(event: Event) -> None:
        events.append(event)

    return sink


def test_a_result_delivered_twice_counts_once() -> None:
    roster = Roster(PROFILES)
    roster.started("painter", "painter")
    envelope = make_envelope(
        session=SESSION, sender="painter", recipient="lead", type="result", content="a fox",
        media_urls=[FOX], meta=ResultReport(reason="finished").to_meta(),
    )  # fmt: skip
    roster.on_report(envelope)
    roster.on_report(envelope)  # a resumed lead reads what its predecessor read and left un-acked
    assert roster.agents["painter"].results == ["a fox"] and roster.media_urls == [FOX]


async def test_one_lead_per_session_a_dead_one_is_taken_over_a_live_one_is_not() -> None:
    async with open_bus() as bus:
        first = LeadKeeper(bus, "s", holder="first", lease_s=0.3)
        await first.claim()
        await first.begin('{"config": {}}')
        with pytest.raises(SessionExists, match="is running: its lead \\(first\\)"):
            await LeadKeeper(bus, "s", holder="second").claim()
        async with anyio.create_task_group() as group:
            await group.start(partial(first.keep, on_lost=print))
            with pytest.raises(ResumeRefused, match="its lead is alive"), anyio.fail_after(5):
                await LeadKeeper(bus, "s", holder="second", lease_s=0.3).take_over()
            first.stop_renewing()  # the first lead "dies": no more renewals
        successor = LeadKeeper(bus, "s", holder="third", lease_s=0.3)
        with anyio.fail_after(5):
            record = await successor.take_over()  # once the lease has lapsed
        assert record.status == "running" and record.history is None
        with pytest.raises(LeadTakenOver, match="another lead \\(third\\)"):
            await first.save(LeadCheckpoint(), [])  # fenced out: it writes nothing
        await successor.ended()
        with pytest.raises(ResumeRefused, match="finished: nothing to resume"):
            await LeadKeeper(bus, "s").take_over()


async def test_a_decided_outcome_is_logged_once_by_the_resume() -> None:
    """A lead that recorded its outcome and died before logging it: the resume logs that same
    outcome, runs nothing, and a second resume is refused."""
    config = SessionConfig(task="paint a fox", session_id="s-decided")
    decided = LeadOutcome("completed", f"A fox: {FOX}", [FOX])
    async with open_bus() as bus:
        dead = LeadKeeper(bus, "s-decided", holder="dead")
        await dead.claim()
        await dead.begin(setup_of(config, ["painter"], "baton-offline"))
        await dead.decided(decided)
        await bus.records.hold_lead("s-decided", "dead", 0)  # as if its lease had lapsed
        async with Session.resume("s-decided", bus=bus) as session:
            outcome = await session.run()
        assert (outcome.status, outcome.answer, outcome.media_urls) == (
            "completed", decided.answer, [FOX],
        )  # fmt: skip
        logged = [e.event async for e in bus.log.tail("s-decided", follow=False)]
        assert [type(e).__name__ for e in logged] == ["SessionStarted", "SessionFinished"]
        assert isinstance(logged[-1], SessionFinished) and logged[-1].answer == decided.answer
        with pytest.raises(ResumeRefused, match="finished"):
            async with Session.resume("s-decided", bus=bus):
                pass
        # one that died after logging its end, before its record said so: refused as well
        await dead.begin(setup_of(config, ["painter"], "baton-offline"))  # dead holds it again
        await dead.decided(decided)
        await bus.records.hold_lead("s-decided", "dead", 0)
        with pytest.raises(ResumeRefused, match="finished: nothing to resume"):
            async with Session.resume("s-decided", bus=bus):
                pass
        assert (await bus.records.lead("s-decided"))["status"] == "finished"


async def test_a_resumed_session_follows_the_dead_leads_unclaimed_spawn_requests() -> None:
    """The dead lead had asked a pool no worker serves: the resumed session's spawn watch follows
    that request too (its receipt is in the checkpoint), and ends the agent with the reason,
    long before the session's timeout."""
    config = SessionConfig(
        task="paint a fox",
        session_id="s-orphan",
        local_workers=False,
        pool="nobody",
        unclaimed_s=0.2,
        timeout_s=300,
    )
    request = SpawnRequest(session="s-orphan", agent="painter", profile="painter", pool="nobody")
    async with open_bus() as bus:
        dead = LeadKeeper(bus, "s-orphan", holder="dead")
        await dead.claim()
        await dead.begin(setup_of(config, ["painter"], "baton-offline"))
        roster = Roster({"painter": "Paints."})
        record = roster.started("painter", "painter")
        record.spawn_id, record.spawn_receipt = request.id, await bus.spawns.submit(request)
        roster.sent("painter", Sent("e1", "task", "paint a fox"))
        agents, successors = roster_state(roster)
        waiting = Progress(phase="gather", request="paint a fox")
        checkpoint = LeadCheckpoint(agents=agents, successors=successors, progress=waiting)
        await dead.save(checkpoint, [{"role": "user", "content": "paint a fox"}])
        await bus.records.hold_lead("s-orphan", "dead", 0)  # as if its lease had lapsed
        with anyio.fail_after(30):
            async with Session.resume("s-orphan", bus=bus) as session:
                result = await session.run()
    assert result.status != "completed"
    assert "no worker of pool 'nobody' serves profile 'painter'" in result.error


async def test_resume_settings_are_checked() -> None:
    with pytest.raises(ConfigError, match="task: a new session needs a task"):
        open_session("")
    with pytest.raises(ConfigError, match="resume=True needs the id of the session"):
        open_session("paint a fox", resume=True)
    with pytest.raises(ResumeRefused, match="memory:// bus"):
        async with Session.resume("s-any"):
            pass
    async with open_bus() as bus:
        config = SessionConfig(task="paint a fox", session_id="s-fixed", local_workers=False)
        keeper = LeadKeeper(bus, "s-fixed", holder="dead")
        await keeper.claim()
        await keeper.begin(setup_of(config, ["painter"], "baton-offline"))
        await bus.records.hold_lead("s-fixed", "dead", 0)
        with pytest.raises(ConfigError, match="ran with local_workers=False; a resume cannot"):
            async with Session.resume("s-fixed", bus=bus, local_workers=True):
                pass
        with pytest.raises(ResumeRefused, match="offered the profiles painter, which the given"):
            async with Session.resume("s-fixed", bus=bus, profiles={}):
                pass
