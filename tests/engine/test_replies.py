"""What the loop makes of a reply: held-back text, calls written as text, retries that take text
back, replies cut at the output limit or stopped as runaways — through the real client."""

from __future__ import annotations

import json
from collections.abc import Sequence

from baton.bus.events import Event, GuardFired, ModelRetried, TextDelta, TextRetracted
from baton.engine import StopReason, ToolResult, tool
from baton.engine.spend import SpendLimits
from baton.llm.script import Call, Reply, parse_failure, pieces, runaway, text
from baton.llm.types import ToolCall
from tests.engine.helpers import harness, tool_messages, user
from tests.engine.test_hooks import CountingSpend


@tool
def echo(content: str) -> str:
    """Echo the content back."""
    return f"echo: {content}"


@tool
def inbox(name: str) -> ToolResult:
    """Send something, unless news came in first."""
    return ToolResult(f"not sent to {name}: read your news first", ends_turn=True)


def shown(deltas: list[TextDelta]) -> str:
    return "".join(delta.text for delta in deltas)


def seen(events: Sequence[Event]) -> str:
    """What a view shows in the end: the deltas, less the characters each retraction took back."""
    view = ""
    for event in events:
        if isinstance(event, TextDelta):
            view += event.text
        elif isinstance(event, TextRetracted):
            view = view[: len(view) - event.chars]
    return view


# -- held-back text ---------------------------------------------------------------------------


async def test_prose_after_leading_whitespace_streams_as_it_comes() -> None:
    seen: list[str] = []

    async def on_text(delta: str) -> None:
        seen.append(delta)

    async with harness([text("\n\n", "Hel", "lo ", "there")], [echo]) as h:
        result = await h.loop.run_turn(user("hi"), on_text=on_text)
    assert result.stop is StopReason.ANSWERED and result.text == "\n\nHello there"
    assert seen == ["\n\nHel", "lo ", "there"]  # whitespace held until prose was clear
    assert [d.text for d in h.log.of(TextDelta)] == seen


async def test_a_fenced_call_written_as_text_is_never_shown_and_runs() -> None:
    call = '{"name": "echo", "arguments": {"content": "hi"}}'
    script = [text("```json\n", call[:10], call[10:], "\n```"), text("Done: hi")]
    async with harness(script, [echo]) as h:
        history = user("go")
        result = await h.loop.run_turn(history)
    assert result.stop is StopReason.ANSWERED and result.rounds == 1
    assert shown(h.log.of(TextDelta)) == "Done: hi"
    assistant = h.requests[1].messages[2]  # the history as the next request sent it
    (recorded,) = assistant["tool_calls"]
    assert recorded["function"] == {"name": "echo", "arguments": '{"content": "hi"}'}
    assert recorded["id"].startswith("text_call_")
    assert not assistant.get("content")  # the JSON text is not kept as the message's text
    assert tool_messages(history) == {recorded["id"]: "echo: hi"}


async def test_bare_calls_one_per_line_and_in_an_array_all_run() -> None:
    lines = "\n".join(
        json.dumps({"name": "echo", "parameters": {"content": c}}) for c in ("a", "b")
    )
    array = json.dumps([{"function": {"name": "echo", "arguments": '{"content": "c"}'}}])
    script = [text(lines), text(array), text("done")]
    async with harness(script, [echo]) as h:
        history = user("go")
        result = await h.loop.run_turn(history)
    assert result.rounds == 2
    assert sorted(tool_messages(history).values()) == ["echo: a", "echo: b", "echo: c"]
    assert h.log.of(TextRetracted) == []  # nothing was shown, so nothing is taken back


async def test_a_code_fence_that_is_not_a_call_is_shown_once_clear() -> None:
    script = [text("```python\n", "print(1)\n", "```")]
    async with harness(script, [echo]) as h:
        result = await h.loop.run_turn(user("code"))
    assert result.stop is StopReason.ANSWERED
    deltas = [d.text for d in h.log.of(TextDelta)]
    assert deltas == ["```python\nprint(1)\n", "```"]  # released at the first non-JSON line


async def test_json_that_is_not_a_call_of_an_offered_tool_stays_text() -> None:
    reply = '{"name": "nope", "arguments": {"x": 1}}'
    async with harness([text(reply[:7], reply[7:])], [echo]) as h:
        result = await h.loop.run_turn(user("go"))
    assert result.stop is StopReason.ANSWERED and result.rounds == 0
    assert [d.text for d in h.log.of(TextDelta)] == [reply]  # held, then shown in one piece


async def test_text_calls_are_not_parsed_when_no_tools_are_offered() -> None:
    reply = '{"name": "echo", "arguments": {"content": "x"}}'
    async with harness([text(reply)]) as h:
        result = await h.loop.run_turn(user("go"))
    assert result.stop is StopReason.ANSWERED and result.text == reply


async def test_a_profile_name_written_as_text_reaches_the_rewriter() -> None:
    def rewrite(call: ToolCall) -> ToolCall | None:
        if call.name != "painter":
            return None
        task = json.loads(call.arguments)["task"]
        return ToolCall(call.id, "echo", json.dumps({"content": task}))

    reply = 'I will ask the painter.\n<tool_call>{"name": "painter", "task": "a fox"}</tool_call>'
    async with harness([text(reply), text("ok")], [echo], call_rewriter=rewrite) as h:
        history = user("paint")
        result = await h.loop.run_turn(history)
    assert result.rounds == 1 and list(tool_messages(history).values()) == ["echo: a fox"]
    assert history[2].get("content") == "I will ask the painter."
    # the prose streamed as it came; then the call after it was taken back, the prose kept
    prose = "I will ask the painter."
    assert [r.chars for r in h.log.of(TextRetracted)] == [len(reply) - len(prose)]
    assert shown(h.log.of(TextDelta)) == reply + "ok"
    assert seen(h.log.events) == prose + "ok"


async def test_prose_before_a_fenced_call_stays_shown_and_only_the_call_is_taken_back() -> None:
    call = '{"name": "echo", "arguments": {"content": "hi"}}'
    reply = ["Sure, I will echo it.\n", "```json\n", call, "\n```"]
    async with harness([text(*reply), text(" Done.")], [echo]) as h:
        history = user("go")
        result = await h.loop.run_turn(history)
    assert result.rounds == 1 and list(tool_messages(history).values()) == ["echo: hi"]
    assert history[2].get("content") == "Sure, I will echo it."
    assert seen(h.log.events) == "Sure, I will echo it. Done."
    kept = len("Sure, I will echo it.")
    assert [r.chars for r in h.log.of(TextRetracted)] == [len("".join(reply)) - kept]


async def test_prose_after_a_held_call_is_shown_once_the_call_is_read() -> None:
    call = '{"name": "echo", "arguments": {"content": "hi"}}'
    async with harness([text(call, "\nI asked echo."), text(" Done.")], [echo]) as h:
        history = user("go")
        await h.loop.run_turn(history)
    assert history[2].get("content") == "I asked echo."
    assert h.log.of(TextRetracted) == []  # the call was held, never shown
    assert shown(h.log.of(TextDelta)) == "I asked echo. Done."


async def test_prose_on_both_sides_of_a_call_is_shown_anew_without_the_call() -> None:
    call = '{"name": "echo", "arguments": {"content": "hi"}}'
    reply = f"First this. {call} Then that."
    async with harness([text(reply), text(" Done.")], [echo]) as h:
        history = user("go")
        await h.loop.run_turn(history)
    rest = history[2].get("content")
    assert rest == "First this.  Then that."
    assert [r.chars for r in h.log.of(TextRetracted)] == [len(reply)]
    assert seen(h.log.events) == f"{rest} Done."


# -- retries ----------------------------------------------------------------------------------


async def test_a_stream_broken_after_shown_text_is_retracted_and_retried() -> None:
    script = [Reply(text=["Hello ", "wor", "ld"], error_after=3), text("Hello world")]
    async with harness(script, [echo], retries=1) as h:
        result = await h.loop.run_turn(user("hi"))
    assert result.stop is StopReason.ANSWERED and result.text == "Hello world"
    assert result.retries == 1
    first_try = shown(h.log.of(TextDelta)).removesuffix("Hello world")
    assert first_try in ("Hello ", "Hello wor")  # what the server streamed before its error
    assert [r.chars for r in h.log.of(TextRetracted)] == [len(first_try)]
    (retried,) = h.log.of(ModelRetried)
    assert retried.attempt == 1 and retried.model == "scripted"
    types = h.log.types
    last_delta = len(types) - 1 - types[::-1].index("text.delta")
    assert types.index("text.retracted") < last_delta  # taken back before the retry streams


# -- bounded output ---------------------------------------------------------------------------


async def test_a_reply_cut_at_the_length_limit_is_taken_back_and_asked_again_shorter() -> None:
    script = [Reply(text=["A very long ", "answer that"], finish_reason="length"), text("Short.")]
    async with harness(script, [echo]) as h:
        history = user("explain")
        result = await h.loop.run_turn(history)
    assert result.stop is StopReason.ANSWERED and result.text == "Short."
    assert [g.outcome for g in h.log.of(GuardFired)] == ["length"]
    assert [r.chars for r in h.log.of(TextRetracted)] == [len("A very long answer that")]
    note = h.requests[1].messages[-1]
    assert note["role"] == "user" and "much shorter" in note["content"]
    assert [m["role"] for m in history] == ["system", "user", "assistant"]  # no note, no cut text


async def test_a_reply_cut_twice_ends_the_turn_as_truncated() -> None:
    script = [
        Reply(text="first cut", finish_reason="length"),
        Reply(text="second cut", finish_reason="length"),
    ]
    async with harness(script, [echo]) as h:
        history = user("explain")
        result = await h.loop.run_turn(history)
    assert result.stop is StopReason.TRUNCATED and result.text == "second cut"
    assert result.finish_reason == "length" and len(h.requests) == 2
    assert history[-1] == {"role": "assistant", "content": "second cut"}


async def test_a_runaway_reply_is_stopped_early_and_asked_again() -> None:
    loop_text = "I will paint the fox now. " * 400  # 10,400 characters if nobody stops it
    spend = CountingSpend(SpendLimits(max_model_calls=5))
    script = [text(*pieces(loop_text, 16)), text("Here is the fox.")]
    async with harness(script, [echo], spend=spend) as h:
        result = await h.loop.run_turn(user("paint"))
    assert result.stop is StopReason.ANSWERED and result.text == "Here is the fox."
    assert [g.outcome for g in h.log.of(GuardFired)] == ["runaway"]
    (retracted,) = h.log.of(TextRetracted)
    assert 600 <= retracted.chars < 1_500  # stopped soon after the loop was clear
    assert spend.calls == 2 and spend.tokens > retracted.chars // 4  # the cut call is estimated


async def test_a_reply_that_runs_on_in_blank_lines_ends_where_they_began() -> None:
    # a small model that does not sample its end-of-turn token: a whole answer, then line breaks
    # until the output limit (a minute of them on a 1.5B model); no repeated unit survives the
    # whitespace collapsing of the repetition check, so the run is counted on its own
    script = [text("Yes: lists keep their order and can be changed.", *["\n"] * 2_000)]
    async with harness(script, [echo]) as h:
        result = await h.loop.run_turn(user("Are lists ordered?"))
    assert result.stop is StopReason.ANSWERED and len(h.requests) == 1
    assert result.text == "Yes: lists keep their order and can be changed."
    assert h.log.of(GuardFired) == []  # not cut: it ended
    assert seen(h.log.events) == result.text  # shown line breaks: taken back


async def test_a_call_written_as_text_then_blank_lines_runs_without_a_second_request() -> None:
    call = '{"name": "echo", "arguments": {"content": "hi"}}'
    script = [text("```json\n", call, "\n```", *["\n"] * 100), text("Done: hi")]
    async with harness(script, [echo]) as h:
        result = await h.loop.run_turn(user("go"))
    assert result.stop is StopReason.ANSWERED and result.rounds == 1
    assert len(h.requests) == 2 and h.log.of(GuardFired) == []
    assert seen(h.log.events) == "Done: hi"


async def test_a_call_cut_off_mid_way_then_blank_lines_is_a_runaway_not_an_answer() -> None:
    # held text that is neither prose nor a call that parses (a call never closed, a lone fence)
    # did not end: it is cut and asked again, never taken as the answer
    unfinished = '```json\n{"name": "echo", "arguments": {"content": "a poem'
    script = [text(unfinished, *["\n"] * 100), text("Here you are.")]
    async with harness(script, [echo]) as h:
        result = await h.loop.run_turn(user("hi"))
    assert result.stop is StopReason.ANSWERED and result.text == "Here you are."
    assert [g.outcome for g in h.log.of(GuardFired)] == ["runaway"]
    assert seen(h.log.events) == "Here you are."


async def test_a_call_whose_arguments_loop_is_stopped_early_and_asked_again() -> None:
    # a 1.5B lead's answer call whose media URL grew one path segment at a time to max_tokens;
    # the arguments of a call that shows none loop just the same
    looping = '{"content": "https://example.com/' + "content/dam/australia/" * 300
    script = [Reply(calls=[Call("echo", pieces(looping, 7))], finish_reason="length"),
              text("Canberra.")]  # fmt: skip
    async with harness(script, [echo]) as h:
        result = await h.loop.run_turn(user("capital of Australia?"))
    assert result.stop is StopReason.ANSWERED and result.text == "Canberra."
    assert [g.outcome for g in h.log.of(GuardFired)] == ["runaway"]
    assert len(h.requests) == 2 and result.rounds == 0


async def test_a_reply_that_loops_over_whole_calls_runs_each_call_once() -> None:
    # a 1.5B painter asked for three pictures streamed three calls, then the same two sends
    # again and again until the output limit: what it meant is each call once, not a retry
    # that apologises instead (what the retry got)
    meant = [Call("echo", json.dumps({"content": word})) for word in ("fox", "heron", "cat")]
    loop = [Call("echo", json.dumps({"content": "results"})), Call("echo", '{"content": "again"}')]
    script = [
        Reply(calls=[*meant, *loop * 40], finish_reason="length"),
        text("Painted: fox, heron, cat."),
    ]
    async with harness(script, [echo]) as h:
        history = user("three pictures")
        result = await h.loop.run_turn(history)
    assert result.stop is StopReason.ANSWERED and result.text == "Painted: fox, heron, cat."
    assert [g.outcome for g in h.log.of(GuardFired)] == ["runaway"]
    ran = list(tool_messages(history).values())
    assert ran[:3] == ["echo: fox", "echo: heron", "echo: cat"]
    assert len(ran) == len(set(ran)) <= 5  # each once: the loop's own calls at most once too
    assert len(h.requests) == 2 and result.rounds == 1
    assert "much shorter" not in str(h.requests[1].messages[-1]["content"])


@tool(terminal=True)
def finish(text: str) -> str:
    """Give the final answer."""
    return "finished"


async def test_a_reply_that_loops_runs_its_calls_up_to_its_first_terminal_one() -> None:
    # a 1.5B lead looped over answer calls and sends that parroted a send's receipt: it meant to
    # stop at its first answer, and what follows is the loop
    answer, aside = Call("finish", '{"text": "done"}'), Call("echo", '{"content": "then"}')
    script = [Reply(calls=[Call("echo", '{"content": "first"}'), answer, aside] * 40)]
    async with harness(script, [echo, finish]) as h:
        history = user("go")
        result = await h.loop.run_turn(history)
    assert result.stop is StopReason.TERMINAL and len(h.requests) == 1
    assert list(tool_messages(history).values()) == ["echo: first", "finished"]


async def test_calls_written_as_text_then_the_same_again_run_once_each() -> None:
    one, two = (json.dumps({"name": "echo", "arguments": {"content": w}}) for w in ("a", "b"))
    script = [text("```json\n", one, "\n", *[two + "\n"] * 60), text("Done.")]
    async with harness(script, [echo]) as h:
        history = user("go")
        result = await h.loop.run_turn(history)
    assert result.stop is StopReason.ANSWERED and result.text == "Done."
    assert sorted(tool_messages(history).values()) == ["echo: a", "echo: b"]
    assert seen(h.log.events) == "Done."


async def test_blank_lines_with_nothing_before_them_are_a_runaway_asked_again() -> None:
    script = [text(*["\n"] * 2_000), text("Here you are.")]
    async with harness(script, [echo]) as h:
        result = await h.loop.run_turn(user("hi"))
    assert result.stop is StopReason.ANSWERED and result.text == "Here you are."
    assert [g.outcome for g in h.log.of(GuardFired)] == ["runaway"]


async def test_a_call_with_native_tool_calls_drops_a_held_fence() -> None:
    script = [Reply(text="```", calls=[Call("echo", '{"content": "x"}')]), text("ok")]
    async with harness(script, [echo]) as h:
        await h.loop.run_turn(user("go"))
    assert shown(h.log.of(TextDelta)) == "ok"


async def test_tool_calls_stay_as_they_are_with_tool_choice_none() -> None:
    reply = '{"name": "echo", "arguments": {"content": "x"}}'
    async with harness([text(reply)], [echo], tool_choice="none") as h:
        result = await h.loop.run_turn(user("go"))
    assert result.rounds == 0 and result.text == reply


async def test_a_fence_the_server_then_rejects_is_never_shown_and_the_retry_answers() -> None:
    script = [parse_failure("```", "json\n"), text("Here you are.")]
    async with harness(script, [echo], retries=1) as h:
        result = await h.loop.run_turn(user("hi"))
    assert result.stop is StopReason.ANSWERED and result.text == "Here you are."
    assert result.retries == 1 and len(h.log.of(ModelRetried)) == 1
    assert shown(h.log.of(TextDelta)) == "Here you are."  # the fence was held, never shown
    assert h.log.of(TextRetracted) == []  # so there was nothing to take back


async def test_a_runaway_cut_at_the_length_limit_then_cut_again_is_truncated() -> None:
    script = [runaway("the fox ", 20), runaway("the fox ", 20)]
    async with harness(script, [echo]) as h:
        result = await h.loop.run_turn(user("paint"))
    assert result.stop is StopReason.TRUNCATED and result.text == "the fox " * 20
    assert [g.outcome for g in h.log.of(GuardFired)] == ["length"]
    assert "much shorter" in h.requests[1].messages[-1]["content"]


async def test_a_tool_that_says_news_is_waiting_ends_the_turn_after_its_round() -> None:
    script = [Reply(calls=[Call("echo", '{"content": "a"}'), Call("inbox", '{"name": "b"}')])]
    async with harness(script, [echo, inbox]) as h:
        history = user("go")
        result = await h.loop.run_turn(history)
    assert result.stop is StopReason.NEWS and result.rounds == 1 and len(h.requests) == 1
    # every call of the round ran and was answered: the history is valid for the next turn
    assert sorted(tool_messages(history).values()) == [
        "echo: a",
        "not sent to b: read your news first",
    ]
