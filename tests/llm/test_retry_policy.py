"""The retry policy that knows who saw what: retractions, retry notices, the parse-error
correction and a text sink that raises — each through the real ``openai`` client against the
scripted server, on both mounts."""

from __future__ import annotations

import copy

import httpx2
import pytest

from baton.llm.errors import ModelError, StreamBroken
from baton.llm.script import (
    LLAMA_PARSE_ERROR,
    Call,
    Reply,
    Script,
    parse_failure,
    rate_limited,
    server_error,
    text,
    tool_calls,
)
from baton.llm.scripted import ScriptedServer
from baton.llm.types import Message, RetryNotice, ToolSchema
from tests.llm.helpers import Mount, connected
from tests.support.models import fenced_call, llama_like

USER: list[Message] = [{"role": "user", "content": "paint a fox"}]


def tool(name: str) -> ToolSchema:
    return {
        "type": "function",
        "function": {"name": name, "parameters": {"type": "object", "properties": {}}},
    }


TOOLS = [tool("send_message"), tool("generate_image")]


class Viewer:
    """What a viewer of the streamed text would see: deltas, with retractions as markers."""

    def __init__(self) -> None:
        self.log: list[str] = []
        self.notices: list[RetryNotice] = []

    async def on_text(self, delta: str) -> None:
        self.log.append(delta)

    async def on_retract(self) -> None:
        self.log.append("<retract>")

    async def on_retry(self, notice: RetryNotice) -> None:
        self.log.append(f"<retry {notice.attempt}>")
        self.notices.append(notice)


async def test_error_event_after_text_is_retracted_then_retried(mount: Mount) -> None:
    server = ScriptedServer(
        [Reply(text=("shown ", "lost"), error_after=2), text("whole")], record=True
    )
    viewer = Viewer()
    async with connected(server, mount) as model:
        reply = await model.complete(
            USER, on_text=viewer.on_text, on_retract=viewer.on_retract, on_retry=viewer.on_retry
        )
    assert reply.text == "whole"
    assert viewer.log == ["shown ", "<retract>", "<retry 1>", "whole"]
    assert len(server.requests) == 2


async def test_text_nobody_sees_never_blocks_a_retry(mount: Mount) -> None:
    server = ScriptedServer(
        [Reply(text=("never ", "shown"), error_after=2), text("fine")], record=True
    )
    async with connected(server, mount) as model:
        reply = await model.complete(USER)  # no on_text: nothing was shown to anyone
    assert reply.text == "fine"
    assert len(server.requests) == 2


async def test_retract_is_awaited_only_for_attempts_that_showed_text(mount: Mount) -> None:
    server = ScriptedServer([server_error(), Reply(text=("a",), cut_after=2), text("done")])
    viewer = Viewer()
    async with connected(server, mount) as model:
        await model.complete(
            USER, on_text=viewer.on_text, on_retract=viewer.on_retract, on_retry=viewer.on_retry
        )
    assert viewer.log == ["<retry 1>", "a", "<retract>", "<retry 2>", "done"]


async def test_spent_retries_after_retractions_say_so(mount: Mount) -> None:
    broken = Reply(text=("half",), error_after=2)
    server = ScriptedServer([broken, broken, broken])
    viewer = Viewer()
    async with connected(server, mount, max_retries=2) as model:
        with pytest.raises(StreamBroken) as caught:
            await model.complete(USER, on_text=viewer.on_text, on_retract=viewer.on_retract)
    assert viewer.log.count("<retract>") == 2  # the last attempt's text is the caller's to handle
    assert caught.value.attempts == 3 and caught.value.text_delivered
    assert "gave up after 3 attempt(s)" in str(caught.value)


async def test_retry_notices_come_before_each_wait(mount: Mount) -> None:
    server = ScriptedServer([server_error(503), rate_limited(0.05), text("ok")], record=True)
    seen_requests: list[int] = []
    notices: list[RetryNotice] = []

    async def on_retry(notice: RetryNotice) -> None:
        notices.append(notice)
        seen_requests.append(len(server.requests))

    async with connected(server, mount) as model:
        await model.complete(USER, on_retry=on_retry)
    assert [n.attempt for n in notices] == [1, 2]
    assert seen_requests == [1, 2]  # heard before the next request went out
    assert "HTTP 503" in notices[0].reason and "HTTP 429" in notices[1].reason
    assert notices[1].delay_s == pytest.approx(0.05)  # the server-asked wait
    assert 0 <= notices[0].delay_s <= 0.005  # the test settings' backoff_max
    assert not any(n.parse_error for n in notices)


async def test_no_notice_when_nothing_is_retried(mount: Mount) -> None:
    server = ScriptedServer([server_error(), server_error()])
    notices: list[RetryNotice] = []

    async def on_retry(notice: RetryNotice) -> None:
        notices.append(notice)

    async with connected(server, mount, max_retries=1) as model:
        with pytest.raises(ModelError):
            await model.complete(USER, on_retry=on_retry)
    assert [n.attempt for n in notices] == [1]  # the second failure is the last: no wait follows


class SinkStop(Exception):
    pass


class SinkTransportLike(httpx2.TransportError):
    """An error of a type the client itself handles, raised by the caller's sink."""


@pytest.mark.parametrize("error_type", [SinkStop, SinkTransportLike])
async def test_an_exception_from_on_text_propagates_unchanged(
    mount: Mount, error_type: type[Exception]
) -> None:
    raised = error_type("stop the runaway")
    server = ScriptedServer([text("a", "b", "c"), text("next request")], record=True)
    got: list[str] = []
    retracts: list[str] = []

    async def on_text(delta: str) -> None:
        got.append(delta)
        if delta == "b":
            raise raised

    async def on_retract() -> None:
        retracts.append("retract")

    async with connected(server, mount) as model:
        with pytest.raises(error_type) as caught:
            await model.complete(USER, on_text=on_text, on_retract=on_retract)
        assert caught.value is raised
        assert got == ["a", "b"] and retracts == []
        assert len(server.requests) == 1  # never retried
        follow = await model.complete(USER)  # the cut response was closed, the client still works
    assert follow.text == "next request"


async def test_parse_error_retry_corrects_the_model_and_requires_a_tool(mount: Mount) -> None:
    server = ScriptedServer([parse_failure(), tool_calls(Call("send_message", "{}"))], record=True)
    notices: list[RetryNotice] = []

    async def on_retry(notice: RetryNotice) -> None:
        notices.append(notice)

    messages = copy.deepcopy(USER)
    async with connected(server, mount) as model:
        reply = await model.complete(messages, TOOLS, tool_choice="auto", on_retry=on_retry)
    assert [c.name for c in reply.tool_calls] == ["send_message"]
    assert messages == USER  # the caller's list is untouched
    first, retry = (r.body for r in server.requests)
    assert first["messages"] == USER and first["tool_choice"] == "auto"
    assert retry["tool_choice"] == "required"
    assert retry["messages"][:-1] == USER
    note = retry["messages"][-1]
    assert note["role"] == "user"
    assert "send_message, generate_image" in note["content"]
    assert "tools interface" in note["content"] and "code fence" in note["content"]
    assert "plain text" not in note["content"]  # required: a tool call is the only way out
    assert LLAMA_PARSE_ERROR in note["content"]  # what went wrong, in the server's words
    assert [n.parse_error for n in notices] == [True]


async def test_parse_error_mid_stream_after_a_code_fence(mount: Mount) -> None:
    server = ScriptedServer([parse_failure("```json\n"), text("Here is your fox.")], record=True)
    viewer = Viewer()
    async with connected(server, mount) as model:
        reply = await model.complete(
            USER,
            TOOLS,
            on_text=viewer.on_text,
            on_retract=viewer.on_retract,
            on_retry=viewer.on_retry,
        )
    assert reply.text == "Here is your fox."
    assert viewer.log == ["```json\n", "<retract>", "<retry 1>", "Here is your fox."]
    assert viewer.notices[0].parse_error
    retry = server.requests[1].body
    assert retry["tool_choice"] == "required"  # no tool_choice asked: the choice was free
    assert "generate_image" in retry["messages"][-1]["content"]


async def test_parse_error_without_escalation_keeps_the_choice(mount: Mount) -> None:
    server = ScriptedServer([parse_failure(), text("plain answer")], record=True)
    async with connected(server, mount, escalate_tool_choice=False) as model:
        await model.complete(USER, TOOLS, tool_choice="auto")
    retry = server.requests[1].body
    assert retry["tool_choice"] == "auto"
    assert "plain text" in retry["messages"][-1]["content"]


@pytest.mark.parametrize("choice", ["none", "required"])
async def test_parse_error_never_overrides_a_decided_choice(mount: Mount, choice: str) -> None:
    server = ScriptedServer([parse_failure(), text("ok")], record=True)
    async with connected(server, mount) as model:
        await model.complete(USER, TOOLS, tool_choice=choice)  # type: ignore[arg-type]
    assert server.requests[1].body["tool_choice"] == choice


async def test_parse_error_without_tools_asks_for_plain_text(mount: Mount) -> None:
    server = ScriptedServer([parse_failure(), text("ok")], record=True)
    async with connected(server, mount) as model:
        await model.complete(USER)
    retry = server.requests[1].body
    assert "tool_choice" not in retry and "tools" not in retry
    assert "No tools are available" in retry["messages"][-1]["content"]


async def test_repeated_parse_errors_carry_one_correction(mount: Mount) -> None:
    server = ScriptedServer(
        [parse_failure(), parse_failure("{"), server_error(), text("ok")], record=True
    )
    async with connected(server, mount, max_retries=3) as model:
        await model.complete(USER, TOOLS)
    bodies = [r.body for r in server.requests]
    assert len(bodies[0]["messages"]) == 1
    assert all(len(body["messages"]) == 2 for body in bodies[1:])  # kept through a plain 5xx
    assert all(body["tool_choice"] == "required" for body in bodies[1:])


async def test_an_ordinary_server_error_is_retried_unchanged(mount: Mount) -> None:
    server = ScriptedServer([server_error(), text("ok")], record=True)
    async with connected(server, mount) as model:
        await model.complete(USER, TOOLS, tool_choice="auto")
    first, retry = (r.body for r in server.requests)
    assert retry == first


async def test_strict_script_rejects_a_profile_called_as_a_tool(mount: Mount) -> None:
    # A small model calling the profile "painter" as if it were a tool, llama-server style.
    painter = Reply(calls=[Call("painter", '{"task": "a fox"}')])
    fenced = Reply(text=("```json\n", '{"name": "painter"}'), calls=[Call("painter", "{}")])
    good = tool_calls(Call("send_message", '{"to": "painter"}'))
    server = ScriptedServer(Script([painter, fenced, good], strict_tools=True), record=True)
    viewer = Viewer()
    async with connected(server, mount) as model:
        reply = await model.complete(
            USER,
            TOOLS,
            on_text=viewer.on_text,
            on_retract=viewer.on_retract,
            on_retry=viewer.on_retry,
        )
    assert [c.name for c in reply.tool_calls] == ["send_message"]
    assert [n.parse_error for n in viewer.notices] == [True, True]
    assert "HTTP 500" in viewer.notices[0].reason
    assert "mid-stream" in viewer.notices[1].reason
    assert viewer.log == ["<retry 1>", "```json\n", '{"name": "painter"}', "<retract>", "<retry 2>"]
    assert len(server.script.bodies) == 3


async def test_held_back_output_times_out_and_is_retried(mount: Mount) -> None:
    held = Reply(text=("```",), hold_after=1)  # headers and the role chunk, then nothing
    server = ScriptedServer([held, text("answer")])
    notices: list[RetryNotice] = []

    async def on_retry(notice: RetryNotice) -> None:
        notices.append(notice)

    async with connected(server, mount, timeout=0.1) as model:
        reply = await model.complete(USER, TOOLS, on_retry=on_retry)
    assert reply.text == "answer"
    assert "stalled past the read timeout" in notices[0].reason


async def test_held_back_output_every_time_is_a_broken_stream(mount: Mount) -> None:
    held = Reply(text=("```",), hold_after=1)
    server = ScriptedServer([held, held])
    async with connected(server, mount, timeout=0.05, max_retries=1) as model:
        with pytest.raises(StreamBroken) as caught:
            await model.complete(USER)
    assert caught.value.attempts == 2 and not caught.value.text_delivered
    assert "stalled" in str(caught.value)


async def test_llama_like_support_model_rejects_a_profile_called_as_a_tool() -> None:
    profile_call = Reply(calls=[Call("painter", '{"task": "a fox"}')])
    server, model = llama_like([profile_call, fenced_call("painter", task="a fox")], fallback=False)
    async with model:
        reply = await model.complete(USER, TOOLS)
    # A call written as text passes the server (it is text): parsing it is the engine's job.
    assert reply.tool_calls == () and reply.text.startswith("```json\n")
    assert '"name": "painter"' in reply.text
    assert [len(body["messages"]) for body in server.script.bodies] == [1, 2]  # corrected retry
