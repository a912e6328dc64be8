"""The stream normaliser and the SSE decoder, on raw chunk dicts and bytes (no network)."""

from __future__ import annotations

from typing import Any

from baton.llm.assemble import StreamAssembler
from baton.llm.client import SseDecoder


def chunk(delta: dict[str, Any], finish: str | None = None, index: int = 0) -> dict[str, Any]:
    return {"choices": [{"index": index, "delta": delta, "finish_reason": finish}]}


def calls(*entries: dict[str, Any]) -> dict[str, Any]:
    return chunk({"tool_calls": list(entries)})


def assemble(*chunks: dict[str, Any]) -> StreamAssembler:
    assembler = StreamAssembler()
    for item in chunks:
        assembler.feed(item)
    return assembler


def test_text_deltas_are_returned_and_joined() -> None:
    assembler = StreamAssembler()
    got = [assembler.feed(chunk({"role": "assistant", "content": ""}))]
    got += [assembler.feed(chunk({"content": part})) for part in ("a", "b")]
    got.append(assembler.feed(chunk({}, "stop")))
    reply = assembler.reply()
    assert got == ["", "a", "b", ""]
    assert (reply.text, reply.finish_reason, reply.usage) == ("ab", "stop", None)


def test_arguments_join_by_index_even_interleaved() -> None:
    reply = assemble(
        calls({"index": 0, "id": "c0", "function": {"name": "a", "arguments": ""}}),
        calls({"index": 1, "id": "c1", "function": {"name": "b", "arguments": '{"y"'}}),
        calls({"index": 0, "function": {"arguments": '{"x": 1'}}),
        calls({"index": 1, "function": {"arguments": ": 2}"}}),
        calls({"index": 0, "function": {"arguments": "}"}}),
    ).reply()
    assert [(c.id, c.name, c.arguments) for c in reply.tool_calls] == [
        ("c0", "a", '{"x": 1}'),
        ("c1", "b", '{"y": 2}'),
    ]


def test_missing_id_is_synthesised_and_late_id_adopted() -> None:
    reply = assemble(
        calls({"index": 0, "function": {"name": "a", "arguments": "{}"}}),
        calls({"index": 1, "function": {"name": "b"}}),
        calls({"index": 1, "id": "late", "function": {"arguments": "{}"}}),
    ).reply()
    first, second = reply.tool_calls
    assert first.id.startswith("call_") and len(first.id) == 29
    assert second.id == "late"


def test_repeated_id_and_name_are_not_concatenated() -> None:
    entry = {"index": 0, "id": "c", "type": "function"}
    reply = assemble(
        calls({**entry, "function": {"name": "paint", "arguments": '{"p":'}}),
        calls({**entry, "function": {"name": "paint", "arguments": '"x"}'}}),
    ).reply()
    assert [(c.id, c.name, c.arguments) for c in reply.tool_calls] == [("c", "paint", '{"p":"x"}')]


def test_reused_index_with_new_id_opens_a_slot() -> None:
    reply = assemble(
        calls({"index": 0, "id": "one", "function": {"name": "a", "arguments": '{"n":'}}),
        calls({"index": 0, "function": {"arguments": "1}"}}),
        calls({"index": 0, "id": "two", "function": {"name": "b", "arguments": '{"n":'}}),
        calls({"index": 0, "function": {"arguments": "2}"}}),
    ).reply()
    assert [(c.id, c.name, c.arguments) for c in reply.tool_calls] == [
        ("one", "a", '{"n":1}'),
        ("two", "b", '{"n":2}'),
    ]


def test_missing_index_follows_ids() -> None:
    reply = assemble(
        calls({"id": "one", "function": {"name": "a", "arguments": "{"}}),
        calls({"function": {"arguments": "}"}}),
        calls({"id": "two", "function": {"name": "b", "arguments": "{}"}}),
    ).reply()
    assert [(c.id, c.arguments) for c in reply.tool_calls] == [("one", "{}"), ("two", "{}")]


def test_empty_and_object_arguments() -> None:
    reply = assemble(
        calls({"index": 0, "id": "e", "function": {"name": "a", "arguments": ""}}),
        calls({"index": 1, "id": "w", "function": {"name": "b", "arguments": "  "}}),
        calls({"index": 2, "id": "o", "function": {"name": "c", "arguments": {"k": 1}}}),
    ).reply()
    assert [c.arguments for c in reply.tool_calls] == ["{}", "{}", '{"k": 1}']


def test_malformed_arguments_pass_through_untouched() -> None:
    reply = assemble(
        calls({"index": 0, "id": "m", "function": {"name": "a", "arguments": ' {"a": [1, '}}),
    ).reply()
    assert reply.tool_calls[0].arguments == ' {"a": [1, '


def test_usage_chunk_and_other_choices() -> None:
    assembler = assemble(
        chunk({"content": "kept"}),
        chunk({"content": "ignored"}, index=1),
        {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}},
    )
    reply = assembler.reply()
    assert reply.text == "kept"
    assert reply.usage is not None and reply.usage.total_tokens == 7


def test_sse_decoder_handles_arbitrary_splits() -> None:
    stream = (
        b': keep-alive comment\n\ndata: {"a":1}\r\n\r\nevent: x\ndata: line1\ndata: line2\n\n'
        b"data:[DONE]\n\n"
    )
    for size in (1, 2, 7, len(stream)):
        decoder = SseDecoder()
        out: list[bytes] = []
        for start in range(0, len(stream), size):
            out += decoder.feed(stream[start : start + size])
        out += decoder.flush()
        assert out == [b'{"a":1}', b"line1\nline2", b"[DONE]"], size


def test_sse_decoder_flushes_an_unterminated_event() -> None:
    decoder = SseDecoder()
    assert decoder.feed(b'data: {"a":1}') == []
    assert decoder.flush() == [b'{"a":1}']
