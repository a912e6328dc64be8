"""A ``shutdown`` reaches a sub-agent busy in a tool, on both backends, in one process.

Before, an agent read its inbox only between rounds: a session that ended left its sub-agents
running their tools to the end (reason ``finished``, events logged after ``session.finished``, the
``shutdown`` left unread). Now the tool sees an ordinary cancellation at once, the agent leaves
with ``shutdown``, and its inbox is left empty. The same through a whole ``Session`` cancelled by
the embedding API; the remote case (``baton worker`` processes, ``baton run`` interrupted) is in
``tests/cli/test_cancel_remote.py``.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import anyio

from baton.api import Session, SessionConfig
from baton.bus.base import Bus
from baton.bus.errors import BusUnreachable
from baton.bus.events import (
    AgentExited,
    Event,
    RoundEnded,
    SessionFinished,
    ToolCalled,
)
from baton.bus.inbox import InboxReader
from baton.bus.interrupt import RoundWatch
from baton.bus.memory import MemoryBus
from baton.bus.messages import Envelope
from baton.bus.redis import RedisBus
from baton.engine import Tool, ToolRun
from baton.llm.script import Reply
from baton.subagents.profiles import Profile
from tests.conftest import BusFactory
from tests.subagents.helpers import SESSION, Lead, profile, seated, task
from tests.support.events import logged_events, wait_for_event
from tests.support.models import call, scripted

INTERRUPT_S = 2.0
"""The promise: a cancel interrupts a running tool within this."""


class Stall:
    """An async tool that would work for 30 s; it says when it started and when it was
    cancelled."""

    def __init__(self) -> None:
        self.started = anyio.Event()
        self.cancelled = anyio.Event()
        self.finished = False

    def tool(self) -> Tool:
        async def stall(text: str) -> str:
            """Work on a text for a long time.

            Args:
                text: what to work on
            """
            self.started.set()
            try:
                await anyio.sleep(30)
            except anyio.get_cancelled_exc_class():
                self.cancelled.set()
                raise
            self.finished = True
            return f"stalled on {text!r}"

        return Tool(stall, run=ToolRun(timeout_s=300))


async def unread(bus: Bus, session: str, agent: str) -> int:
    """Entries still in an inbox: an acked entry leaves the stream at once (docs/bus.md)."""
    if isinstance(bus, RedisBus):
        return int(await bus._core.one("XLEN", bus.keys.inbox(session, agent)))
    assert isinstance(bus, MemoryBus)
    stream = bus._broker.inboxes.get((session, agent))
    return 0 if stream is None else len(stream.entries)


async def test_a_shutdown_interrupts_a_running_tool(make_bus: BusFactory, tmp_path: Path) -> None:
    stall = Stall()
    _, model = scripted([call("stall", text="the sea")])
    async with make_bus(lease_s=60) as bus, make_bus(lease_s=60) as lead_bus, model:
        await lead_bus.inboxes.send(task("worker", "ponder the sea"))
        agent = seated(bus, profile(stall.tool()), model, "worker", tmp_path)
        reasons: list[str | None] = []
        async with anyio.create_task_group() as group:

            async def run() -> None:
                reasons.append(await agent.run())

            group.start_soon(run)
            with anyio.fail_after(20):
                await stall.started.wait()
            await lead_bus.inboxes.send(task("worker", "the session is ending", type="shutdown"))
            sent = anyio.current_time()
            with anyio.fail_after(INTERRUPT_S):
                await stall.cancelled.wait()
        assert anyio.current_time() - sent < INTERRUPT_S
        assert reasons == ["shutdown"] and not stall.finished
        lead = Lead(lead_bus)
        await lead.collect()
        (final,) = lead.results_from("worker")
        assert final.meta["reason"] == "shutdown"
        log = await logged_events(bus, SESSION)
        exits = [e.reason for e in log if isinstance(e, AgentExited)]
        assert exits == ["shutdown"]
        # the interrupted call is answered as cancelled, for observers and in the memory
        ended = [e for e in log if isinstance(e, RoundEnded) and e.results]
        assert ended and ended[-1].results[0].synthetic
        assert agent.state.memory[-1]["role"] == "tool"
        assert await unread(bus, SESSION, "worker") == 0  # the shutdown was read and acked


async def test_a_shutdown_abandons_a_sync_tool_running_in_a_thread(
    make_bus: BusFactory, tmp_path: Path
) -> None:
    started, release = threading.Event(), threading.Event()
    returned: list[str] = []

    def grind(text: str) -> str:
        """Grind a text in a thread for a long time.

        Args:
            text: what to grind
        """
        started.set()
        release.wait(30)
        returned.append(text)
        return f"ground {text!r}"

    _, model = scripted([call("grind", text="the sky")])
    async with make_bus(lease_s=60) as bus, make_bus(lease_s=60) as lead_bus, model:
        await lead_bus.inboxes.send(task("worker", "grind the sky"))
        agent = seated(
            bus, profile(Tool(grind, run=ToolRun(timeout_s=300))), model, "worker", tmp_path
        )
        try:
            async with anyio.create_task_group() as group:
                group.start_soon(agent.run)
                with anyio.fail_after(20):
                    await anyio.to_thread.run_sync(started.wait, 20)
                await lead_bus.inboxes.send(
                    task("worker", "the session is ending", type="shutdown")
                )
                with anyio.fail_after(INTERRUPT_S):
                    await wait_for_event(bus, SESSION, AgentExited)
        finally:
            release.set()  # the abandoned thread ends; what it returns goes nowhere
        assert agent.reason == "shutdown"
        log = await logged_events(bus, SESSION)
        results = [r.content for e in log if isinstance(e, RoundEnded) for r in e.results]
        assert not any("ground" in content for content in results), results
        assert "ground" not in str(agent.state.memory)


async def test_the_round_watch_keeps_what_it_reads_and_stops_at_a_shutdown(
    make_bus: BusFactory,
) -> None:
    async with make_bus(lease_s=60) as bus, make_bus(lease_s=60) as lead_bus:
        inbox = InboxReader(bus, SESSION, "worker")
        assert await inbox.read() == []  # as the round's batch was read: marks the wake-ups
        watch, stopped = RoundWatch(inbox), anyio.Event()
        follow_up = task("worker", "and the sky", type="message")
        shutdown = task("worker", "the session is ending", type="shutdown")
        with anyio.fail_after(10):
            async with anyio.create_task_group() as group:
                group.start_soon(watch.watch, stopped.set)
                await lead_bus.inboxes.send(follow_up)
                await lead_bus.inboxes.send(shutdown)
                await stopped.wait()
        assert watch.shutdown and watch.ahead == [follow_up, shutdown]
        assert list(inbox.pending) == [follow_up.id, shutdown.id]  # read, not acked

        quiet = RoundWatch(inbox)
        with anyio.fail_after(10):
            async with anyio.create_task_group() as group:
                group.start_soon(quiet.watch, stopped.set)
                await anyio.lowlevel.checkpoint()
                quiet.end()  # the round is over: the watch ends without reading
        assert not quiet.shutdown and quiet.ahead == []


async def test_a_message_sent_mid_round_is_the_next_round(
    make_bus: BusFactory, tmp_path: Path
) -> None:
    """What is not a shutdown does not stop the round, and runs in the next one (not acked
    early, not lost)."""
    started, gate = anyio.Event(), anyio.Event()

    async def wait_gate(text: str) -> str:
        """Wait until the test lets go.

        Args:
            text: what to wait on
        """
        started.set()
        await gate.wait()
        return f"waited on {text!r}"

    _, model = scripted(
        [call("wait_gate", text="a"), Reply(text="first done"), Reply(text="second done")]
    )
    async with make_bus(lease_s=60) as bus, make_bus(lease_s=60) as lead_bus, model:
        await lead_bus.inboxes.send(task("worker", "first"))
        agent = seated(bus, profile(Tool(wait_gate), max_steps=2), model, "worker", tmp_path)
        follow_up = task("worker", "second", type="message")
        read = read_by(bus, follow_up)
        with anyio.fail_after(20):
            async with anyio.create_task_group() as group:
                group.start_soon(agent.run)
                await started.wait()
                await lead_bus.inboxes.send(follow_up)
                await read.wait()  # by the round's watch, not by the next round's read
                assert follow_up.id in agent.inbox.pending
                gate.set()
        assert agent.reason == "finished"  # round 2 answered without tools
        assert follow_up.id in agent.state.processed
        memory = str(agent.state.memory)
        assert memory.index("[task from lead] first") < memory.index("[message from lead] second")
        assert await unread(bus, SESSION, "worker") == 0


def read_by(bus: Bus, envelope: Envelope) -> anyio.Event:
    """An event set once a read on ``bus`` hands ``envelope`` out: while a round runs, only its
    watch reads the inbox."""
    read, original = anyio.Event(), bus.inboxes.read

    async def reading(*args: Any, **kwargs: Any) -> list[Envelope]:
        batch = await original(*args, **kwargs)
        if any(e.id == envelope.id for e in batch):
            read.set()
        return batch

    bus.inboxes.read = reading  # type: ignore[method-assign]
    return read


async def test_a_message_read_mid_round_runs_even_if_the_next_read_fails(
    make_bus: BusFactory, tmp_path: Path
) -> None:
    """What the round's watch read is the next round at once: a bus that fails every read
    after it used to keep the agent waiting to its idle timeout, and then it left ``idle`` and
    acked the message unprocessed."""
    started, gate = anyio.Event(), anyio.Event()

    async def wait_gate(text: str) -> str:
        """Wait until the test lets go.

        Args:
            text: what to wait on
        """
        started.set()
        await gate.wait()
        return f"waited on {text!r}"

    _, model = scripted(
        [call("wait_gate", text="a"), Reply(text="first done"), Reply(text="second done")]
    )
    async with make_bus(lease_s=60) as bus, make_bus(lease_s=60) as lead_bus, model:
        await lead_bus.inboxes.send(task("worker", "first"))
        agent = seated(
            bus,
            profile(Tool(wait_gate), max_steps=2, idle_timeout_s=1.0),
            model,
            "worker",
            tmp_path,
        )
        follow_up = task("worker", "second", type="message")
        read, failed_reads = read_by(bus, follow_up), 0
        read_inbox = bus.inboxes.read

        async def unreachable(*args: Any, **kwargs: Any) -> list[Envelope]:
            nonlocal failed_reads
            failed_reads += 1
            raise BusUnreachable(bus.url, "reads cut off by the test")

        with anyio.fail_after(20):
            async with anyio.create_task_group() as group:
                group.start_soon(agent.run)
                await started.wait()
                await lead_bus.inboxes.send(follow_up)
                await read.wait()
                assert follow_up.id in agent.inbox.pending
                bus.inboxes.read = unreachable  # type: ignore[method-assign]
                gate.set()
        bus.inboxes.read = read_inbox  # type: ignore[method-assign]
        assert agent.reason == "finished", agent.reason  # not "idle"
        assert follow_up.id in agent.state.processed
        assert "[message from lead] second" in str(agent.state.memory)
        assert failed_reads == 0  # the batch was there: nothing was read for it


def sleeper(tool: Tool) -> Profile:
    return Profile(
        name="sleeper",
        description="Works on a task for a long time.",
        system_prompt="[baton:subagent] Work on the task with stall.",
        tools=(tool,),
    )


async def test_cancelling_a_session_stops_its_busy_sub_agent_and_leaves_nothing(
    make_bus: BusFactory, tmp_path: Path
) -> None:
    """The embedding API's cancel on a session whose in-process worker hosts a busy agent."""
    stall = Stall()
    profiles = {"sleeper": sleeper(stall.tool())}
    config = SessionConfig(task="stall on the sea", media_dir=tmp_path, profiles=profiles)
    async with make_bus(lease_s=60) as bus:
        async with Session(config, bus=bus) as session:
            stream = session.events()
            seen: list[Event] = []
            with anyio.fail_after(30):
                async for event in stream:
                    seen.append(event)
                    if isinstance(event, ToolCalled) and event.agent == "sleeper":
                        break
                await stall.started.wait()
            session.cancel()
            cancelled = anyio.current_time()
            with anyio.fail_after(INTERRUPT_S):
                await stall.cancelled.wait()
            assert anyio.current_time() - cancelled < INTERRUPT_S
            with anyio.fail_after(10):
                result = await session.run()
                async for event in stream:
                    seen.append(event)
        assert result.status == "cancelled" and not stall.finished
        log = await logged_events(bus, session.id)
        assert isinstance(log[-1], SessionFinished)  # nothing after it, from anyone
        exits = {e.agent: e.reason for e in log if isinstance(e, AgentExited)}
        assert exits == {"sleeper": "shutdown"}
        assert isinstance(seen[-1], SessionFinished)
        assert [e.agent for e in seen if isinstance(e, AgentExited)] == ["sleeper"]
        for agent in ("sleeper", "lead"):  # the shutdown and the result were both read
            assert await unread(bus, session.id, agent) == 0, agent
