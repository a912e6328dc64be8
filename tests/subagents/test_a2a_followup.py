"""One ``baton serve`` delegating twice to another over A2A (real processes, real HTTP).

A remote agent keeps the far server's ``contextId`` in its memory (:mod:`baton.subagents.
a2a_remote`), so a second round of the same agent, once the far task of its first has ended,
sends a message with that ``contextId`` and no ``taskId``: the far server starts the context's
next task (docs/a2a.md, *Ids*) instead of refusing it. That is checked on the relay itself, two
rounds over one memory; and end to end, a front session whose lead delegates to the far server in
two turns (each delegation a new remote agent today, which finishes with its round) gets both
pictures back."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import httpx
import pytest
from a2a.client import ClientConfig, create_client
from a2a.types import ListTasksRequest, StreamResponse, SubscribeToTaskRequest, TaskState

from baton.bus.messages import Envelope
from baton.engine import LoopLimits, StopReason, TurnResult
from baton.engine.channels import PolicyChannel
from baton.engine.telemetry import Telemetry
from baton.llm.types import Message as ChatMessage
from baton.media.directory import DirectoryStore
from baton.subagents.a2a_config import A2AConfig
from baton.subagents.a2a_remote import RemoteAgent, RemoteTurn
from baton.subagents.loop import RemoteRound
from baton.subagents.state import format_inbox
from tests.cli.helpers import clean_env, processes
from tests.server.a2a_helpers import collect, hang_up, state_of, task_id_of
from tests.server.a2a_helpers import user_message as message
from tests.subagents.helpers import SESSION, task
from tests.subagents.test_a2a_serve import root_of

WAIT_S = 60.0
FAR_PROFILES = """
[profiles.painter]
description = "Paints pictures from a description and returns the image URLs."
system_prompt = "[baton:subagent] Paint the task with generate_image, then report."
tools = ["generate_image"]
"""
"""The far server paints whatever it is given (its offline lead sends every line of a task that
carries an earlier exchange to some agent: here always a painter)."""


def far_pictures(responses: list[StreamResponse], far: str) -> list[str]:
    return [
        part.url
        for response in responses
        if response.HasField("artifact_update")
        for part in response.artifact_update.artifact.parts
        if part.HasField("url") and part.url.startswith(far)
    ]


def far_session(url: str, far: str) -> str:
    """The far session a picture came from (``<far>/media/<session>/<file>``)."""
    return url.removeprefix(f"{far}/media/").split("/", 1)[0]


async def until_picture(
    stream: AsyncIterator[StreamResponse], far: str, seen: int
) -> list[StreamResponse]:
    """The stream's responses until it carried a far picture beyond the ``seen`` ones."""
    got: list[StreamResponse] = []
    with anyio.fail_after(WAIT_S):
        async for response in stream:
            got.append(response)
            if len(far_pictures(got, far)) > seen:
                break
    await hang_up(stream)
    return got


@pytest.mark.process
async def test_a_remote_agents_second_round_continues_its_far_context(tmp_path: Path) -> None:
    far_toml = tmp_path / "far.toml"
    far_toml.write_text(FAR_PROFILES)
    memory: list[ChatMessage] = [{"role": "system", "content": "unused"}]
    results: list[TurnResult] = []
    with processes() as start:
        env = clean_env(tmp_path, NO_PROXY="127.0.0.1")
        far = root_of(start("serve", "--port", "0", "--profiles", str(far_toml), env=env))
        remote = RemoteAgent("painter", A2AConfig(url=far))
        try:
            for text in ("paint a fox", "paint a heron"):
                batch = [task("painter", text)]
                memory.append({"role": "user", "content": format_inbox(batch)})
                relay = RemoteTurn(remote, relayed_round(batch, tmp_path))
                with anyio.fail_after(WAIT_S):
                    results.append(await relay.run_turn(memory, turn=relay.new_turn()))
        finally:
            await remote.aclose()
        async with httpx.AsyncClient(timeout=WAIT_S, trust_env=False) as http:
            far_client = await create_client(far, client_config=ClientConfig(httpx_client=http))
            context = far_session(results[0].media_urls[0], far)
            listed = await far_client.list_tasks(ListTasksRequest(context_id=context))
            await far_client.close()

    assert [r.stop for r in results] == [StopReason.ANSWERED, StopReason.ANSWERED], results
    remembered = [m["a2a"] for m in memory if "a2a" in m]  # type: ignore[typeddict-item]
    assert [r["context_id"] for r in remembered] == [context, context]
    assert far_session(results[1].media_urls[0], far) == f"{context}.t2"
    assert [t.id for t in listed.tasks] == [f"{context}.t2", context]
    assert {t.status.state for t in listed.tasks} == {TaskState.TASK_STATE_COMPLETED}


def relayed_round(batch: list[Envelope], media: Path) -> RemoteRound:
    async def nothing(_: object) -> None:
        return None

    return RemoteRound(
        session=SESSION,
        agent="painter",
        batch=batch,
        trace=None,
        limits=LoopLimits(),
        telemetry=Telemetry(),
        report=nothing,
        emit=nothing,
        channel=PolicyChannel(approve=False),
        media=DirectoryStore(media),
    )


@pytest.mark.process
async def test_a_baton_serve_delegates_twice_to_another_in_two_lead_turns(
    tmp_path: Path,
) -> None:
    release = tmp_path / "release"
    far_toml = tmp_path / "far.toml"
    far_toml.write_text(FAR_PROFILES)
    with processes() as start:

        def env(media: str) -> dict[str, str]:
            return clean_env(tmp_path, BATON_MEDIA_DIR=str(tmp_path / media),
                             BATON_TEST_RELEASE=str(release), NO_PROXY="127.0.0.1")  # fmt: skip

        far = root_of(start("serve", "--port", "0", "--profiles", str(far_toml),
                            env=env("far-media")))  # fmt: skip
        front_toml = tmp_path / "front.toml"  # the remote painter, and a local surveyor that
        front_toml.write_text(  # holds the front session open until the test releases it
            f'[profiles.painter]\nkind = "a2a"\nurl = "{far}"\n'
            "\n[profiles.north]\n"
            'description = "Surveys the north; works until released."\n'
            'system_prompt = "[baton:subagent] Survey with hold, then report."\n'
            'tools = ["tests.support.tools:hold"]\n'
        )
        front = root_of(start("serve", "--port", "0", "--profiles", str(front_toml),
                              env=env("front-media")))  # fmt: skip
        async with httpx.AsyncClient(timeout=WAIT_S, trust_env=False) as http:
            client = await create_client(front, client_config=ClientConfig(httpx_client=http))
            stream = client.send_message(message("paint a fox and survey the north"))
            first = await until_picture(stream, far, 0)
            task = task_id_of(first[0])
            # A second lead turn of the same front session: the far painter again.
            follow = client.send_message(message("paint a heron", task=task))
            second = await until_picture(follow, far, 0)
            with anyio.fail_after(WAIT_S):
                # Subscribed (the task as it stands comes first) before the session may end: a
                # task that ended is no longer subscribed to (GetTask gives its final state).
                subscription = client.subscribe(SubscribeToTaskRequest(id=task))
                rest = [await anext(subscription)]
                release.touch()
                rest += await collect(subscription)
            await client.close()
            far_client = await create_client(far, client_config=ClientConfig(httpx_client=http))
            fox, heron = far_pictures(first, far)[0], far_pictures(second, far)[0]
            listed = await far_client.list_tasks(ListTasksRequest())
            await far_client.close()

    assert state_of(rest[-1]) == TaskState.TASK_STATE_COMPLETED, rest[-1]
    sessions = {far_session(fox, far), far_session(heron, far)}
    assert len(sessions) == 2  # two delegations, each its own far task
    assert {t.id for t in listed.tasks} == sessions
    assert {t.status.state for t in listed.tasks} == {TaskState.TASK_STATE_COMPLETED}
