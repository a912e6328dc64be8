"""The lead's checkpoint: what a new process needs to carry a session on where its lead died.

The lead's conversation alone is not enough to resume it: the roster says which sub-agents are
still working and which of the lead's messages each has seen, the tasks delegated for the current
request, the sends the caps refused and the delegation waves spent, where the loop stood (about to
run a turn or to wait for results, and what the last turn answered), and the lead policy's own
part (``policy``: whatever the policy remembers, opaque here, so a new policy never changes this
schema). :class:`LeadCheckpoint` holds all of it as JSON; the conversation itself is stored apart
(``history``), since a send rewrites only this small part (``docs/protocol.md``, *The lead's
checkpoint and resuming a session*). The live state is :class:`~baton.lead.state.LeadState`.

:class:`Progress` and :class:`TurnSend` are also the live objects the lead works with, so what is
written is exactly what the loop reads back.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, JsonValue

if TYPE_CHECKING:
    from openai.types.chat import ChatCompletionMessageFunctionToolCallParam

from baton.engine.history import tool_message
from baton.lead.items import DeclaredItem
from baton.lead.roster import Roster, Sent, SubAgentRecord
from baton.llm.types import Message

TAKEN_KEEP = 2000
"""How many ids of inbox messages put into the context a checkpoint remembers (a re-delivery
comes at the resume, not years later)."""

Phase = Literal["turn", "gather", "failed"]
"""What the lead does next: run a turn, wait for (and take in) news, or end failed."""


class LastTurn(BaseModel):
    """What the final answer needs of the last turn that ended normally: its answer, typed."""

    model_config = ConfigDict(defer_build=True)

    reply: str = ""
    status: Literal["done", "delegated", "cannot"] = "done"
    media: list[str] = Field(default_factory=list)
    """The URLs the answer presented as media (its ``media`` argument)."""
    wants_final: bool = True
    """It gave no usable answer (cut, blocked, silent): the final answer must be asked for."""
    truncated: bool = False


class Progress(BaseModel):
    """Where the lead's macro-loop stands (lead/agent.py), kept current as it runs."""

    model_config = ConfigDict(defer_build=True)

    phase: Phase = "turn"
    failures: int = 0
    """Failed turns in a row."""
    final_asked: bool = False
    """The final answer was asked for once (a turn without tools)."""
    final_due: bool = False
    """The next turn must give the final answer: asked without tools."""
    waves_noted: bool = False
    """The lead was told its delegation waves are spent."""
    request: str = ""
    """The person's newest request, as written (what routing hands on)."""
    last: LastTurn = Field(default_factory=LastTurn)
    error: str = ""
    """Why the lead's model failed for good (``phase`` ``failed``)."""


class TurnSend(BaseModel):
    """One send the running turn made: kept so that a turn cut off by the lead's death after it
    delegated goes into the resumed lead's context as the calls it made, not run again."""

    model_config = ConfigDict(defer_build=True)

    to: str
    content: str
    type: Literal["task", "message", "shutdown"]
    reply: str
    """What ``send_message`` answered."""


class _Sent(BaseModel):
    model_config = ConfigDict(defer_build=True)

    id: str
    type: Literal["task", "message"]
    content: str


class _Agent(BaseModel):
    model_config = ConfigDict(defer_build=True)

    name: str
    profile: str
    state: Literal["running", "stopping", "done"] = "running"
    sent: list[_Sent] = Field(default_factory=list)
    results: list[str] = Field(default_factory=list)
    media_urls: list[str] = Field(default_factory=list)
    exit_reason: str = ""
    noted: list[str] = Field(default_factory=list)
    spawn_id: str = ""
    spawn_receipt: str = ""
    never_ran: bool = False
    tool_errors: list[str] = Field(default_factory=list)


class LeadCheckpoint(BaseModel):
    """Everything of the lead but its conversation; see the module docstring."""

    model_config = ConfigDict(defer_build=True, extra="ignore")

    v: Literal[1] = 1
    agents: list[_Agent] = Field(default_factory=list)
    successors: dict[str, str] = Field(default_factory=dict)
    tasks: dict[str, str] = Field(default_factory=dict)
    """The tasks delegated for the current request: normalised content -> the agent."""
    waves_spent: int = 0
    refused: list[str] = Field(default_factory=list)
    """What the delegation caps refused for the current request (the refusals, as told)."""
    items: list[DeclaredItem] = Field(default_factory=list)
    """The deliverables the model declared for the current request and who holds each."""
    progress: Progress = Field(default_factory=Progress)
    policy: dict[str, JsonValue] = Field(default_factory=dict)
    """The lead policy's own memory for the current request (lead/policy.py), opaque here."""
    taken: list[str] = Field(default_factory=list)
    """Ids of the last inbox messages put into the context (a re-delivery of one is skipped)."""
    mid_turn: bool = False
    """Written during a turn (a send): the stored conversation ends before that turn."""
    turn_sends: list[TurnSend] = Field(default_factory=list)


def roster_state(roster: Roster) -> tuple[list[_Agent], dict[str, str]]:
    """The roster as the checkpoint stores it."""
    agents = [
        _Agent(
            name=record.name,
            profile=record.profile,
            state=record.state,
            sent=[_Sent(id=m.id, type=m.type, content=m.content) for m in record.sent],
            results=list(record.results),
            media_urls=list(record.media_urls),
            exit_reason=record.exit_reason,
            noted=list(record.noted),
            spawn_id=record.spawn_id,
            spawn_receipt=record.spawn_receipt,
            never_ran=record.never_ran,
            tool_errors=list(record.tool_errors),
        )
        for record in roster.agents.values()
    ]
    return agents, dict(roster.successors)


def restore_roster(roster: Roster, checkpoint: LeadCheckpoint) -> None:
    """Put the checkpoint's sub-agents back into ``roster`` (in their start order)."""
    roster.agents = {
        agent.name: SubAgentRecord(
            agent.name,
            agent.profile,
            state=agent.state,
            sent=[Sent(m.id, m.type, m.content) for m in agent.sent],
            results=list(agent.results),
            media_urls=list(agent.media_urls),
            exit_reason=agent.exit_reason,
            noted=list(agent.noted),
            spawn_id=agent.spawn_id,
            spawn_receipt=agent.spawn_receipt,
            never_ran=agent.never_ran,
            tool_errors=list(agent.tool_errors),
        )
        for agent in checkpoint.agents
    }
    roster.successors = dict(checkpoint.successors)


def turn_messages(sends: Sequence[TurnSend]) -> list[Message]:
    """The sends of a turn cut off by the lead's death, as the assistant's ``send_message`` calls
    and their answers: the resumed lead's context then says what it delegated."""
    calls: list[ChatCompletionMessageFunctionToolCallParam] = [
        {
            "id": f"call_resumed_{number}",
            "type": "function",
            "function": {
                "name": "send_message",
                "arguments": json.dumps(
                    {"to": send.to, "content": send.content, "type": send.type},
                    ensure_ascii=False,
                ),
            },
        }
        for number, send in enumerate(sends)
    ]
    messages: list[Message] = [{"role": "assistant", "content": None, "tool_calls": calls}]
    messages += [
        tool_message(call["id"], send.reply) for call, send in zip(calls, sends, strict=True)
    ]
    return messages


class CheckpointSink(Protocol):
    """Where the lead writes its checkpoints (the session's :class:`~baton.lead.keeper.LeadKeeper`).

    ``history`` is None for a checkpoint written during a turn: the conversation stored at the
    last step stays as it is.
    """

    async def save(self, checkpoint: LeadCheckpoint, history: list[Message] | None) -> None: ...

    async def close(self) -> bool:
        """The lead answered and its last read found nothing: it reads no more from now on.
        True when closed; False (nothing changed) when a message reached its inbox after that
        read, which it then reads and works on. The look and the close are one step on the bus,
        so a post is either read or refused, never dropped between the two."""
        ...
