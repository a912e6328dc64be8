"""The token budget: older tool bodies go first, then older turns; the system prompt and the
newest user message always stay."""

from __future__ import annotations

from typing import Any

import pytest

from baton.engine import TokenBudget
from baton.engine.budget import fit, message_chars
from baton.llm.types import Message


def round_trip(call_id: str, body: str) -> list[Message]:
    return [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": call_id, "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": call_id, "content": body},
    ]


def history(turns: int, body: int) -> list[Message]:
    out: list[Message] = [{"role": "system", "content": "SYSTEM"}]
    for t in range(turns):
        out.append({"role": "user", "content": f"question {t}"})
        out.extend(round_trip(f"c{t}a", "x" * body))
        out.extend(round_trip(f"c{t}b", "y" * body))
        out.append({"role": "assistant", "content": f"answer {t}"})
    return out


def test_fits_already_changes_nothing() -> None:
    messages = history(2, 100)
    before = [dict(m) for m in messages]
    assert fit(messages, len(messages) - 6, TokenBudget(max_tokens=100_000)) is None
    assert [dict(m) for m in messages] == before


def test_older_tool_bodies_are_dropped_first() -> None:
    messages = history(2, 4_000)
    newest_user = 7
    assert messages[newest_user]["content"] == "question 1"
    total = sum(message_chars(m) for m in messages)
    budget = TokenBudget(max_tokens=(total - 7_000) // 4 + 100, reserve_tokens=100)
    report = fit(messages, newest_user, budget)
    assert report is not None and report.messages_dropped == 0
    assert report.bodies_dropped == 2 and report.chars_after <= budget.limit_chars
    bodies = [m["content"] for m in messages if m["role"] == "tool"]
    assert [str(b).startswith("[older tool output removed") for b in bodies] == [
        True,
        True,
        False,
        False,
    ]
    assert len(messages) == 13


def test_older_turns_are_dropped_whole_when_bodies_are_not_enough() -> None:
    messages = history(3, 2_000)
    newest_user = next(i for i, m in enumerate(messages) if m.get("content") == "question 2")
    budget = TokenBudget(max_tokens=700, reserve_tokens=100)
    report = fit(messages, newest_user, budget)
    assert report is not None and report.messages_dropped == 12
    assert report.bodies_dropped == 5 and report.chars_after <= budget.limit_chars
    assert messages[0] == {"role": "system", "content": "SYSTEM"}
    assert messages[1] == {"role": "user", "content": "question 2"}
    assert report.keep_from == 1
    # every tool message still follows its assistant message
    ids: set[str] = set()
    for message in messages:
        calls: Any = message.get("tool_calls") or []
        ids.update(call["id"] for call in calls)
        if message["role"] == "tool":
            assert message["tool_call_id"] in ids


def test_the_latest_round_and_newest_user_message_are_never_touched() -> None:
    messages: list[Message] = [
        {"role": "system", "content": "S" * 50},
        {"role": "user", "content": "U" * 9_000},
        *round_trip("only", "z" * 9_000),
    ]
    report = fit(messages, 1, TokenBudget(max_tokens=500, reserve_tokens=100))
    assert report is not None and report.bodies_dropped == 0 and report.messages_dropped == 0
    assert messages[1]["content"] == "U" * 9_000 and messages[3]["content"] == "z" * 9_000


def test_images_and_tool_calls_count() -> None:
    image: Message = {
        "role": "user",
        "content": [
            {"type": "text", "text": "look"},
            {"type": "image_url", "image_url": {"url": "https://x/y.png"}},
        ],
    }
    assert message_chars(image) > 3_000
    assert message_chars(round_trip("a", "")[0]) > message_chars(
        {"role": "assistant", "content": ""}
    )
    with pytest.raises(ValueError):
        TokenBudget(max_tokens=10, reserve_tokens=10)
