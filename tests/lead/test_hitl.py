"""Approvals over the bus: a sub-agent's engine asks, another 'process' answers by call id."""

from __future__ import annotations

import anyio
import pytest

from baton.bus.events import ApprovalDecided, ApprovalRequested, ErrorEvent, Event, ToolCallInfo
from baton.bus.messages import Envelope
from baton.engine import AgentLoop, ApprovalQuestion, InteractionCancelled, LoopLimits
from baton.engine.bus_channel import (
    ApprovalNotFound,
    BusInteractionChannel,
    answer_approval,
    approvals_inbox,
)
from baton.engine.loop_options import LoopOptions, LoopParts
from baton.llm.script import Reply
from tests.conftest import BusFactory
from tests.lead.helpers import gated_tool
from tests.support.events import logged_events, wait_for_event
from tests.support.models import call, scripted

SESSION = "s-hitl"


@pytest.mark.parametrize("approved", [True, False])
async def test_subagent_approval_answered_from_another_process(
    make_bus: BusFactory, approved: bool
) -> None:
    _, model = scripted([call("deploy", call_id="d7", target="prod"), Reply(text="ok")])
    async with make_bus() as worker_bus, make_bus() as cli_bus:

        async def emit(event: Event) -> None:
            await worker_bus.log.emit(event)

        loop = AgentLoop(
            model,
            [gated_tool()],
            session=SESSION,
            agent="painter",
            options=LoopOptions(limits=LoopLimits(approval_timeout_s=30)),
            parts=LoopParts(
                channel=BusInteractionChannel(worker_bus, SESSION, "painter"), events=emit
            ),
        )
        history = [{"role": "user", "content": "deploy"}]
        async with anyio.create_task_group() as group:
            group.start_soon(loop.run_turn, history)  # type: ignore[arg-type]
            asked = await wait_for_event(cli_bus, SESSION, ApprovalRequested)
            assert asked.agent == "painter" and [c.call_id for c in asked.calls] == ["d7"]
            who = await answer_approval(cli_bus, SESSION, "d7", approved, reason="by ops")
            assert who == "painter"
        log = await logged_events(cli_bus, SESSION)
        with pytest.raises(ApprovalNotFound, match="already decided"):
            await answer_approval(cli_bus, SESSION, "d7", True)
        with pytest.raises(ApprovalNotFound, match="no approval was requested"):
            await answer_approval(cli_bus, SESSION, "nope", True)
    tool_answer = history[-2]
    assert tool_answer["role"] == "tool"
    assert ("deployed to prod" in str(tool_answer["content"])) is approved
    decided = [e for e in log if isinstance(e, ApprovalDecided)]
    assert [(e.agent, e.call_id, e.approved, e.reason) for e in decided] == [
        ("painter", "d7", approved, "by ops")
    ]


def _question(*call_ids: str) -> ApprovalQuestion:
    calls = tuple(ToolCallInfo(call_id=c, name="deploy", arguments="{}") for c in call_ids)
    return ApprovalQuestion(id="q1", session=SESSION, agent="painter", calls=calls)


def _answer(call_id: str, approved: bool) -> Envelope:
    return Envelope(
        session=SESSION,
        sender="user",
        recipient=approvals_inbox("painter"),
        type="approval",
        meta={"call_id": call_id, "approved": approved, "reason": ""},
    )


async def test_channel_waits_for_every_call_and_drops_stale_answers(
    make_bus: BusFactory,
) -> None:
    async with make_bus() as bus:
        channel = BusInteractionChannel(bus, SESSION, "painter", emit_events=True)
        await bus.inboxes.send(
            _answer("old", True)
        )  # an answer to a question that timed out earlier
        await bus.inboxes.send(_answer("a", True))
        decisions: dict[str, bool] = {}

        async def ask() -> None:
            answered = await channel.ask_approval(_question("a", "b"))
            decisions.update({k: v.approved for k, v in answered.items()})

        async with anyio.create_task_group() as group:
            group.start_soon(ask)
            await wait_for_event(bus, SESSION, ApprovalRequested)
            assert not decisions  # "b" is still open
            await bus.inboxes.send(_answer("b", False))
        assert decisions == {"a": True, "b": False}
        assert await bus.inboxes.read(SESSION, approvals_inbox("painter")) == []
        log = await logged_events(bus, SESSION)
    assert [(e.call_id, e.approved) for e in log if isinstance(e, ApprovalDecided)] == [
        ("a", True),
        ("b", False),
    ]


async def test_a_malformed_answer_is_dead_lettered_and_decides_nothing(
    make_bus: BusFactory,
) -> None:
    async with make_bus() as bus:
        channel = BusInteractionChannel(bus, SESSION, "painter", emit_events=True)
        hostile = Envelope(
            session=SESSION,
            sender="user",
            recipient=approvals_inbox("painter"),
            type="approval",
            meta={"call_id": "a", "approved": "yes"},  # not a boolean: not an approval
        )
        await bus.inboxes.send(hostile)
        decisions: dict[str, bool] = {}

        async def ask() -> None:
            answered = await channel.ask_approval(_question("a"))
            decisions.update({k: v.approved for k, v in answered.items()})

        async with anyio.create_task_group() as group:
            group.start_soon(ask)
            error = await wait_for_event(bus, SESSION, ErrorEvent)
            assert "approved: Input should be a valid boolean" in error.message
            assert not decisions  # still waiting for a real answer
            await bus.inboxes.send(_answer("a", False))
        assert decisions == {"a": False}
        [letter] = await bus.letters.recent()
        assert Envelope.model_validate_json(letter.raw).id == hostile.id
        assert await bus.inboxes.read(SESSION, approvals_inbox("painter")) == []


async def test_cancel_pending_releases_the_wait(make_bus: BusFactory) -> None:
    async with make_bus() as bus:
        channel = BusInteractionChannel(bus, SESSION, "painter", emit_events=True)
        failures: list[BaseException] = []

        async def ask() -> None:
            try:
                await channel.ask_approval(_question("a"))
            except InteractionCancelled as exc:
                failures.append(exc)

        with anyio.fail_after(10):
            async with anyio.create_task_group() as group:
                group.start_soon(ask)
                await wait_for_event(bus, SESSION, ApprovalRequested)
                channel.cancel_pending()
    assert len(failures) == 1 and "q1" in str(failures[0])
