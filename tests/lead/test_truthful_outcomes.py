"""Outcomes that tell the truth, through whole sessions on the built-in offline model: the help
example makes the pictures it asks for, sends the caps refused are not done (and the answer never
waits for agents that do not exist), and a follow-up's answer does not wait for an agent that
delivered nor list a picture twice."""

from __future__ import annotations

from pathlib import Path

import anyio

from baton.bus.events import AgentSpawned, Event, TextDelta
from baton.lead.delegation import DelegationLimits
from baton.session import Session, SessionConfig, SessionResult
from tests.support.events import logged_events

HELP_EXAMPLE = "paint a fox and a heron, then write a haiku"


async def offline_session(
    config: SessionConfig, *, follow_up: str | None = None
) -> tuple[SessionResult, list[Event]]:
    with anyio.fail_after(60):
        async with Session(config) as session:
            if follow_up:
                # In the lead's inbox before its first turn ends, so its first wait for the
                # painter reads it. Posted once the painter was seen spawned, it could land after
                # the lead's last read on a loaded machine, and no second painter was asked.
                await session.post(follow_up)
            async for _ in session.events():
                pass
            result = await session.run()
            log = await logged_events(session.bus, session.id)
    return result, log


def spawned(log: list[Event]) -> dict[str, str]:
    return {e.agent: e.profile for e in log if isinstance(e, AgentSpawned)}


async def test_the_help_example_makes_two_pictures_and_a_haiku(tmp_path: Path) -> None:
    from baton.cli.app import RUN_EXAMPLES  # the example as `baton run --help` shows it

    assert f'baton run "{HELP_EXAMPLE}"' in RUN_EXAMPLES
    result, log = await offline_session(SessionConfig(task=HELP_EXAMPLE, media_dir=tmp_path))
    assert result.status == "completed"
    assert spawned(log) == {"painter": "painter", "painter-2": "painter", "writer": "writer"}
    assert len(result.media_urls) == 2
    assert "haiku" in result.answer


async def test_sends_the_caps_refused_are_not_done_and_never_waited_for(tmp_path: Path) -> None:
    limits = DelegationLimits(max_new_agents_per_profile=2)
    config = SessionConfig(
        task="paint a fox, paint a heron, paint a cat", media_dir=tmp_path, delegation=limits
    )
    result, log = await offline_session(config)
    assert spawned(log) == {"painter": "painter", "painter-2": "painter"}
    assert result.status == "incomplete"
    assert result.error.startswith("1 send(s) to sub-agents were refused by the delegation caps")
    assert "Still waiting" not in result.answer and len(result.media_urls) == 2
    shown = "".join(e.text for e in log if isinstance(e, TextDelta) and e.agent == "lead")
    assert "Delegated 2 tasks (painter, painter-2)" in shown and "3 tasks" not in shown


async def test_a_follow_ups_answer_waits_for_nobody_and_lists_each_picture_once(
    tmp_path: Path,
) -> None:
    config = SessionConfig(task="paint a fox", media_dir=tmp_path)
    result, log = await offline_session(config, follow_up="also paint a heron")
    assert result.status == "completed"
    # The heron goes to a second painter, or to the first if it is still at work then.
    assert set(spawned(log)) in ({"painter"}, {"painter", "painter-2"})
    assert "Still waiting" not in result.answer
    assert len(result.media_urls) == 2
    for url in result.media_urls:
        assert result.answer.count(url) == 1, result.answer
