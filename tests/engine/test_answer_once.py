"""One answer per question, on both buses: of two people answering at once exactly one is
heard (the log learns of an answer only once the asking agent reads it, so the claim is what
decides), and a claim whose answer could not be stored is handed back. And the asking side
takes a ``file:`` answer only for a file of its own media directory, on its own disk."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import anyio
import pytest

from baton.bus.base import Bus
from baton.bus.events import ApprovalRequested, QuestionAsked, ToolCallInfo, utc_now
from baton.bus.messages import Envelope
from baton.bus.payloads import QuestionReply
from baton.engine.bus_channel import (
    ANSWER_TYPE,
    ApprovalNotFound,
    BusInteractionChannel,
    UnusableAnswer,
    answer_approval,
    approvals_inbox,
)
from baton.engine.interaction import UploadQuestion
from baton.engine.questions import (
    Cancelled,
    Provided,
    QuestionNotFound,
    answer_question,
    store_upload,
)
from baton.media import DirectoryStore, MediaError
from tests.conftest import BusFactory

S = "s-once"


async def _ask(bus: Bus, kind: str = "upload") -> None:
    await bus.log.emit(
        QuestionAsked(session=S, agent="reviewer", question_id="q1", call_id="c1", kind=kind,
                      expires_at=utc_now() + timedelta(minutes=3))
    )  # fmt: skip


async def _inbox(bus: Bus, agent: str = "reviewer") -> int:
    return len(await bus.inboxes.read(S, approvals_inbox(agent)))


async def test_of_two_answers_at_once_one_is_sent(make_bus: BusFactory) -> None:
    async with make_bus() as bus:
        await _ask(bus)
        heard: list[str] = []
        refused: list[str] = []

        async def answer(reply: Provided | Cancelled) -> None:
            try:
                heard.append(await answer_question(bus, S, "q1", reply))
            except QuestionNotFound as exc:
                assert exc.why == "answered"
                refused.append(str(exc))

        async with anyio.create_task_group() as group:
            group.start_soon(answer, Provided(url="https://example.com/a.txt"))
            group.start_soon(answer, Cancelled(reason="no"))
        assert (len(heard), len(refused)) == (1, 1)
        assert await _inbox(bus) == 1  # one envelope reached the agent
        with pytest.raises(QuestionNotFound, match="already answered"):
            await answer_question(bus, S, "q1", Cancelled())


async def test_two_uploads_at_once_store_one_file(make_bus: BusFactory, tmp_path: Path) -> None:
    async with make_bus() as bus:
        await _ask(bus)
        store = DirectoryStore(tmp_path / "media")

        async def upload(name: str) -> None:
            try:
                await store_upload(store, bus, S, "q1", data=b"notes", filename=name)
            except QuestionNotFound:
                pass

        async with anyio.create_task_group() as group:
            group.start_soon(upload, "a.txt")
            group.start_soon(upload, "b.txt")
        assert len(list((tmp_path / "media").rglob("*upload*"))) == 1
        assert await _inbox(bus) == 1


async def test_a_store_that_fails_leaves_the_question_open(
    make_bus: BusFactory, tmp_path: Path
) -> None:
    class Full:
        async def put(self, data: bytes, name: str, content_type: str) -> str:
            raise MediaError("the disk is full")

    async with make_bus() as bus:
        await _ask(bus)
        with pytest.raises(MediaError, match="full"):
            await store_upload(Full(), bus, S, "q1", data=b"x", filename="n.txt")
        assert await _inbox(bus) == 0
        store = DirectoryStore(tmp_path)
        _, url = await store_upload(store, bus, S, "q1", data=b"x", filename="n.txt")
        assert url.startswith("file://") and await _inbox(bus) == 1


async def test_an_approval_is_decided_once_even_when_two_answer_at_once(
    make_bus: BusFactory,
) -> None:
    async with make_bus() as bus:
        call = ToolCallInfo(call_id="p1", name="publish", arguments="{}")
        await bus.log.emit(ApprovalRequested(session=S, agent="publisher", calls=[call]))
        outcomes: list[bool] = []

        async def decide(approved: bool) -> None:
            try:
                await answer_approval(bus, S, "p1", approved)
                outcomes.append(approved)
            except ApprovalNotFound as exc:
                assert exc.decided

        async with anyio.create_task_group() as group:
            group.start_soon(decide, True)
            group.start_soon(decide, False)
        assert len(outcomes) == 1 and await _inbox(bus, "publisher") == 1
        # Asked again later (a new request, the same call id): answerable again, once.
        await bus.log.emit(ApprovalRequested(session=S, agent="publisher", calls=[call]))
        await answer_approval(bus, S, "p1", True)
        with pytest.raises(ApprovalNotFound, match="already decided"):
            await answer_approval(bus, S, "p1", True)


async def test_an_approval_the_policy_answers_takes_no_answer(make_bus: BusFactory) -> None:
    """Under ``auto`` or ``deny`` the agent's policy decides as it asks: an answer sent between
    the request and its decision is refused, and nothing lands in the agent's inbox."""
    async with make_bus() as bus:
        call = ToolCallInfo(call_id="p1", name="publish", arguments="{}")
        await bus.log.emit(
            ApprovalRequested(session=S, agent="publisher", calls=[call], policy="auto")
        )
        with pytest.raises(ApprovalNotFound, match="already decided"):
            await answer_approval(bus, S, "p1", True)
        assert await _inbox(bus, "publisher") == 0


@pytest.mark.parametrize(
    ("where", "taken"),
    [("inside", True), ("outside", False), ("missing", False), ("no-root", False)],
)
async def test_the_asking_agent_takes_a_file_only_from_its_own_media_directory(
    make_bus: BusFactory, tmp_path: Path, where: str, taken: bool
) -> None:
    root = tmp_path / "media"
    (root / S).mkdir(parents=True)
    inside, outside = root / S / "notes.txt", tmp_path / "secret.txt"
    for path in (inside, outside):
        path.write_text("x")
    url = {"inside": inside, "outside": outside, "missing": root / S / "gone.txt",
           "no-root": inside}[where].as_uri()  # fmt: skip
    async with make_bus() as bus:
        channel = BusInteractionChannel(
            bus, S, "reviewer", file_root=None if where == "no-root" else root.resolve()
        )
        question = UploadQuestion(id="q1", session=S, agent="reviewer", call_id="c1", prompt="")
        reply = QuestionReply(question_id="q1", outcome="provided", url=url, name="notes.txt")
        await bus.inboxes.send(
            Envelope(session=S, sender="user", recipient=approvals_inbox("reviewer"),
                     type=ANSWER_TYPE, content="x", meta=reply.to_meta())
        )  # fmt: skip
        with anyio.fail_after(10):
            if taken:
                media = await channel.request_upload(question)
                assert media is not None and media.url == url
            else:
                with pytest.raises(UnusableAnswer):
                    await channel.request_upload(question)
