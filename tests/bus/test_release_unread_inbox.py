"""Handing back an inbox that was never read is a no-op, on both backends.

A worker gives back an agent that was stopped before its first read (a session ending while its
in-process worker was still starting the agent; 120 concurrent ``baton serve`` sessions hit it
every time). On Redis such an inbox has no consumer group yet — or no stream at all — and
``XPENDING`` answers ``NOGROUP``: that used to escape ``release_inbox`` and end the host's whole
task group. Nothing was delivered to this consumer, so there is nothing to hand back.
"""

from __future__ import annotations

from baton.bus.messages import Envelope, make_envelope
from baton.bus.redis import RedisBus
from tests.conftest import BusFactory

S = "s-release"


def task(content: str, to: str = "painter") -> Envelope:
    return make_envelope(session=S, sender="lead", recipient=to, type="task", content=content)


async def test_releasing_an_inbox_nobody_ever_wrote_or_read_does_nothing(
    make_bus: BusFactory,
) -> None:
    async with make_bus(lease_s=60) as bus, make_bus(lease_s=60) as heir:
        await bus.inboxes.hand_back(S, "painter")  # no stream, no group: nothing to hand back
        await bus.inboxes.hand_back(S, "painter", consumer="w1/r1")
        assert await heir.inboxes.read(S, "painter") == []
        sent = task("paint a fox")
        await heir.inboxes.send(sent)  # the inbox works as usual afterwards
        assert await heir.inboxes.read(S, "painter") == [sent]


async def test_releasing_a_written_but_unread_inbox_leaves_its_messages(
    make_bus: BusFactory,
) -> None:
    async with make_bus(lease_s=60) as bus, make_bus(lease_s=60) as heir:
        sent = [task("paint a fox"), task("paint a heron")]
        for envelope in sent:
            await bus.inboxes.send(envelope)  # the stream exists, its consumer group not yet
        await bus.inboxes.hand_back(S, "painter")
        assert await heir.inboxes.read(S, "painter") == sent  # nothing lost, nothing leased


async def test_releasing_an_inbox_whose_stream_was_deleted_does_nothing(
    make_bus: BusFactory, backend: str
) -> None:
    """Read (so this bus knows the group), then the stream is gone (deleted, or a server that came
    back empty): the release finds no group, and the next read starts the inbox again."""
    async with make_bus(lease_s=60) as bus, make_bus(lease_s=60) as heir:
        await bus.inboxes.send(task("paint a fox"))
        assert [e.content for e in await bus.inboxes.read(S, "painter")] == ["paint a fox"]
        if backend == "redis":
            assert isinstance(bus, RedisBus)
            await bus._core.one("DEL", bus.keys.inbox(S, "painter"))
        await bus.inboxes.hand_back(S, "painter")
        again = task("paint a pike")
        await bus.inboxes.send(again)
        read = await heir.inboxes.read(S, "painter")
        assert again in read
