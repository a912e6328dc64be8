"""Every way out of the inbox loop ends in exactly one final result carrying the media produced.

Run on both bus backends. The model is the scripted server (offline answers unless scripted).
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from baton.bus.events import AgentExited, AgentProgress, AgentResult, RoundEnded, ToolResulted
from baton.llm.script import HttpError, Reply, Stall
from baton.subagents.state import Checkpoint, FinalReport
from tests.conftest import BusFactory
from tests.subagents.helpers import SESSION, Lead, profile, read_png, seated, task
from tests.support.events import wait_for_event
from tests.support.media import file_path
from tests.support.models import call, scripted


def image(prompt: str, call_id: str = "c1") -> Reply:
    return call("generate_image", call_id, prompt=prompt)


def say(text: str) -> Reply:
    return Reply(text=text)


async def exit_events(bus: object, agent: str) -> tuple[list[AgentResult], list[AgentExited]]:
    results: list[AgentResult] = []
    exits: list[AgentExited] = []
    async for logged in bus.log.tail(SESSION, follow=False):  # type: ignore[attr-defined]
        if isinstance(logged.event, AgentResult) and logged.event.agent == agent:
            results.append(logged.event)
        if isinstance(logged.event, AgentExited) and logged.event.agent == agent:
            exits.append(logged.event)
    return results, exits


async def assert_one_final(bus: object, agent: str, reason: str, media: int) -> str:
    """Exactly one final result at the lead, one result and one exited event; returns content."""
    lead = Lead(bus)  # type: ignore[arg-type]
    await lead.collect()
    finals = lead.results_from(agent)
    assert len(finals) == 1, [m.content for m in finals]
    final = finals[0]
    assert final.meta["final"] is True and final.meta["reason"] == reason
    assert len(final.media_urls) == media, final.media_urls
    for url in final.media_urls:
        width, height, _ = read_png(file_path(url))
        assert (width, height) == (64, 64)
    results, exits = await exit_events(bus, agent)
    assert [e.reason for e in exits] == [reason]
    assert len(results) == 1 and results[0].media_urls == final.media_urls
    assert lead.progress, "the lead got no progress message"
    return final.content


async def test_finished_by_sending_its_result(make_bus: BusFactory, tmp_path: Path) -> None:
    server, model = scripted()  # the offline script: generate_image, then send_message(result)
    async with make_bus() as bus, model:
        await bus.inboxes.send(task("painter", "a red fox"))
        agent = seated(bus, profile("generate_image"), model, "painter", tmp_path)
        assert await agent.run() == "finished"
        content = await assert_one_final(bus, "painter", "finished", media=1)
        assert "Done: a red fox" in content
        assert "[task from lead] a red fox" in server.requests[0].messages[-1]["content"]
        state = await bus.records.agent(SESSION, "painter")
        assert state["status"] == "exited"
        assert Checkpoint.model_validate_json(state["checkpoint"]).step == 1


async def test_finished_by_answering_without_tools(make_bus: BusFactory, tmp_path: Path) -> None:
    _, model = scripted([say("The answer is 42.")])
    async with make_bus() as bus, model:
        await bus.inboxes.send(task("helper", "what is six times seven?"))
        agent = seated(bus, profile(), model, "helper", tmp_path)
        assert await agent.run() == "finished"
        assert await assert_one_final(bus, "helper", "finished", media=0) == "The answer is 42."


async def test_idle_timeout(make_bus: BusFactory, tmp_path: Path) -> None:
    # A round with a tool but no result sent does not finish: the agent waits for more, then idles.
    _, model = scripted([image("a boat"), say("Painted a boat; anything else?")])
    async with make_bus() as bus, model:
        await bus.inboxes.send(task("painter", "paint a boat"))
        agent = seated(
            bus, profile("generate_image", idle_timeout_s=0.3), model, "painter", tmp_path
        )
        assert await agent.run() == "idle"
        content = await assert_one_final(bus, "painter", "idle", media=1)
        assert "No new messages for 0.3 s" in content and "Painted a boat" in content


async def test_shutdown_message(make_bus: BusFactory, tmp_path: Path) -> None:
    _, model = scripted([image("a kite"), say("Painted a kite.")])
    async with make_bus() as bus, model, anyio.create_task_group() as group:
        agent = seated(bus, profile("generate_image"), model, "painter", tmp_path)
        outcome: list[object] = []

        async def run() -> None:
            outcome.append(await agent.run())

        await bus.inboxes.send(task("painter", "paint a kite"))
        group.start_soon(run)
        await wait_for_event(
            bus, SESSION, lambda e: isinstance(e, RoundEnded) and e.round == 2
        )  # the text answer: the round is over, the agent goes back to its inbox
        await bus.inboxes.send(task("painter", "stop", type="shutdown"))
    assert outcome == ["shutdown"]
    async with make_bus() as bus:
        content = await assert_one_final(bus, "painter", "shutdown", media=1)
        assert content.startswith("Shut down on request.")
        assert await bus.inboxes.read(SESSION, "painter") == []  # the shutdown was acked


async def test_max_steps(make_bus: BusFactory, tmp_path: Path) -> None:
    _, model = scripted([image("one"), say("first done"), image("two", "c2"), say("second done")])
    async with make_bus() as bus, model, anyio.create_task_group() as group:
        agent = seated(bus, profile("generate_image", max_steps=2), model, "painter", tmp_path)
        outcome: list[object] = []

        async def run() -> None:
            outcome.append(await agent.run())

        await bus.inboxes.send(task("painter", "paint one"))
        group.start_soon(run)
        await wait_for_event(bus, SESSION, lambda e: isinstance(e, RoundEnded) and e.round == 2)
        await bus.inboxes.send(task("painter", "paint two"))
    assert outcome == ["max_steps"]
    async with make_bus() as bus:
        content = await assert_one_final(bus, "painter", "max_steps", media=2)
        assert "after 2 round(s)" in content and "second done" in content


async def test_model_error(make_bus: BusFactory, tmp_path: Path) -> None:
    _, model = scripted([image("a cat"), HttpError(400, "context too long")], fallback=False)
    async with make_bus() as bus, model:
        await bus.inboxes.send(task("painter", "paint a cat"))
        agent = seated(bus, profile("generate_image"), model, "painter", tmp_path)
        assert await agent.run() == "error"
        content = await assert_one_final(bus, "painter", "error", media=1)
        assert "error" in content and "context too long" in content
        assert await bus.inboxes.read(SESSION, "painter") == []  # acked: it will not run again


@pytest.mark.parametrize("how", ["outside", "cancel()"])
async def test_cancellation(make_bus: BusFactory, tmp_path: Path, how: str) -> None:
    _, model = scripted([image("a dog"), Stall()], fallback=False)
    async with make_bus() as bus, model:
        await bus.inboxes.send(task("painter", "paint a dog"))
        agent = seated(bus, profile("generate_image"), model, "painter", tmp_path)
        outcome: list[object] = []
        async with anyio.create_task_group() as group:

            async def run() -> None:
                outcome.append(await agent.run())

            group.start_soon(run)
            await wait_for_event(bus, SESSION, lambda e: isinstance(e, ToolResulted))
            if how == "outside":
                group.cancel_scope.cancel()
            else:
                agent.cancel()
        assert outcome == ([] if how == "outside" else ["cancelled"])
        content = await assert_one_final(bus, "painter", "cancelled", media=1)
        assert content.startswith("Cancelled before finishing.")


async def test_resume_skips_processed_ids_and_keeps_memory(
    make_bus: BusFactory, tmp_path: Path
) -> None:
    server, model = scripted([say("Second answer.")])
    async with make_bus() as bus, model:
        old, new = task("writer", "old task, already done"), task("writer", "new task")
        memory = [
            {"role": "system", "content": "[baton:subagent] remembered prompt"},
            {"role": "user", "content": "[task from lead] old task, already done"},
            {"role": "assistant", "content": "First answer."},
        ]
        checkpoint = Checkpoint(memory=memory, processed=[old.id], step=1, last_text="First")
        await bus.records.set_agent(SESSION, "writer", {"status": "running",
                                  "checkpoint": checkpoint.model_dump_json()})  # fmt: skip
        await bus.inboxes.send(old)  # re-delivered after a crash: must be skipped
        await bus.inboxes.send(new)
        agent = seated(bus, profile(), model, "writer", tmp_path)
        assert await agent.run() == "finished"
        assert agent.resumed
        sent = server.requests[0].messages
        assert sent[:3] == memory
        assert sent[3]["content"] == "[task from lead] new task"
        assert len(server.requests) == 1
        await assert_one_final(bus, "writer", "finished", media=0)


async def test_decided_report_is_redelivered_with_the_same_id(
    make_bus: BusFactory, tmp_path: Path
) -> None:
    server, model = scripted(fallback=False)
    async with make_bus() as bus, model:
        final = FinalReport(id="final-1", reason="finished", content="done before the crash")
        await bus.records.set_agent(SESSION, "writer", {"status": "finishing", "spawn": "sp1",
                                  "final": final.model_dump_json()})  # fmt: skip
        agent = seated(bus, profile(), model, "writer", tmp_path, spawn_id="sp1")
        assert await agent.run() == "finished"
        assert server.requests == []
        lead = Lead(bus)
        await lead.collect()
        assert [(m.id, m.content) for m in lead.results] == [("final-1", "done before the crash")]
        # Once exited, the same spawn request is not run or reported again.
        again = seated(bus, profile(), model, "writer", tmp_path, spawn_id="sp1")
        assert await again.run() == "finished"
        await lead.collect()
        assert len(lead.results) == 1


async def test_progress_tool_reaches_the_lead(make_bus: BusFactory, tmp_path: Path) -> None:
    _, model = scripted(
        [
            call("send_message", "c1", content="half way", type="progress"),
            call("send_message", "c2", content="all done", type="result"),
        ],
        fallback=False,
    )
    async with make_bus() as bus, model:
        await bus.inboxes.send(task("writer", "write"))
        agent = seated(bus, profile(), model, "writer", tmp_path)
        assert await agent.run() == "finished"
        lead = Lead(bus)
        await lead.collect()
        assert [m.content for m in lead.results] == ["all done"]
        assert [m.content for m in lead.progress] == [
            "round 1: received 1 message: write",
            "half way",
        ]
        progress_events = []
        async for logged in bus.log.tail(SESSION, follow=False):
            if isinstance(logged.event, AgentProgress):
                progress_events.append(logged.event.content)
        assert progress_events == [m.content for m in lead.progress]


async def test_a_reply_cut_twice_after_the_picture_finishes_with_it(
    make_bus: BusFactory, tmp_path: Path
) -> None:
    """The picture was made, then the words about it ran to the length limit twice: the agent
    finishes with the picture (and says why there is no description), not with an error."""
    cut = Reply(text="the fox " * 30, finish_reason="length")
    _, model = scripted([image("a fox"), cut, cut])
    async with make_bus() as bus, model:
        await bus.inboxes.send(task("painter", "paint a fox"))
        agent = seated(bus, profile("generate_image"), model, "painter", tmp_path)
        assert await agent.run() == "finished"
        content = await assert_one_final(bus, "painter", "finished", media=1)
        assert content.startswith("Made 1 media file(s)") and "the fox the fox" not in content


async def test_a_reply_cut_twice_without_media_is_an_error(
    make_bus: BusFactory, tmp_path: Path
) -> None:
    cut = Reply(text="the fox " * 30, finish_reason="length")
    _, model = scripted([cut, cut])
    async with make_bus() as bus, model:
        await bus.inboxes.send(task("writer", "write about a fox"))
        agent = seated(bus, profile(), model, "writer", tmp_path)
        assert await agent.run() == "error"
        content = await assert_one_final(bus, "writer", "error", media=0)
        assert "cut at the length limit twice" in content
