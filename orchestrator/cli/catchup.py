"""What a viewer that joins a session in mid-course shows first: where the session stands.

``baton watch S`` (from now on) and ``baton resume S`` both start reading a session whose story
began before them. Shown only from then on, a session that is waiting — most of all for an
approval — showed nothing at all until something new happened, so the person sent to answer the
approval could not see its call id. So both first fold the log so far (the same fold every view
uses, :class:`~baton.session.view.SessionView`) and show *the present*: the logged events that still
hold — the session's start, each sub-agent still running (its spawn and its latest progress) and
each approval still undecided (with only its undecided calls), each question for a file or an
image still open — then follow. The live view shows
the whole fold instead (its panels are the present). What waits for an approval also gets the
``baton approve`` line to answer it with; what waits for a file, the ``baton upload`` line.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from baton.bus.events import (
    AgentProgress,
    AgentSpawned,
    ApprovalRequested,
    Event,
    QuestionAsked,
    SessionStarted,
    ToolCallInfo,
    asked_for,
)
from baton.session.view import LEAD_NAME, SessionView


@dataclass(slots=True)
class Standing:
    """A session's log so far, folded, and the events of it that still hold."""

    view: SessionView = field(default_factory=SessionView)
    present: list[Event] = field(default_factory=list)
    """The logged events that make up the present, in log order (see the module docstring)."""

    @property
    def waiting(self) -> list[ApprovalRequested]:
        """The approval requests still undecided, each with only its undecided calls."""
        return [event for event in self.present if isinstance(event, ApprovalRequested)]

    @property
    def asking(self) -> list[QuestionAsked]:
        """The questions for a file or an image still open."""
        return [event for event in self.present if isinstance(event, QuestionAsked)]


def standing_of(history: Sequence[Event], *, with_start: bool = True) -> Standing:
    """Fold ``history`` (a session's logged events, oldest first) into its :class:`Standing`;
    ``with_start`` False leaves the ``session.started`` out of the present (a resumed session
    logs a new one, which is shown anyway)."""
    view = SessionView()
    for event in history:
        view.apply(event)
    chosen = {**_running_agents(history, view), **_undecided(history, view)}
    chosen.update(
        (index, event)
        for index, event in enumerate(history)
        if isinstance(event, QuestionAsked) and event.question_id in view.questions
    )
    starts = [i for i, e in enumerate(history) if isinstance(e, SessionStarted)]
    if starts and with_start:
        chosen[starts[-1]] = history[starts[-1]]  # the latest (a resumed session logs another)
    return Standing(view=view, present=[chosen[i] for i in sorted(chosen)])


def _running_agents(history: Sequence[Event], view: SessionView) -> dict[int, Event]:
    """Each sub-agent still running: its latest spawn, and its latest progress after it."""
    spawned: dict[str, int] = {}
    progress: dict[str, int] = {}
    for index, event in enumerate(history):
        if isinstance(event, AgentSpawned) and event.agent != LEAD_NAME:
            spawned[event.agent] = index
        elif isinstance(event, AgentProgress):
            progress[event.agent] = index
    chosen: dict[int, Event] = {}
    for agent, index in spawned.items():
        known = view.agents.get(agent)
        if known is None or not known.running:
            continue
        chosen[index] = history[index]
        if progress.get(agent, -1) > index and known.phase == "working":
            chosen[progress[agent]] = history[progress[agent]]
    return chosen


def _undecided(history: Sequence[Event], view: SessionView) -> dict[int, Event]:
    """Each approval request with the calls still undecided, where each was last asked (an
    agent resumed elsewhere asks its calls again)."""
    asked: dict[tuple[str, str], int] = {}
    for index, event in enumerate(history):
        if isinstance(event, ApprovalRequested):
            asked.update({(event.agent, call.call_id): index for call in event.calls})
    chosen: dict[int, Event] = {}
    for index, event in enumerate(history):
        if isinstance(event, ApprovalRequested):
            calls = [
                call
                for call in event.calls
                if (event.agent, call.call_id) in view.pending
                and asked[(event.agent, call.call_id)] == index
            ]
            if calls:
                chosen[index] = event.model_copy(update={"calls": calls})
    return chosen


def approve_line(command: str, session: str, agent: str, call: ToolCallInfo) -> str:
    """The one line that tells a person how to answer one waiting call, from any process."""
    return (
        f"{command}: {agent} waits for approval of {call.name}: answer with "
        f"`baton approve {session} {call.call_id} --yes|--no` from any process on this bus "
        "(declined if nobody answers before its approval timeout, 120 s by default)"
    )


def upload_line(command: str, session: str, question: QuestionAsked) -> str:
    """The one line that tells a person how to answer a question for a file or an image."""
    what = asked_for(question.kind)
    return (
        f"{command}: {question.agent} waits for {what}: answer with "
        f"`baton upload {session} {question.question_id} FILE` (or --url URL, or --cancel) "
        f"from any process on this bus, before {question.expires_at:%H:%M:%S} UTC"
    )
