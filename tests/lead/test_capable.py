"""A capable model's good answers stand: one request for a direct answer, one per round for a
tool-using one, nothing spawned that was not asked for, exit 0. Each case once failed: the lead
read the model's English (a restatement, the word "Draw", a quoted tool result) and rerouted,
re-asked or failed a correct answer. Whole sessions, the scripted model through the real client,
playing a capable model that answers with its typed ``answer`` call."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import pytest

from baton.bus.errors import ExitCode
from baton.bus.events import AgentSpawned, AnswerChecked, Event, TextDelta, ToolResulted
from baton.cli.run import EXIT_CODES
from baton.llm import answer
from baton.llm.script import Json, Reply, ScriptItem
from baton.session import Session, SessionConfig, SessionResult
from baton.subagents.mcp_config import McpServerConfig
from tests.support.events import logged_events
from tests.support.models import call, scripted


async def run(
    tmp_path: Path, task: str, *replies: ScriptItem, **config: object
) -> tuple[SessionResult, list[Event], int]:
    """One session of a model named like a capable one (so no aids for small models apply)."""
    server, model = scripted(list(replies), fallback=False, name="gpt-4o")
    settings = SessionConfig.model_validate(
        {"task": task, "media_dir": tmp_path, "tool_choice": "required", **config}
    )
    with anyio.fail_after(60):
        async with model, Session(settings, model=model) as session:
            result = await session.run()
            log = await logged_events(session.bus, session.id)
    return result, log, len(server.requests)


@pytest.mark.parametrize(
    ("task", "reply"),
    [
        ("Are Python lists ordered and mutable?", "Yes, Python lists are ordered and mutable."),
        (
            "Draw conclusions from this: revenue rose 5% while costs fell 2%.",
            "Margins widened: revenue grew faster than costs, so profit rose.",
        ),
        ("Quelle est la capitale du Japon ?", "La capitale du Japon est Tokyo."),
        ("Write me a haiku about rain.", "Soft rain on the roof / the gutters hum their one note"),
    ],
    ids=["restates-the-question", "draw-conclusions", "french", "writes-it-itself"],
)
async def test_a_good_direct_answer_costs_one_request_and_stands(
    tmp_path: Path, task: str, reply: str
) -> None:
    result, log, requests = await run(tmp_path, task, answer(reply))
    assert (result.status, result.answer, requests) == ("completed", reply, 1)
    assert EXIT_CODES[result.status] is ExitCode.OK
    assert not [e for e in log if isinstance(e, AgentSpawned)]
    shown = "".join(e.text for e in log if isinstance(e, TextDelta) and e.agent == "lead")
    assert shown == reply  # streamed from the call's argument, once
    [checked] = [e for e in log if isinstance(e, AnswerChecked)]
    assert (checked.policy, checked.reasons) == ("structural", [])


async def test_the_guided_policy_does_not_send_draw_conclusions_to_the_painter(
    tmp_path: Path,
) -> None:
    """The small-model aids read "draw" as a picture asked only before an object ("draw a fox"),
    so a direct answer to "Draw conclusions…" stands under them too: no route, no painter."""
    reply = "Margins widened: revenue grew faster than costs, so profit rose."
    task = "Draw conclusions from this: revenue rose 5% while costs fell 2%."
    result, log, requests = await run(tmp_path, task, answer(reply), lead_policy="guided")
    assert (result.status, result.answer, requests) == ("completed", reply, 1)
    assert not [e for e in log if isinstance(e, AgentSpawned)]
    [checked] = [e for e in log if isinstance(e, AnswerChecked)]
    assert (checked.policy, checked.reasons) == ("guided", [])


@pytest.mark.process
async def test_an_answer_quoting_the_leads_own_tool_result_stands(tmp_path: Path) -> None:
    """The lead calls its own MCP clock, then answers quoting what it returned: one request per
    round, completed, the model's own words."""
    clock = McpServerConfig(
        command=sys.executable, args=("-m", "mcp_server_time"), allow=("get_current_time",)
    )
    said = "It is {time} in UTC right now."

    def quoting(body: Json) -> Reply:
        tool = [m for m in body["messages"] if m.get("role") == "tool"][-1]
        return answer(said.format(time=tool["content"]))

    server, model = scripted([call("get_current_time", "t1", timezone="UTC")], fallback=False)
    server.script.responder = quoting
    config = SessionConfig(
        task="What time is it in UTC?",
        lead_mcp={"time": clock},
        media_dir=tmp_path,
        tool_choice="required",
    )
    with anyio.fail_after(60):
        async with model, Session(config, model=model) as session:
            result = await session.run()
            log = await logged_events(session.bus, session.id)
    (ran,) = [e for e in log if isinstance(e, ToolResulted) and e.result.name == "get_current_time"]
    assert (result.status, len(server.requests)) == ("completed", 2)
    assert result.answer == said.format(time=ran.result.content)
    assert EXIT_CODES[result.status] is ExitCode.OK
