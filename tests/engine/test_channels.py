"""Interaction channels: the in-process one answered by id, and the fixed policies."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import pytest
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream

from baton.bus.events import ToolCallInfo
from baton.engine import (
    ApprovalDecision,
    ApprovalQuestion,
    ImageQuestion,
    InteractionCancelled,
    InteractionUnavailable,
    MemoryChannel,
    PolicyChannel,
    ProvidedMedia,
    QuestionClosed,
    UploadQuestion,
)
from baton.engine.channels import ChannelItem, policy_channel


@asynccontextmanager
async def listening() -> AsyncIterator[
    tuple[MemoryChannel, MemoryObjectReceiveStream[ChannelItem], TaskGroup]
]:
    """A channel, a listener on it, and a task group for the asking side."""
    async with MemoryChannel() as channel:
        with channel.listen() as questions:
            async with anyio.create_task_group() as group:
                yield channel, questions, group


@asynccontextmanager
async def aclosing_stream(
    stream: MemoryObjectReceiveStream[ChannelItem],
) -> AsyncIterator[MemoryObjectReceiveStream[ChannelItem]]:
    with stream:
        yield stream


CALLS = (
    ToolCallInfo(call_id="c1", name="delete", arguments="{}"),
    ToolCallInfo(call_id="c2", name="delete", arguments='{"x":1}'),
)


def approval(qid: str = "q1") -> ApprovalQuestion:
    return ApprovalQuestion(id=qid, session="s", agent="a", calls=CALLS)


async def test_questions_are_published_and_answered_by_id() -> None:
    async with listening() as (channel, questions, group):
        answers: dict[str, ApprovalDecision] = {}

        async def ask() -> None:
            answers.update(await channel.ask_approval(approval()))

        group.start_soon(ask)
        question = await questions.receive()
        assert isinstance(question, ApprovalQuestion) and channel.pending() == [question]
        assert not channel.provide(question.id, None)  # wrong kind of answer
        assert channel.decide(
            question.id,
            {"c1": ApprovalDecision(approved=True), "c2": ApprovalDecision(approved=False)},
        )
        assert not channel.decide(question.id, True)  # already answered
    assert answers["c1"].approved and not answers["c2"].approved
    assert channel.pending() == []


async def test_one_bool_decides_every_call_of_the_batch() -> None:
    async with listening() as (channel, questions, group):
        answers: dict[str, ApprovalDecision] = {}

        async def ask() -> None:
            answers.update(await channel.ask_approval(approval()))

        group.start_soon(ask)
        question = await questions.receive()
        channel.decide(question.id, False, reason="not today")
    assert {k: (v.approved, v.reason) for k, v in answers.items()} == {
        "c1": (False, "not today"),
        "c2": (False, "not today"),
    }


async def test_uploads_and_images_are_answered_with_media_or_none() -> None:
    media = ProvidedMedia(url="https://x/cat.png", name="cat.png", media_type="image/png")
    got: list[ProvidedMedia | None] = []
    async with listening() as (channel, questions, group):

        async def ask() -> None:
            got.append(
                await channel.request_upload(
                    UploadQuestion(id="u", session="s", agent="a", call_id="c", prompt="csv")
                )
            )
            got.append(
                await channel.request_image(
                    ImageQuestion(id="i", session="s", agent="a", call_id="c", prompt="")
                )
            )

        group.start_soon(ask)
        assert (await questions.receive()).id == "u"
        assert channel.provide("u", media)
        assert (await questions.receive()).id == "i"
        assert channel.provide("i", None)
    assert got == [media, None]


async def test_cancel_pending_releases_every_wait_and_closes_the_dialog() -> None:
    errors: list[BaseException] = []
    async with listening() as (channel, questions, group):

        async def ask(qid: str) -> None:
            try:
                await channel.ask_approval(approval(qid))
            except InteractionCancelled as exc:
                errors.append(exc)

        group.start_soon(ask, "q1")
        group.start_soon(ask, "q2")
        first, second = await questions.receive(), await questions.receive()
        assert {first.id, second.id} == {"q1", "q2"}
        channel.cancel_pending()
        closed = [await questions.receive(), await questions.receive()]
    assert len(errors) == 2 and all(isinstance(e, InteractionCancelled) for e in errors)
    assert {(c.id, c.reason) for c in closed if isinstance(c, QuestionClosed)} == {
        ("q1", "cancelled"),
        ("q2", "cancelled"),
    }


async def test_a_wait_given_up_by_the_asker_closes_its_dialog() -> None:
    async with MemoryChannel() as channel, aclosing_stream(channel.listen()) as questions:
        with anyio.move_on_after(0.01):
            await channel.ask_approval(approval())
        assert isinstance(await questions.receive(), ApprovalQuestion)
        closed = await questions.receive()
        assert closed == QuestionClosed(id="q1", reason="withdrawn")
        assert channel.pending() == []


async def test_a_closed_or_full_channel_fails_at_once() -> None:
    channel = MemoryChannel()
    await channel.aclose()
    with pytest.raises(InteractionUnavailable, match="closed or its buffer full"):
        await channel.ask_approval(approval())
    full = MemoryChannel(max_buffer=0)
    with pytest.raises(InteractionUnavailable):
        await full.ask_approval(approval())
    await full.aclose()


async def test_closing_the_channel_ends_the_question_stream_for_a_waiting_reader() -> None:
    channel = MemoryChannel()
    seen: list[object] = []
    async with anyio.create_task_group() as group:

        async def read() -> None:
            with channel.listen() as items:
                async for item in items:
                    seen.append(item)
            seen.append("end")

        group.start_soon(read)
        await anyio.wait_all_tasks_blocked()
        await channel.aclose()
    assert seen == ["end"]


async def test_policy_channels_answer_without_waiting() -> None:
    yes = await PolicyChannel.auto_approve().ask_approval(approval())
    no = await PolicyChannel.auto_deny().ask_approval(approval())
    assert all(d.approved for d in yes.values()) and set(yes) == {"c1", "c2"}
    assert not any(d.approved for d in no.values())
    assert no["c1"].reason == "declined by policy (approve=deny)" and no["c1"].policy == "deny"
    assert yes["c1"].policy == "auto"
    assert policy_channel("ask") is None and policy_channel("auto") is not None
    upload = UploadQuestion(id="u", session="s", agent="a", call_id="c", prompt="")
    assert await PolicyChannel.auto_deny().request_upload(upload) is None
    PolicyChannel.auto_deny().cancel_pending()
