"""OpenAIChatModel end to end: the real ``openai`` client against the scripted server."""

from __future__ import annotations

import time

import anyio
import openai
import pytest

from baton.llm.client import OPENAI_API_URL, ModelSettings, OpenAIChatModel
from baton.llm.errors import ModelError, StreamBroken
from baton.llm.script import (
    Call,
    HttpError,
    Reply,
    Stall,
    pieces,
    rate_limited,
    runaway,
    server_error,
    text,
    tool_calls,
)
from baton.llm.scripted import IN_PROCESS_URL, ScriptedServer
from baton.llm.types import Message, ToolSchema
from tests.llm.helpers import Mount, TextLog, connected, settings

USER: list[Message] = [{"role": "user", "content": "hello"}]
TOOL: ToolSchema = {
    "type": "function",
    "function": {"name": "search", "parameters": {"type": "object", "properties": {}}},
}


async def test_text_streams_in_order(mount: Mount) -> None:
    server = ScriptedServer([text("Hel", "lo, ", "world", "!")])
    log = TextLog()
    async with connected(server, mount) as model:
        reply = await model.complete(USER, on_text=log)
    assert log.deltas == ["Hel", "lo, ", "world", "!"]
    assert reply.text == "Hello, world!"
    assert reply.tool_calls == ()
    assert reply.finish_reason == "stop"
    assert reply.usage is not None and reply.usage.total_tokens > 0


async def test_parallel_tool_calls_with_split_arguments(mount: Mount) -> None:
    calls = (
        Call("search", pieces('{"query": "red cats"}', 3), id="call_a"),
        Call("fetch", pieces('{"url": "https://x.test/1"}', 5), id="call_b"),
        Call("search", '{"query": "dogs"}', id="call_c"),
    )
    server = ScriptedServer([tool_calls(*calls)], record=True)
    async with connected(server, mount) as model:
        reply = await model.complete(USER, [TOOL])
    assert [(c.id, c.name, c.arguments) for c in reply.tool_calls] == [
        ("call_a", "search", '{"query": "red cats"}'),
        ("call_b", "fetch", '{"url": "https://x.test/1"}'),
        ("call_c", "search", '{"query": "dogs"}'),
    ]
    assert reply.finish_reason == "tool_calls"
    assert server.requests[0].tool_names == ["search"]


async def test_text_before_tool_calls(mount: Mount) -> None:
    server = ScriptedServer([Reply(text=("Let me ", "look."), calls=[Call("search", "{}")])])
    log = TextLog()
    async with connected(server, mount) as model:
        reply = await model.complete(USER, on_text=log)
    assert reply.text == "Let me look."
    assert [c.name for c in reply.tool_calls] == ["search"]


async def test_quirk_missing_ids_are_synthesised_unique(mount: Mount) -> None:
    server = ScriptedServer([tool_calls(Call("a", '{"x":1}'), Call("b", "{}"), omit_call_ids=True)])
    async with connected(server, mount) as model:
        reply = await model.complete(USER)
    ids = [c.id for c in reply.tool_calls]
    assert [c.name for c in reply.tool_calls] == ["a", "b"]
    assert all(i.startswith("call_") and len(i) > 10 for i in ids)
    assert len(set(ids)) == 2


async def test_quirk_id_and_name_on_every_chunk_not_concatenated(mount: Mount) -> None:
    call = Call("generate_image", pieces('{"prompt": "a red fox"}', 4), id="call_fox")
    server = ScriptedServer([tool_calls(call, repeat_id_and_name=True)])
    async with connected(server, mount) as model:
        reply = await model.complete(USER)
    assert [(c.id, c.name, c.arguments) for c in reply.tool_calls] == [
        ("call_fox", "generate_image", '{"prompt": "a red fox"}')
    ]


async def test_quirk_index_reused_with_new_id_opens_new_call(mount: Mount) -> None:
    calls = (Call("a", pieces('{"n": 1}', 2), id="id1"), Call("b", pieces('{"n": 2}', 2), id="id2"))
    server = ScriptedServer([tool_calls(*calls, reuse_index=True)])
    async with connected(server, mount) as model:
        reply = await model.complete(USER)
    assert [(c.id, c.name, c.arguments) for c in reply.tool_calls] == [
        ("id1", "a", '{"n": 1}'),
        ("id2", "b", '{"n": 2}'),
    ]


async def test_quirk_empty_arguments_mean_empty_object(mount: Mount) -> None:
    server = ScriptedServer([tool_calls(Call("now", ""), Call("later", ("", "")))])
    async with connected(server, mount) as model:
        reply = await model.complete(USER)
    assert [c.arguments for c in reply.tool_calls] == ["{}", "{}"]


async def test_quirk_missing_usage_chunk(mount: Mount) -> None:
    server = ScriptedServer([text("hi", send_usage=False)], record=True)
    async with connected(server, mount) as model:
        reply = await model.complete(USER)
    assert reply.text == "hi"
    assert reply.usage is None
    assert server.requests[0].body["stream_options"] == {"include_usage": True}


@pytest.mark.parametrize("include_usage", [True, False])
async def test_include_usage_switch(mount: Mount, include_usage: bool) -> None:
    server = ScriptedServer([text("hi")], record=True)
    async with connected(server, mount, include_usage=include_usage) as model:
        reply = await model.complete(USER)
    body = server.requests[0].body
    assert ("stream_options" in body) is include_usage
    assert (reply.usage is not None) is include_usage
    assert body["stream"] is True and body["model"] == "test-model"


async def test_malformed_arguments_and_unknown_tool_pass_through(mount: Mount) -> None:
    server = ScriptedServer([tool_calls(Call("no_such_tool", pieces('{"a": [1, 2', 3)))])
    async with connected(server, mount) as model:
        reply = await model.complete(USER, [TOOL])
    assert [(c.name, c.arguments) for c in reply.tool_calls] == [("no_such_tool", '{"a": [1, 2')]


async def test_request_carries_auth_and_sdk_retries_are_off(mount: Mount) -> None:
    server = ScriptedServer([text("ok")], record=True)
    async with connected(server, mount) as model:
        await model.complete(USER, [TOOL])
    request = server.requests[0]
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer sk-test"
    assert request.headers["x-stainless-retry-count"] == "0"
    assert request.messages == USER
    assert request.body["tools"] == [TOOL]


async def test_rate_limit_honours_retry_after(mount: Mount) -> None:
    server = ScriptedServer([rate_limited(0.2), text("after the wait")], record=True)
    async with connected(server, mount, backoff_initial=0, backoff_max=0) as model:
        started = time.monotonic()
        reply = await model.complete(USER)
        elapsed = time.monotonic() - started
    assert reply.text == "after the wait"
    assert len(server.requests) == 2
    assert elapsed >= 0.2


async def test_rate_limit_prefers_retry_after_ms_and_caps(mount: Mount) -> None:
    server = ScriptedServer(
        [rate_limited(30, retry_after_ms=150), rate_limited(3600), text("ok")], record=True
    )
    async with connected(server, mount, retry_after_cap=0.01) as model:
        started = time.monotonic()
        reply = await model.complete(USER)
        elapsed = time.monotonic() - started
    assert reply.text == "ok"
    assert len(server.requests) == 3
    assert elapsed < 5  # neither 30 s nor an hour: the cap held


async def test_rate_limit_exhausts_retries(mount: Mount) -> None:
    server = ScriptedServer([rate_limited(0.001)] * 3, record=True)
    async with connected(server, mount, max_retries=2) as model:
        with pytest.raises(ModelError) as caught:
            await model.complete(USER)
    error = caught.value
    assert not isinstance(error, StreamBroken)
    assert error.retryable and error.attempts == 3 and error.status_code == 429
    assert isinstance(error.__cause__, openai.RateLimitError)  # the SDK's mapping still runs
    assert len(server.requests) == 3


async def test_server_error_is_retried(mount: Mount) -> None:
    server = ScriptedServer([server_error(500), server_error(503), text("recovered")], record=True)
    async with connected(server, mount) as model:
        reply = await model.complete(USER)
    assert reply.text == "recovered"
    assert len(server.requests) == 3


async def test_server_error_exhausts_retries(mount: Mount) -> None:
    server = ScriptedServer([server_error(500)] * 4)
    async with connected(server, mount, max_retries=3) as model:
        with pytest.raises(ModelError) as caught:
            await model.complete(USER)
    assert caught.value.attempts == 4 and caught.value.retryable
    assert isinstance(caught.value.__cause__, openai.InternalServerError)
    assert "HTTP 500" in str(caught.value)


async def test_client_error_fails_at_once(mount: Mount) -> None:
    bad = HttpError(400, "context too long", "invalid_request_error", "context_length_exceeded")
    server = ScriptedServer([bad, text("never")], record=True)
    async with connected(server, mount) as model:
        with pytest.raises(ModelError) as caught:
            await model.complete(USER)
    error = caught.value
    assert not error.retryable and error.attempts == 1 and error.status_code == 400
    assert isinstance(error.__cause__, openai.BadRequestError)
    assert "context too long" in str(error)
    assert len(server.requests) == 1 and server.script.pending == 1


async def test_connection_refused_is_retried_then_fails() -> None:
    server = ScriptedServer()
    async with server.serve() as http:
        dead_url = http.base_url
    async with OpenAIChatModel(settings(dead_url, max_retries=2)) as model:
        with pytest.raises(ModelError) as caught:
            await model.complete(USER)
    assert caught.value.retryable and caught.value.attempts == 3
    assert isinstance(caught.value.__cause__, openai.APIConnectionError)
    assert "cannot reach" in str(caught.value)


async def test_timeout_before_headers_is_retried(mount: Mount) -> None:
    server = ScriptedServer([Stall(), text("late but fine")], record=True)
    async with connected(server, mount, timeout=0.1) as model:
        reply = await model.complete(USER)
    assert reply.text == "late but fine"
    assert len(server.requests) == 2


async def test_timeouts_exhaust_retries(mount: Mount) -> None:
    server = ScriptedServer([Stall(), Stall()])
    async with connected(server, mount, timeout=0.05, max_retries=1) as model:
        with pytest.raises(ModelError) as caught:
            await model.complete(USER)
    assert caught.value.retryable and caught.value.attempts == 2
    assert isinstance(caught.value.__cause__, openai.APITimeoutError)


async def test_stream_stalled_mid_way_is_broken(mount: Mount) -> None:
    server = ScriptedServer([text("a", "b", delay=0.3)])
    async with connected(server, mount, timeout=0.05, max_retries=0) as model:
        with pytest.raises(StreamBroken) as caught:
            await model.complete(USER)
    assert "stalled" in str(caught.value) and caught.value.attempts == 1


async def test_stream_cut_before_text_is_retried_without_duplicates(mount: Mount) -> None:
    cut = Reply(text=("never ", "seen"), cut_after=1)  # only the role chunk got through
    server = ScriptedServer([cut, text("whole ", "answer")], record=True)
    log = TextLog()
    async with connected(server, mount) as model:
        reply = await model.complete(USER, on_text=log)
    assert log.deltas == ["whole ", "answer"]
    assert reply.text == "whole answer"
    assert len(server.requests) == 2


async def test_stream_cut_after_text_raises_without_retry(mount: Mount) -> None:
    server = ScriptedServer(
        [Reply(text=("partial ", "answer"), cut_after=2), text("retry")], record=True
    )
    log = TextLog()
    async with connected(server, mount) as model:
        with pytest.raises(StreamBroken) as caught:
            await model.complete(USER, on_text=log)
    error = caught.value
    assert log.deltas == ["partial "]
    assert error.text_delivered and error.attempts == 1 and error.retryable
    assert len(server.requests) == 1


async def test_stream_cut_every_time_exhausts_retries(mount: Mount) -> None:
    cut = tool_calls(Call("search", pieces('{"q": "x"}', 2)), cut_after=3)
    server = ScriptedServer([cut] * 3)
    async with connected(server, mount, max_retries=2) as model:
        with pytest.raises(StreamBroken) as caught:
            await model.complete(USER)
    assert caught.value.attempts == 3 and not caught.value.text_delivered
    assert "dropped" in str(caught.value)


async def test_stream_ending_cleanly_without_done_is_broken(mount: Mount) -> None:
    server = ScriptedServer([Reply(text=("half",), cut_after=2, cut="eof")])
    async with connected(server, mount, max_retries=0) as model:
        with pytest.raises(StreamBroken) as caught:
            await model.complete(USER)
    assert "before the server said it was done" in str(caught.value)


async def test_loopback_reuses_one_connection() -> None:
    server = ScriptedServer([text("1"), rate_limited(0.001), text("2"), text("3")], record=True)
    async with server.serve() as http, OpenAIChatModel(settings(http.base_url)) as model:
        for _ in range(3):
            await model.complete(USER)
        assert http.connections == 1
    assert len(server.requests) == 4


async def test_injected_client_keeps_a_single_retry_policy() -> None:
    server = ScriptedServer([server_error()] * 10, record=True)
    sdk = openai.AsyncOpenAI(
        api_key="sk-test", base_url=IN_PROCESS_URL, http_client=server.http_client(), max_retries=5
    )
    async with sdk:
        model = OpenAIChatModel(settings(IN_PROCESS_URL, max_retries=1), client=sdk)
        with pytest.raises(ModelError):
            await model.complete(USER)
        await model.aclose()
        assert not sdk.is_closed()  # an injected AsyncOpenAI stays the caller's
    assert len(server.requests) == 2  # the client's 2 attempts, not 2 x 6


async def test_closed_model_refuses() -> None:
    server = ScriptedServer([text("unused")], record=True)
    model = OpenAIChatModel(settings(IN_PROCESS_URL), http_client=server.http_client())
    await model.aclose()
    with pytest.raises(ModelError, match="closed"):
        await model.complete(USER)
    assert server.requests == []


async def test_cancellation_propagates_and_closes(mount: Mount) -> None:
    server = ScriptedServer([Stall()], record=True)
    async with connected(server, mount) as model:
        # The server stalls for ever, so the deadline always passes; 0.1 s raced the request
        # itself on a loaded CI worker (cancelled before anything was sent: 0 requests).
        with anyio.move_on_after(2.0) as scope:
            await model.complete(USER)
        assert scope.cancelled_caught
    assert len(server.requests) == 1


async def test_extra_body_is_sent(mount: Mount) -> None:
    server = ScriptedServer([text("ok")], record=True)
    async with connected(server, mount, extra_body={"temperature": 0.2}) as model:
        await model.complete(USER)
    assert server.requests[0].body["temperature"] == 0.2


async def test_every_request_is_bounded_by_max_tokens(mount: Mount) -> None:
    server = ScriptedServer([text("ok"), text("ok")], record=True)
    async with connected(server, mount) as model:
        await model.complete(USER)
        await model.complete(USER, [TOOL])
    assert [r.body["max_tokens"] for r in server.requests] == [1024, 1024]
    for request in server.requests:  # nothing sent that the settings left to the server
        assert not {"temperature", "top_p", "parallel_tool_calls"} & set(request.body)


async def test_unbounded_when_max_tokens_is_none(mount: Mount) -> None:
    server = ScriptedServer([text("ok")], record=True)
    async with connected(server, mount, max_tokens=None) as model:
        await model.complete(USER)
    assert "max_tokens" not in server.requests[0].body


async def test_sampling_settings_are_sent(mount: Mount) -> None:
    server = ScriptedServer([text("ok"), text("ok")], record=True)
    chosen = {"temperature": 0.3, "top_p": 0.9, "max_tokens": 256, "parallel_tool_calls": False}
    async with connected(server, mount, **chosen) as model:
        await model.complete(USER, [TOOL], tool_choice="required")
        await model.complete(USER)
    with_tools, without = (r.body for r in server.requests)
    assert {key: with_tools[key] for key in chosen} == chosen
    assert with_tools["tool_choice"] == "required"
    assert "parallel_tool_calls" not in without and "tool_choice" not in without  # no tools
    assert (without["temperature"], without["top_p"], without["max_tokens"]) == (0.3, 0.9, 256)


async def test_tool_choice_is_sent_only_with_tools(mount: Mount) -> None:
    server = ScriptedServer([text("ok"), text("ok")], record=True)
    async with connected(server, mount) as model:
        await model.complete(USER, [TOOL], tool_choice="auto")
        await model.complete(USER, tool_choice="required")
    assert server.requests[0].body["tool_choice"] == "auto"
    assert "tool_choice" not in server.requests[1].body


async def test_extra_body_wins_over_the_settings(mount: Mount) -> None:
    server = ScriptedServer([text("ok")], record=True)
    extra = {"max_tokens": 64, "temperature": 1.5, "tool_choice": "none", "top_k": 20}
    async with connected(server, mount, temperature=0.1, extra_body=extra) as model:
        await model.complete(USER, [TOOL], tool_choice="required")
    body = server.requests[0].body
    assert {key: body[key] for key in extra} == extra


@pytest.mark.parametrize(
    "bad", [{"temperature": -0.1}, {"temperature": 2.5}, {"top_p": 0}, {"max_tokens": 0}]
)
def test_settings_refuse_out_of_range_values(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        ModelSettings(model="m", **bad)


async def test_a_reply_cut_at_max_tokens_says_length(mount: Mount) -> None:
    server = ScriptedServer([runaway("and again ", 40)])
    log = TextLog()
    async with connected(server, mount, max_tokens=100) as model:
        reply = await model.complete(USER, on_text=log)
    assert reply.finish_reason == "length"  # surfaced, not dressed up as a normal answer
    assert reply.text == "and again " * 40 and len(log.deltas) == 40


def test_settings_hide_the_key() -> None:
    configured = ModelSettings(model="m", api_key="sk-secret")
    assert "sk-secret" not in repr(configured)


async def test_error_event_mid_stream_is_broken_and_retried(mount: Mount) -> None:
    server = ScriptedServer([Reply(text=("x",), error_after=1), text("fine")], record=True)
    async with connected(server, mount) as model:
        reply = await model.complete(USER)
    assert reply.text == "fine"
    assert len(server.requests) == 2


async def test_error_event_after_text_is_not_retried(mount: Mount) -> None:
    server = ScriptedServer([Reply(text=("shown", "lost"), error_after=2), text("unused")])
    log = TextLog()
    async with connected(server, mount) as model:
        with pytest.raises(StreamBroken, match="error mid-stream") as caught:
            await model.complete(USER, on_text=log)
    assert log.deltas == ["shown"] and caught.value.text_delivered
    assert server.script.pending == 1


SHELL_OPENAI = {
    "OPENAI_API_KEY": "sk-from-the-shell",
    "OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
    "OPENAI_ADMIN_KEY": "admin-from-the-shell",
    "OPENAI_ORG_ID": "org-from-the-shell",
    "OPENAI_PROJECT_ID": "proj-from-the-shell",
}


async def test_a_model_built_from_settings_reads_no_environment(
    monkeypatch: pytest.MonkeyPatch, mount: Mount
) -> None:
    # Only baton.settings reads OPENAI_*: what reaches the endpoint is what ModelSettings said.
    for name, value in SHELL_OPENAI.items():
        monkeypatch.setenv(name, value)
    server = ScriptedServer([text("hi")], record=True)
    async with connected(server, mount, api_key=None) as model:
        await model.complete(USER)
    (request,) = server.requests
    assert "authorization" not in request.headers  # no key given: none sent, not the shell's
    assert not {"openai-organization", "openai-project"} & set(request.headers)


async def test_a_key_given_in_settings_is_the_one_sent(
    monkeypatch: pytest.MonkeyPatch, mount: Mount
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-the-shell")
    server = ScriptedServer([text("hi")], record=True)
    async with connected(server, mount, api_key="sk-given") as model:
        await model.complete(USER)
    assert server.requests[0].headers["authorization"] == "Bearer sk-given"


async def test_no_base_url_means_openai_s_endpoint_not_the_shell_s(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    async with OpenAIChatModel(ModelSettings(model="m")) as model:
        assert str(model._client.base_url) == f"{OPENAI_API_URL}/"
