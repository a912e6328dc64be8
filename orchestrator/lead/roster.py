"""What the lead knows about its sub-agents: which profile each runs, whether it is still working,
and which of the lead's messages it has not seen yet.

A sub-agent is *outstanding* from the moment the lead spawns it until its final ``result`` envelope
arrives (the sub-agent loop sends exactly one, whatever way it leaves; its ``meta`` is a
:class:`~baton.bus.payloads.ResultReport`). The session ends only when nothing is outstanding, so
every result reaches the lead's final answer.

Where a message goes (:meth:`Roster.route`): ``type="task"`` to a *profile* name starts a new
agent of that profile (``painter``, then ``painter-2``, ...), so independent tasks run in parallel;
anything to an *agent* name is a follow-up to that agent, or, once it has exited, to its
*successor*: one fresh agent of the same profile, started once and remembered, so later messages
to the old name reach the same successor while it runs (before, every message to an exited agent
started another one).

One race needs care: a sub-agent that reported and left may have been sent another task after its
last inbox read. Its final result says which message it answered last (``reply_to``); every task
the lead sent after that one is unseen, so the lead gives them to its successor. The lead
serialises its own sends, so "after" is well defined.

Why a fresh name rather than starting the same agent again: the worker that hosted it may still be
doing its final bookkeeping when the result arrives, and a spawn request for an agent it still
hosts is dropped as a duplicate (see the report on ``baton.subagents.worker``). A new name cannot
collide.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from baton.bus.messages import Envelope, refusal_id
from baton.bus.payloads import result_report
from baton.engine.turn import normalise_text

AgentState = Literal["running", "stopping", "done"]


@dataclass(frozen=True, slots=True)
class Sent:
    """One message the lead sent to a sub-agent (kept so an unseen one can be given to another)."""

    id: str
    type: Literal["task", "message"]
    content: str


@dataclass(frozen=True, slots=True)
class Route:
    """Where one message goes: ``name`` (of ``profile``), started first when ``start``.

    ``succeeds`` names the exited agent a started successor takes over from (None for a new
    agent of a profile).
    """

    name: str
    profile: str
    start: bool
    succeeds: str | None = None


@dataclass(slots=True)
class SubAgentRecord:
    """One sub-agent as the lead tracks it."""

    name: str
    profile: str
    state: AgentState = "running"
    sent: list[Sent] = field(default_factory=list)
    """The lead's messages to it, in send order."""
    results: list[str] = field(default_factory=list)
    media_urls: list[str] = field(default_factory=list)
    exit_reason: str = ""
    noted: list[str] = field(default_factory=list)
    """The envelope ids of its results taken in: one delivered again (a resumed lead reads what
    its predecessor had read and not acked) counts once."""
    spawn_id: str = ""
    """The id of the lead's spawn request for it: a worker that refuses the request answers with
    a result whose id is made from it (``refusal_id``), the one report an unclaimed agent has."""
    tool_errors: list[str] = field(default_factory=list)
    """What its failing tools said, as its last result reported."""
    never_ran: bool = False
    """Its one report refused its spawn request (no worker hosted it: none serves its pool and
    profile, or a worker's signing key differs): the runtime ended it before it ran."""
    spawn_receipt: str = ""
    """The bus's receipt of its spawn request (checkpointed: a resumed lead can still withdraw
    it unclaimed, and its session's spawn watch can still follow it)."""

    @property
    def tasks(self) -> set[str]:
        """Its tasks, normalised: every ``task`` sent to it, and the message that started it."""
        return {
            normalise_text(message.content)
            for position, message in enumerate(self.sent)
            if message.type == "task" or position == 0
        }


class Roster:
    """The session's sub-agents by name, and the profiles new ones can be started from."""

    def __init__(self, profiles: Mapping[str, str]) -> None:
        self.profiles = dict(profiles)
        self.agents: dict[str, SubAgentRecord] = {}
        self.successors: dict[str, str] = {}
        """An exited agent -> the agent started to take its messages over (at most one each)."""

    def resolve(self, name: str) -> str | None:
        """The profile an agent name runs: the name itself, or ``<profile>-<anything>``."""
        record = self.agents.get(name)
        if record is not None:
            return record.profile
        if name in self.profiles:
            return name
        matches = [p for p in self.profiles if name.startswith(f"{p}-")]
        return max(matches, key=len) if matches else None

    def route(self, to: str, kind: Literal["task", "message"]) -> Route | None:
        """Where a message to ``to`` goes; None when no agent or profile has that name.

        A task to a profile name is a new agent; anything to an agent name is a follow-up to it,
        or to its successor once it has exited (or was told to stop); a message to a profile no
        agent has had yet, or to an unknown ``<profile>-<n>``, starts that agent.
        """
        if kind == "task" and to in self.profiles:
            name = to if to not in self.agents else self.fresh_name(to)
            return Route(name, to, start=True)
        if to in self.agents:
            current = self.current(to)
            profile = self.agents[current].profile
            if self.agents[current].state == "running":  # one told to stop may not read it
                return Route(current, profile, start=False)
            return Route(self.fresh_name(profile), profile, start=True, succeeds=current)
        inferred = self.resolve(to)
        return None if inferred is None else Route(to, inferred, start=True)

    def reporter_of(self, key: str, *, among: Iterable[str]) -> str | None:
        """The agent of ``among`` (or a successor of one) whose result is, normalised, ``key``
        (a normalised text), if any."""
        if not key:
            return None
        for name in {self.current(name) for name in among} | set(among):
            record = self.agents.get(name)
            if record is not None and any(normalise_text(r) == key for r in record.results):
                return record.name
        return None

    def current(self, name: str) -> str:
        """The agent that holds ``name``'s work now: itself, or the last of its successors."""
        seen = {name}
        while name in self.successors and self.successors[name] not in seen:
            name = self.successors[name]
            seen.add(name)
        return name

    @property
    def running(self) -> list[str]:
        """Agents still running (not stopping, not done), in start order."""
        return [name for name, record in self.agents.items() if record.state == "running"]

    @property
    def delivered(self) -> bool:
        """Whether any sub-agent finished its work normally (``finished``) and reported it."""
        return any(record.exit_reason == "finished" for record in self.agents.values())

    @property
    def all_delivered(self) -> bool:
        """Whether every sub-agent's work is in: none outstanding, and each that no successor
        took over finished normally (``finished``); False with no sub-agents."""
        if not self.agents or self.outstanding:
            return False
        return all(
            record.exit_reason == "finished"
            for name, record in self.agents.items()
            if name not in self.successors
        )

    def redone(self, name: str) -> bool:
        """Whether every task ``name`` was given went again, later, to an agent that finished
        (the lead sent a failed agent's work again, and it was done)."""
        names = list(self.agents)
        tasks = self.agents[name].tasks
        done = {
            task
            for later in names[names.index(name) + 1 :]
            if self.agents[later].exit_reason == "finished"
            for task in self.agents[later].tasks
        }
        return bool(tasks) and tasks <= done

    def is_running(self, name: str) -> bool:
        record = self.agents.get(name)
        return record is not None and record.state != "done"

    @property
    def outstanding(self) -> list[str]:
        """Agents whose final result has not arrived yet."""
        return [name for name, record in self.agents.items() if record.state != "done"]

    @property
    def none_ran(self) -> bool:
        """Whether work was delegated and no agent ever ran: each was refused before it started
        (the session could not get its work done at all: ``failed``, not ``incomplete``)."""
        return bool(self.agents) and all(r.never_ran for r in self.agents.values())

    @property
    def media_urls(self) -> list[str]:
        """Every media URL any sub-agent reported, in arrival order, without duplicates."""
        urls = (url for record in self.agents.values() for url in record.media_urls)
        return list(dict.fromkeys(urls))

    def fresh_name(self, profile: str) -> str:
        """A name no agent of this session has had: ``<profile>-2``, ``<profile>-3``, ..."""
        number = 2
        while f"{profile}-{number}" in self.agents:
            number += 1
        return f"{profile}-{number}"

    def started(self, name: str, profile: str, succeeds: str | None = None) -> SubAgentRecord:
        record = self.agents[name] = SubAgentRecord(name, profile)
        if succeeds is not None:
            self.successors[succeeds] = name
        return record

    def sent(self, name: str, message: Sent) -> None:
        self.agents[name].sent.append(message)

    def stopping(self, name: str) -> None:
        record = self.agents.get(name)
        if record is not None and record.state == "running":
            record.state = "stopping"

    def withdrawn(self, name: str) -> None:
        """Its spawn request was taken back before any worker claimed it: it never ran, and no
        result will come."""
        record = self.agents.get(name)
        if record is not None:
            record.state = "done"
            record.exit_reason = "withdrawn"
            record.spawn_receipt = ""

    def on_report(self, envelope: Envelope) -> list[Sent]:
        """Take a ``result`` or ``progress`` envelope from a sub-agent.

        Returns the lead's messages the agent left without seeing (non-empty only for a final
        result of an agent that finished normally): the caller hands them to a fresh agent.
        """
        record = self.agents.get(envelope.sender)
        if record is None or envelope.type != "result" or envelope.id in record.noted:
            return []
        record.noted.append(envelope.id)
        record.results.append(envelope.content)
        record.media_urls.extend(u for u in envelope.media_urls if u not in record.media_urls)
        report = result_report(envelope)  # the inbox reader dead-letters one that misfits
        record.tool_errors = list(report.tool_errors)
        if not report.final:
            return []
        was_stopping = record.state == "stopping"
        record.state = "done"
        record.exit_reason = report.reason
        record.never_ran = bool(record.spawn_id) and envelope.id == refusal_id(record.spawn_id)
        if was_stopping or record.exit_reason != "finished":
            return []
        ids = [message.id for message in record.sent]
        if envelope.reply_to not in ids:
            return []  # it answered something the lead did not send: assume it saw everything
        return record.sent[ids.index(envelope.reply_to) + 1 :]

    def is_agent(self, name: str) -> bool:
        return name in self.agents
