"""Whole sessions delegating to a remote A2A agent: the lead (a scripted model, through the real
``openai`` client) sends to a ``kind = "a2a"`` profile with ``send_message`` as to any other, and
the agent is a real A2A server on loopback (:mod:`tests.support.a2a_agent`)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import anyio
import pytest

from baton.api import Session, SessionConfig
from baton.bus.events import AgentProgress, AgentResult, ApprovalRequested
from baton.llm.script import Call, Reply
from baton.subagents.a2a_card import forget_cards
from baton.subagents.a2a_config import A2AConfig
from baton.subagents.errors import ProfileError
from baton.subagents.profiles import Profile, load_profiles
from baton.subagents.tools import builtin_tools
from tests.support.a2a_agent import free_port, serve_agent
from tests.support.events import logged_events
from tests.support.models import scripted

DOCS = Path(__file__).resolve().parents[2] / "docs" / "profiles.md"


@pytest.fixture(autouse=True)
def fresh_cards() -> None:
    forget_cards()  # each test's agent listens on a port of its own


def send(content: str, call_id: str = "s1", to: str = "remote") -> Reply:
    arguments = {"to": to, "content": content, "type": "task"}
    return Reply(calls=[Call("send_message", json.dumps(arguments), id=call_id)])


def profiles_file(tmp_path: Path, url: str, extra: str = "") -> Path:
    path = tmp_path / "profiles.toml"
    path.write_text(f'[profiles.remote]\nkind = "a2a"\nurl = "{url}"\n{extra}')
    return path


def config(
    tmp_path: Path, url: str, task: str, extra: str = "", **options: object
) -> SessionConfig:
    return SessionConfig(
        task=task,
        profiles=profiles_file(tmp_path, url, extra),
        media_dir=tmp_path,
        timeout_s=60,
        **options,
    )


async def test_the_lead_delegates_to_the_remote_agent_and_cites_its_picture(
    tmp_path: Path,
) -> None:
    server, model = scripted([send("paint a fox"), Reply(text="On it."), Reply(text="Done.")])
    async with serve_agent() as (url, seen):
        with anyio.fail_after(60):
            async with model, Session(config(tmp_path, url, "a fox"), model=model) as session:
                result = await session.run()
                log = await logged_events(session.bus, session.id)
    picture = f"{url}/media/a-fox.png"
    assert result.media_urls == [picture], result
    (reported,) = [e for e in log if isinstance(e, AgentResult)]
    assert (reported.agent, reported.content) == ("remote", "painted a fox")
    assert "sketching a fox" in [e.content for e in log if isinstance(e, AgentProgress)]
    assert [text for text, _, _ in seen.messages] == ["paint a fox"]
    # the profile gave no description: the lead was told the card's, with its skills
    system = str(server.requests[0].body["messages"][0]["content"])
    assert "remote: Paints pictures remotely. Skills: paint: paints what it is told" in system
    # and the result reached the lead's context like a local agent's
    context = json.dumps(server.requests[-1].body["messages"])
    assert "[result from remote] painted a fox" in context and picture in context


async def test_the_remote_s_question_is_answered_like_an_approval(tmp_path: Path) -> None:
    _, model = scripted([send("ask a heron"), Reply(text="On it."), Reply(text="Done.")])
    async with serve_agent() as (url, _):
        with anyio.fail_after(60):
            async with model, Session(config(tmp_path, url, "a heron"), model=model) as session:
                async for event in session.events():
                    if isinstance(event, ApprovalRequested):
                        (call,) = event.calls
                        assert "which colour for a heron?" in call.arguments
                        assert await session.answer(call.call_id, True, "blue") == "remote"
                        break
                result = await session.run()
    assert result.media_urls == [f"{url}/media/a-heron-in-blue.png"]


async def test_cancelling_the_session_cancels_the_remote_task(tmp_path: Path) -> None:
    _, model = scripted([send("hold the line"), Reply(text="Waiting.")])
    async with serve_agent() as (url, seen):
        setup = config(tmp_path, url, "hold", shutdown_grace_s=10.0)
        with anyio.fail_after(60):
            async with model, Session(setup, model=model) as session:
                async for event in session.events():
                    if isinstance(event, AgentProgress) and event.content == "holding the line":
                        session.cancel()
                        break
                result = await session.run()
            await seen.cancel_seen.wait()
    assert result.status == "cancelled"
    (held,) = {task_id for _, _, task_id in seen.messages} | set(seen.cancelled)
    assert seen.cancelled == [held]


async def test_an_unreachable_remote_is_an_error_result_the_lead_reads(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nobody listens there
    server, model = scripted([send("paint a fox"), Reply(text="On it."), Reply(text="Sorry.")])
    setup = config(tmp_path, url, "a fox", 'description = "Paints."\nconnect_retries = 1\n')
    with anyio.fail_after(60):
        async with model, Session(setup, model=model) as session:
            result = await session.run()
    assert result.media_urls == []
    context = json.dumps(server.requests[-1].body["messages"])
    assert "[result from remote]" in context
    assert f"the remote A2A agent at {url} could not be reached" in context


def test_a_profile_without_url_is_refused_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "profiles.toml"
    path.write_text('[profiles.critic]\nkind = "a2a"\ndescription = "Criticises."\n')
    with pytest.raises(ProfileError) as refused:
        load_profiles(path)
    message = str(refused.value)
    assert "profile 'critic'" in message and "field 'url'" in message
    assert 'kind "a2a" needs url' in message


def test_a_url_that_is_not_http_is_refused_saying_what_it_must_be(tmp_path: Path) -> None:
    with pytest.raises(ProfileError) as refused:
        load_profiles(profiles_file(tmp_path, "critic.example.com"))
    message = str(refused.value)
    assert "field 'url'" in message and "http:// or https://" in message
    assert "'critic.example.com'" in message


def test_a_remote_profile_takes_no_tools_and_a_kind_must_be_known(tmp_path: Path) -> None:
    path = profiles_file(tmp_path, "http://127.0.0.1:9", 'tools = ["summarise"]\n')
    with pytest.raises(ProfileError, match="runs elsewhere: it has no tools"):
        load_profiles(path)
    with pytest.raises(ProfileError, match="runs elsewhere: it has no tools"):
        Profile(name="r", description="", system_prompt="-", tools=(builtin_tools()["summarise"],),
                a2a=A2AConfig(url="http://127.0.0.1:9"))  # fmt: skip
    path.write_text('[profiles.x]\nkind = "remote"\ndescription = "d"\nsystem_prompt = "s"\n')
    with pytest.raises(ProfileError, match=r'must be "agent" .* or "a2a"'):
        load_profiles(path)


def test_the_docs_example_is_a_valid_profiles_file(tmp_path: Path) -> None:
    found = re.search(
        r"<!-- example: a2a-profile -->\n```toml\n(.*?)```", DOCS.read_text(), re.DOTALL
    )
    assert found, "docs/profiles.md lost its remote A2A example"
    path = tmp_path / "profiles.toml"
    path.write_text(found[1])
    loaded = load_profiles(path)
    critic, painter = loaded["critic"], loaded["far-painter"]
    assert critic.a2a is not None and critic.a2a.url == "https://critic.example.com/"
    assert critic.a2a.token_env == "CRITIC_TOKEN" and critic.a2a.timeout_s == 120
    assert critic.description.startswith("Criticises")
    assert painter.a2a is not None and painter.description == ""  # the card's, when run
