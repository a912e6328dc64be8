"""``baton watch`` (in-process, plain lines as on a pipe) shows what the model's
trouble did in a session logged on Redis: retries, the spend against the budget, the answer's
check, and none of the text a failed reply took back."""

from __future__ import annotations

import anyio

from baton.bus.events import (
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
from baton.bus.redis import RedisBus
from baton.testing import RedisServer
from tests.cli.helpers import invoke_baton

SESSION = "s-watch-trouble"
LEAD = "lead"
FAKE = "https://example.com/fox.png"


async def _log(url: str, events: list[Event]) -> None:
    async with RedisBus(url) as bus:
        for event in events:
            await bus.log.emit(event)


def test_watch_shows_retries_the_budget_and_the_check_without_the_retracted_text(
    redis_server: RedisServer, env: dict[str, str]
) -> None:
    events: list[Event] = [
        SessionStarted(session=SESSION, agent=LEAD, task="paint a fox", model="m"),
        RoundStarted(session=SESSION, agent=LEAD, round=1),
        TextDelta(session=SESSION, agent=LEAD, text="I will ask the brush"),  # the stream broke
        TextRetracted(session=SESSION, agent=LEAD, chars=20),  # as the client does: first
        ModelRetried(session=SESSION, agent=LEAD, attempt=1, reason="parse error", delay_s=0.5),
        BudgetUpdated(session=SESSION, agent=LEAD, calls=2, tokens=700, max_calls=2),
        TextDelta(session=SESSION, agent=LEAD, text=f"Here: {FAKE}\n"),
        AnswerChecked(session=SESSION, agent=LEAD, invented_urls=[FAKE]),
        SessionFinished(session=SESSION, agent=LEAD, status="incomplete",
                        answer=f"Here: {FAKE}", invented_urls=[FAKE]),
    ]  # fmt: skip
    anyio.run(_log, redis_server.url, events)
    code, out, err = invoke_baton(
        "watch", SESSION, "--from-start", "--bus", redis_server.url, env=env
    )
    assert code == 0, err
    lines = out.splitlines()
    assert "brush" not in out
    assert lines[1:] == [
        "! lead: model request failed (attempt 1: parse error); retrying in 0.5 s",
        "· budget: 2/2 model calls, 700 tokens",
        f"Here: {FAKE}",
        f"! answer checked: it cites URL(s) no tool produced: {FAKE}",
        f"── session {SESSION} incomplete",
        "spent: 2/2 model calls, 700 tokens",
        "model retries: 1",
        "invented (no tool produced these):",
        f"  {FAKE}",
    ]
