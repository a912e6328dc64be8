"""The scripted server itself: wire format, recording, script order, both mounts."""

from __future__ import annotations

import json
from typing import Any

import httpx2
import pytest

from baton.llm.errors import ModelError
from baton.llm.script import (
    LLAMA_PARSE_ERROR,
    Call,
    HttpError,
    Reply,
    Script,
    parse_failure,
    render,
    runaway,
    text,
    tool_calls,
)
from baton.llm.scripted import IN_PROCESS_URL, ScriptedServer
from tests.llm.helpers import Mount, connected

BODY: dict[str, Any] = {
    "model": "gpt-test",
    "messages": [{"role": "user", "content": "hi"}],
    "stream": True,
    "stream_options": {"include_usage": True},
}


def events(frames: list[bytes]) -> list[Any]:
    out: list[Any] = []
    for frame in frames:
        assert frame.startswith(b"data: ") and frame.endswith(b"\n\n")
        payload = frame[6:-2]
        out.append(payload.decode() if payload == b"[DONE]" else json.loads(payload))
    return out


def test_chunks_have_the_api_shape() -> None:
    rendered = render(text("Hi", " there"), BODY)
    assert rendered.status == 200
    assert ("content-type", "text/event-stream; charset=utf-8") in rendered.headers
    first = rendered.frames[0]
    assert first.startswith(b'data: {"id":"chatcmpl-')
    assert b'"object":"chat.completion.chunk"' in first and b", " not in first  # compact JSON
    parsed = events(rendered.frames)
    assert parsed[-1] == "[DONE]"
    usage = parsed[-2]
    assert usage["choices"] == [] and usage["usage"]["total_tokens"] > 0
    body_chunks = parsed[:-2]
    assert all(c["usage"] is None and c["model"] == "gpt-test" for c in body_chunks)
    assert len({c["id"] for c in parsed[:-1]}) == 1
    assert body_chunks[0]["choices"][0]["delta"] == {
        "role": "assistant",
        "content": "",
        "refusal": None,
    }
    assert [c["choices"][0]["delta"].get("content") for c in body_chunks[1:3]] == ["Hi", " there"]
    assert body_chunks[-1]["choices"][0] == {
        "index": 0,
        "delta": {},
        "logprobs": None,
        "finish_reason": "stop",
    }


def test_without_include_usage_there_is_no_usage_field() -> None:
    body = {key: value for key, value in BODY.items() if key != "stream_options"}
    parsed = events(render(text("x"), body).frames)
    assert parsed[-1] == "[DONE]"
    assert all("usage" not in c and c["choices"] for c in parsed[:-1])


def test_tool_call_chunks_have_the_api_shape() -> None:
    parsed = events(render(tool_calls(Call("f", ('{"a"', ":1}"), id="call_x")), BODY).frames)
    opening = parsed[0]["choices"][0]["delta"]
    assert opening == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "index": 0,
                "id": "call_x",
                "type": "function",
                "function": {"name": "f", "arguments": ""},
            }
        ],
        "refusal": None,
    }
    pieces = [c["choices"][0]["delta"]["tool_calls"][0] for c in parsed[1:3]]
    assert pieces == [
        {"index": 0, "function": {"arguments": '{"a"'}},
        {"index": 0, "function": {"arguments": ":1}"}},
    ]
    assert parsed[3]["choices"][0]["finish_reason"] == "tool_calls"


def test_cut_reply_stops_early_without_done() -> None:
    rendered = render(Reply(text=("a", "b", "c"), cut_after=2), BODY)
    assert len(rendered.frames) == 2 and rendered.cut
    assert b"[DONE]" not in b"".join(rendered.frames)


async def test_loopback_sends_the_rendered_bytes_chunked() -> None:
    server = ScriptedServer([text("x", "y")])
    expected = b"".join(render(text("x", "y"), BODY).frames)
    async with server.serve() as http, httpx2.AsyncClient() as client:
        url = f"{http.base_url}/chat/completions"
        async with client.stream("POST", url, json=BODY) as response:
            raw = b"".join([part async for part in response.aiter_bytes()])
            assert response.headers["transfer-encoding"] == "chunked"
    strip = [json.loads(f[6:]) if f != b"data: [DONE]" else f for f in raw.split(b"\n\n") if f]
    want = [json.loads(f[6:]) if f != b"data: [DONE]" else f for f in expected.split(b"\n\n") if f]
    for got, exp in zip(strip, want, strict=True):  # ids and timestamps differ per render
        if isinstance(got, dict):
            assert isinstance(exp, dict)
            got.pop("id"), exp.pop("id"), got.pop("created"), exp.pop("created")
        assert got == exp


async def test_records_requests_and_uses_responder_after_queue(mount: Mount) -> None:
    seen: list[int] = []

    def responder(body: dict[str, Any]) -> Reply:
        seen.append(len(body["messages"]))
        return text(f"responder saw {len(body['messages'])}")

    server = ScriptedServer([text("queued")], responder=responder, record=True)
    async with connected(server, mount) as model:
        first = await model.complete([{"role": "user", "content": "1"}])
        second = await model.complete(
            [{"role": "user", "content": "1"}, {"role": "assistant", "content": "queued"}]
        )
    assert (first.text, second.text) == ("queued", "responder saw 2")
    assert seen == [2]
    assert [len(r.messages) for r in server.requests] == [1, 2]
    assert server.requests[1].headers["content-type"] == "application/json"


async def test_exhausted_script_fails_loudly(mount: Mount) -> None:
    server = ScriptedServer(Script([text("only one")]))
    async with connected(server, mount) as model:
        await model.complete([{"role": "user", "content": "a"}])
        with pytest.raises(ModelError, match="no reply left") as caught:
            await model.complete([{"role": "user", "content": "b"}])
    assert caught.value.status_code == 400 and caught.value.attempts == 1


async def test_non_streamed_and_unknown_routes_are_refused() -> None:
    server = ScriptedServer([text("unused")])
    async with httpx2.AsyncClient(transport=server.transport()) as client:
        plain = await client.post(f"{IN_PROCESS_URL}/chat/completions", json={"messages": []})
        missing = await client.post(f"{IN_PROCESS_URL}/embeddings", json={})
    assert plain.status_code == 400 and "stream=true" in plain.json()["error"]["message"]
    assert missing.status_code == 404
    assert server.script.pending == 1


async def test_responder_error_is_a_clear_refusal(mount: Mount) -> None:
    def broken(body: dict[str, Any]) -> Reply:
        raise KeyError("no such scenario")

    server = ScriptedServer(responder=broken)
    async with connected(server, mount) as model:
        with pytest.raises(ModelError, match="scripted responder failed: KeyError") as caught:
            await model.complete([{"role": "user", "content": "a"}])
        assert caught.value.attempts == 1
        server.add(text("still serving"))
        assert (await model.complete([{"role": "user", "content": "b"}])).text == "still serving"
    assert [type(e) for e in server.errors] == [KeyError]


def test_llama_parse_failure_mid_stream_has_llama_s_error_shape() -> None:
    parsed = events(render(parse_failure("```json\n"), BODY).frames)
    assert parsed[0]["choices"][0]["delta"]["role"] == "assistant"
    assert parsed[1]["choices"][0]["delta"]["content"] == "```json\n"
    assert parsed[-1] == {
        "error": {"code": 500, "message": LLAMA_PARSE_ERROR, "type": "server_error"}
    }
    assert len(parsed) == 3  # no finish chunk, no [DONE]


def test_llama_parse_failure_before_any_text_is_an_http_500() -> None:
    rendered = render(parse_failure(), BODY)
    assert rendered.status == 500
    assert json.loads(rendered.frames[0])["error"]["message"] == LLAMA_PARSE_ERROR


def test_openai_error_event_keeps_openai_s_shape() -> None:
    parsed = events(render(Reply(text=("x",), error_after=2), BODY).frames)
    assert parsed[-1] == {
        "error": {
            "message": "The server had an error while streaming (scripted)",
            "type": "server_error",
            "param": None,
            "code": None,
        }
    }


def test_runaway_ends_with_finish_reason_length() -> None:
    parsed = events(render(runaway("again and ", 5), BODY).frames)
    contents = [c["choices"][0]["delta"].get("content") for c in parsed[1:6]]
    assert contents == ["again and "] * 5
    assert parsed[6]["choices"][0]["finish_reason"] == "length"


def test_held_back_reply_renders_the_hold() -> None:
    rendered = render(Reply(text=("a",), hold_after=1, hold=2.5), BODY)
    assert (rendered.hold_after, rendered.hold) == (1, 2.5)


TOOLS_BODY: dict[str, Any] = {
    **BODY,
    "tools": [{"type": "function", "function": {"name": "send_message", "parameters": {}}}],
}


def test_strict_script_passes_offered_calls_and_text() -> None:
    offered = tool_calls(Call("send_message", "{}"))
    script = Script([offered, text("plain")], strict_tools=True, record=True)
    assert script.next(TOOLS_BODY) is offered
    assert script.next(TOOLS_BODY) == text("plain")
    assert script.bodies == [TOOLS_BODY, TOOLS_BODY]


def test_strict_script_rejects_unoffered_calls_as_llama_does() -> None:
    script = Script(
        [
            tool_calls(Call("painter", "{}")),
            Reply(text=("```json\n",), calls=[Call("painter", "{}")]),
            tool_calls(Call("send_message", "{}")),  # offered, but none are in this request
        ],
        strict_tools=True,
    )
    rejected = script.next(TOOLS_BODY)
    assert isinstance(rejected, HttpError) and rejected.status == 500
    assert rejected.message == LLAMA_PARSE_ERROR
    assert script.next(TOOLS_BODY) == parse_failure("```json\n")
    assert script.next(BODY) == parse_failure()


def test_lenient_script_passes_unoffered_calls() -> None:
    call = tool_calls(Call("painter", "{}"))
    assert Script([call]).next(TOOLS_BODY) is call
