"""The terminal renderers show what the model's trouble did: retries, text taken back, the spend
against the budget, and the answer's check (events folded in ``baton.session.view``)."""

from __future__ import annotations

import io
import json

import pytest
from rich.console import Console

from baton.bus.events import (
    RETRACTED_DEADLINE,
    RETRACTED_SENT_BACK,
    AnswerChecked,
    BudgetUpdated,
    Event,
    ModelRetried,
    RoundStarted,
    SessionFinished,
    SessionStarted,
    TextDelta,
    TextRetracted,
)
from baton.cli.render import JsonRenderer, PlainRenderer
from baton.cli.render_live import LiveRenderer

S = "s-render"
LEAD = "lead"
FOX = "file:///media/s-render/fox.png"
FAKE = "https://example.com/fox.png"


def plain(events: list[Event]) -> list[str]:
    out = io.StringIO()
    renderer = PlainRenderer(out)
    for event in events:
        renderer.show(event)
    renderer.close()
    return out.getvalue().splitlines()


def budget(calls: int, tokens: int = 0, max_calls: int | None = 10) -> BudgetUpdated:
    return BudgetUpdated(session=S, agent=LEAD, calls=calls, tokens=tokens, max_calls=max_calls)


def test_text_taken_back_before_its_line_was_written_never_shows() -> None:
    lines = plain([
        TextDelta(session=S, agent=LEAD, text="Let me ask.\n```js"),
        TextRetracted(session=S, agent=LEAD, chars=5),
        TextDelta(session=S, agent=LEAD, text="Asking the painter."),
        RoundStarted(session=S, agent=LEAD, round=2),
    ])  # fmt: skip
    assert lines == ["Let me ask.", "Asking the painter."]


def test_text_taken_back_after_it_was_written_is_flagged() -> None:
    lines = plain([
        TextDelta(session=S, agent=LEAD, text="First line\nsec"),
        TextRetracted(session=S, agent=LEAD, chars=14),
        TextDelta(session=S, agent=LEAD, text="Again.\n"),
    ])  # fmt: skip
    assert lines == [
        "First line",
        "! lead: disregard the last 11 character(s) above: that reply failed and is being retried",
        "Again.",
    ]


@pytest.mark.parametrize(
    ("why", "said"),
    [
        (RETRACTED_SENT_BACK, "that reply was not the answer: sent back, asked again or routed"),
        (RETRACTED_DEADLINE, "the session deadline cut that reply; a last answer follows"),
    ],
)
def test_a_retraction_with_a_why_says_it(why: str, said: str) -> None:
    lines = plain([
        TextDelta(session=S, agent=LEAD, text="Sorry, I cannot paint.\nOk"),
        TextRetracted(session=S, agent=LEAD, chars=25, why=why),
    ])  # fmt: skip
    assert lines == [
        "Sorry, I cannot paint.",
        f"! lead: disregard the last 23 character(s) above: {said}",
    ]


def test_a_retraction_past_the_current_round_takes_back_only_that_round() -> None:
    lines = plain([
        TextDelta(session=S, agent=LEAD, text="kept\n"),
        RoundStarted(session=S, agent=LEAD, round=2),
        TextDelta(session=S, agent=LEAD, text="cut"),
        TextRetracted(session=S, agent=LEAD, chars=50),
    ])  # fmt: skip
    assert lines == ["kept"]


def test_a_retry_notice_before_the_retraction_does_not_get_the_text_written() -> None:
    lines = plain([
        TextDelta(session=S, agent=LEAD, text="```json"),
        ModelRetried(session=S, agent=LEAD, attempt=1, reason="parse error", delay_s=0.0),
        TextRetracted(session=S, agent=LEAD, chars=7),
        TextDelta(session=S, agent=LEAD, text="Done."),
    ])  # fmt: skip
    assert lines == [
        "! lead: model request failed (attempt 1: parse error); retrying in 0.0 s",
        "Done.",
        "model retries: 1",
    ]


def test_a_retry_is_a_line_with_its_attempt_reason_and_delay() -> None:
    retried = ModelRetried(session=S, agent="painter", attempt=2, reason="HTTP 500", delay_s=1.25)
    lines = plain([retried])
    assert lines == [
        "! painter: model request failed (attempt 2: HTTP 500); retrying in 1.2 s",
        "model retries: 1",
    ]


def test_the_budget_gets_a_line_per_tenth_of_its_cap_not_per_call() -> None:
    lines = plain([budget(n, max_calls=100) for n in range(1, 26)])
    assert [line for line in lines if line.startswith("· budget")] == [
        "· budget: 1/100 model calls, 0 tokens",  # the first report
        "· budget: 10/100 model calls, 0 tokens",  # then each new tenth of the cap
        "· budget: 20/100 model calls, 0 tokens",
    ]
    assert lines[-1] == "spent: 25/100 model calls, 0 tokens"


def test_the_fuller_cap_sets_the_pace_and_a_spent_budget_is_shown() -> None:
    lines = plain([
        BudgetUpdated(session=S, agent=LEAD, calls=n, tokens=n * 1_500, max_calls=100,
                      max_tokens=10_000)
        for n in (1, 2, 3, 7)
    ])  # fmt: skip
    assert lines == [
        "· budget: 1/100 model calls, 1,500/10,000 tokens",
        "· budget: 2/100 model calls, 3,000/10,000 tokens",
        "· budget: 3/100 model calls, 4,500/10,000 tokens",
        "· budget: 7/100 model calls, 10,500/10,000 tokens",
        "spent: 7/100 model calls, 10,500/10,000 tokens",
    ]


def test_without_caps_the_spend_is_only_summed_up_at_the_end() -> None:
    lines = plain([budget(n, n * 10, max_calls=None) for n in (1, 2, 3)])
    assert lines == ["· budget: 1 model calls, 10 tokens", "spent: 3 model calls, 30 tokens"]


def test_the_answers_check_and_the_summary_name_invented_urls_and_keep_media_last() -> None:
    lines = plain([
        SessionStarted(session=S, agent=LEAD, task="paint a fox", model="m"),
        AnswerChecked(session=S, agent=LEAD, missing_media=[FOX], missing_items=["a heron"],
                      invented_urls=[FAKE]),
        SessionFinished(session=S, agent=LEAD, status="incomplete", answer=f"see {FAKE}",
                        media_urls=[FOX], invented_urls=[FAKE]),
    ])  # fmt: skip
    assert lines[1] == (
        "! answer checked: 1 media URL(s) the answer left out were appended; "
        "declared item(s) without a result: a heron; "
        f"it cites URL(s) no tool produced: {FAKE}"
    )
    assert lines[2:] == [
        f"── session {S} incomplete",
        "invented (no tool produced these):",
        f"  {FAKE}",
        "media:",
        f"  {FOX}",
    ]


def test_json_lines_carry_the_new_events_as_they_are() -> None:
    out = io.StringIO()
    renderer = JsonRenderer(out)
    renderer.show(TextRetracted(session=S, agent=LEAD, chars=3))
    renderer.show(budget(4, 100))
    renderer.close()
    first, second = (json.loads(line) for line in out.getvalue().splitlines())
    assert (first["type"], first["chars"]) == ("text.retracted", 3)
    assert (second["type"], second["calls"], second["max_calls"]) == ("budget.updated", 4, 10)
    assert renderer.view.budget is not None and renderer.view.budget.calls == 4


def test_the_live_view_shows_the_budget_retries_and_the_check() -> None:
    screen = io.StringIO()
    console = Console(file=screen, width=120, force_terminal=False, color_system=None)
    live = LiveRenderer(console)
    try:
        events: list[Event] = [
            SessionStarted(session=S, agent=LEAD, task="paint a fox", model="m"),
            TextDelta(session=S, agent=LEAD, text="Asking the painter.```json"),
            TextRetracted(session=S, agent=LEAD, chars=7),
            ModelRetried(session=S, agent=LEAD, attempt=1, reason="parse error", delay_s=0.5),
            budget(7, 2_000),
            AnswerChecked(session=S, agent=LEAD, invented_urls=[FAKE]),
        ]
        for event in events:
            live.show(event)
        frame = io.StringIO()
        Console(file=frame, width=120, color_system=None).print(live)
    finally:
        live.close()
    text = frame.getvalue()
    assert "Asking the painter." in text and "```json" not in text
    assert "budget: 7/10 model calls, 2,000 tokens" in text
    assert "model retries: 1 · last lead: model request failed (attempt 1: parse error)" in text
    assert f"it cites URL(s) no tool produced: {FAKE}" in text
