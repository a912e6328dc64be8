"""A tool argument that is the reply (``Tool.shows``) streams to the views as its JSON arrives —
through the real client and the scripted server's split argument chunks."""

from __future__ import annotations

import json

import pytest

from baton.bus.events import TextDelta
from baton.engine import StopReason, Tool, ToolDefinitionError
from baton.engine.visible import RunawayText, VisibleText
from baton.llm.script import Call, Reply, pieces, text
from baton.llm.types import ToolCall
from tests.engine.helpers import EventLog, harness, user
from tests.engine.test_replies import seen


def reply_tool(ran: list[str]) -> Tool:
    async def reply(text: str, mood: str = "calm") -> str:
        ran.append(text)
        return "replied"

    return Tool(reply, terminal=True, shows="text", description="Reply to the user.")


async def test_the_shown_argument_streams_piece_by_piece_before_the_tool_runs() -> None:
    words = 'Paris is the capital of France, "la Ville Lumière".\nIt has 2.1 million people.'
    arguments = json.dumps({"mood": "sunny", "text": words}, ensure_ascii=False)
    ran: list[str] = []
    seen_at_run: list[str] = []
    script = [Reply(calls=[Call("reply", pieces(arguments, 7))])]
    async with harness(script, [reply_tool(ran)]) as h:

        async def on_text(delta: str) -> None:
            seen_at_run.append(delta)

        result = await h.loop.run_turn(user("capital?"), on_text=on_text)
    deltas = [delta.text for delta in h.log.of(TextDelta)]
    assert result.stop is StopReason.TERMINAL and ran == [words]
    assert "".join(deltas) == words  # every character shown once, escapes decoded
    assert len(deltas) > 5  # as it streamed, not in one piece at the end
    assert seen_at_run == deltas


async def test_a_call_written_as_text_shows_its_argument_whole_once_parsed() -> None:
    call = json.dumps({"name": "reply", "arguments": {"text": "Four."}})
    ran: list[str] = []
    async with harness([text(call[:9], call[9:])], [reply_tool(ran)]) as h:
        result = await h.loop.run_turn(user("2+2?"))
    assert result.stop is StopReason.TERMINAL and ran == ["Four."]
    assert seen(h.log.events) == "Four."  # the JSON never shows; its text does


async def test_a_broken_stream_takes_the_streamed_argument_back_before_the_retry() -> None:
    arguments = json.dumps({"text": "A first try that breaks off"})
    whole = json.dumps({"text": "The answer."})
    script = [
        Reply(calls=[Call("reply", pieces(arguments, 5))], cut_after=4),
        Reply(calls=[Call("reply", pieces(whole, 5))]),
    ]
    ran: list[str] = []
    async with harness(script, [reply_tool(ran)], retries=1) as h:
        result = await h.loop.run_turn(user("go"))
    assert result.stop is StopReason.TERMINAL and ran == ["The answer."]
    assert seen(h.log.events) == "The answer."


async def test_arguments_of_other_tools_are_never_shown() -> None:
    async def note(text: str) -> str:
        return "noted"

    tools = [Tool(note), reply_tool([])]
    script = [
        Reply(calls=[Call("note", pieces(json.dumps({"text": "private"}), 4))]),
        Reply(calls=[Call("reply", pieces(json.dumps({"text": "public"}), 4))]),
    ]
    async with harness(script, tools) as h:
        await h.loop.run_turn(user("go"))
    assert seen(h.log.events) == "public"


async def test_a_runaway_shown_argument_stops_the_stream_like_runaway_text() -> None:
    visible = VisibleText("s", "a", EventLog(), None, {"reply": "text"})
    piece = '{"text": "' + "I will answer now. " * 4
    await visible.call_delta(0, "reply", piece)
    with pytest.raises(RunawayText):
        for _ in range(200):
            await visible.call_delta(0, "reply", "I will answer now. ")


async def test_the_whole_argument_is_shown_when_the_stream_lagged_behind_it() -> None:
    log = EventLog()
    visible = VisibleText("s", "a", log, None, {"reply": "text"})
    await visible.call_delta(0, "reply", '{"text": "caf')
    await visible.call_delta(0, "reply", "\\u00")  # an escape cut in two: nothing new yet
    await visible.finish_calls([ToolCall("c1", "reply", '{"text": "caf\\u00e9"}')])
    assert seen(log.events) == "café"


def test_shows_must_name_a_parameter() -> None:
    async def reply(text: str) -> str:
        return text

    with pytest.raises(ToolDefinitionError, match="shows='body'"):
        Tool(reply, shows="body")
