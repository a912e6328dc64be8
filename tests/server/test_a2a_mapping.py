"""The A2A task's fold (:class:`~baton.server.a2a.mapping.TaskTracker`) of where sub-agents run:
a client of the A2A endpoint reads that an agent waits for a worker, and which worker took it,
as the page and the terminal do (issue 22)."""

from __future__ import annotations

from a2a.types import TaskState

from baton.bus.events import AgentClaimed, AgentSpawned, AgentUnclaimed, Event, SessionStarted
from baton.server.a2a.mapping import TaskTracker

S = "s-a2a-map"


def said(tracker: TaskTracker, events: list[Event]) -> list[str]:
    """The text of each status update the events give, in order."""
    texts = []
    for number, event in enumerate(events):
        for update in tracker.apply(f"{number}-0", event):
            if update.HasField("status"):
                texts.append(update.status.message.parts[0].text)
    return texts


def test_waiting_for_a_worker_and_the_worker_that_claims_are_status_updates() -> None:
    tracker = TaskTracker(S, public_url=lambda url: url)
    texts = said(tracker, [
        SessionStarted(session=S, agent="lead", task="paint a fox", model="m"),
        AgentSpawned(session=S, agent="painter", profile="painter"),
        AgentUnclaimed(session=S, agent="painter", profile="painter", pool="gpu", waited_s=15,
                       workers=1),
        AgentClaimed(session=S, agent="painter", profile="painter", worker="w-7"),
    ])  # fmt: skip
    assert texts[2] == (
        "painter: no worker of pool gpu has claimed it in 15 s (profile painter): "
        "1 live worker(s) serve it, all busy"
    )
    assert texts[3] == "painter runs on worker w-7"
    assert tracker.state == TaskState.TASK_STATE_WORKING
