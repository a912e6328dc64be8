"""What the lead knows about its sub-agents: which profile each runs, whether it is still working,
and which of the lead's messages it has not seen yet.

A sub-agent is *outstanding* from the moment the lead spawns it until its final ``result`` envelope
arrives (the sub-agent loop sends exactly one, whatever way it leaves, with ``meta.final``). The
session ends only when nothing is outstanding, so every result reaches the lead's final answer.

One race needs care: a sub-agent that reported and left may have been sent another task after its
last inbox read. Its final result says which message it answered last (``reply_to``); every task
the lead sent after that one is still in the inbox, unseen, so the lead starts the agent again and
the new run reads them. The lead serialises its own sends, so "after" is well defined.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from bus.messages import Envelope

AgentState = Literal["running", "stopping", "done"]


@dataclass(slots=True)
class SubAgentRecord:
    """One sub-agent as the lead tracks it."""

    name: str
    profile: str
    state: AgentState = "running"
    sent: list[str] = field(default_factory=list)
    """Ids of the lead's messages since the agent was (re)started, in send order."""
    results: list[str] = field(default_factory=list)
    media_urls: list[str] = field(default_factory=list)
    starts: int = 1
    exit_reason: str = ""


class Roster:
    """The session's sub-agents by name, and the profiles new ones can be started from."""

    def __init__(self, profiles: Mapping[str, str]) -> None:
        self.profiles = dict(profiles)
        self.agents: dict[str, SubAgentRecord] = {}

    def resolve(self, name: str) -> str | None:
        """The profile an agent name runs: the name itself, or ``<profile>-<anything>``."""
        record = self.agents.get(name)
        if record is not None:
            return record.profile
        if name in self.profiles:
            return name
        matches = [p for p in self.profiles if name.startswith(f"{p}-")]
        return max(matches, key=len) if matches else None

    def is_running(self, name: str) -> bool:
        record = self.agents.get(name)
        return record is not None and record.state != "done"

    @property
    def outstanding(self) -> list[str]:
        """Agents whose final result has not arrived yet."""
        return [name for name, record in self.agents.items() if record.state != "done"]

    @property
    def media_urls(self) -> list[str]:
        """Every media URL any sub-agent reported, in arrival order, without duplicates."""
        urls = (url for record in self.agents.values() for url in record.media_urls)
        return list(dict.fromkeys(urls))

    def started(self, name: str, profile: str) -> SubAgentRecord:
        """Record a (re)start; a restarted agent keeps its results so far."""
        record = self.agents.get(name)
        if record is None:
            record = self.agents[name] = SubAgentRecord(name, profile)
        else:
            record.state, record.sent, record.starts = "running", [], record.starts + 1
        return record

    def sent(self, name: str, envelope_id: str) -> None:
        self.agents[name].sent.append(envelope_id)

    def stopping(self, name: str) -> None:
        record = self.agents.get(name)
        if record is not None and record.state == "running":
            record.state = "stopping"

    def on_report(self, envelope: Envelope) -> list[str]:
        """Take a ``result`` or ``progress`` envelope from a sub-agent.

        Returns the ids of the lead's messages the agent left without seeing (non-empty only for
        a final result of an agent that finished normally): the caller restarts it for them.
        """
        record = self.agents.get(envelope.sender)
        if record is None or envelope.type != "result":
            return []
        record.results.append(envelope.content)
        record.media_urls.extend(u for u in envelope.media_urls if u not in record.media_urls)
        final = envelope.meta.get("final", True) is not False
        if not final:
            return []
        was_stopping = record.state == "stopping"
        record.state = "done"
        record.exit_reason = str(envelope.meta.get("reason", ""))
        if was_stopping or record.exit_reason != "finished":
            return []
        try:
            last = record.sent.index(envelope.reply_to) if envelope.reply_to else None
        except ValueError:
            return []  # it answered something the lead did not send: assume it saw everything
        if last is None:
            return []
        return record.sent[last + 1 :]

    def is_agent(self, name: str) -> bool:
        return name in self.agents
