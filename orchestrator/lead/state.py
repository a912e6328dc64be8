"""The lead's one state: what every step of its loop reads and changes, and what a checkpoint is.

Every piece of the lead that changes while it runs lives here, in one object the steps share
(lead/agent.py), the delegation unit writes its sends into (lead/team.py), and the checkpoint is
taken from (:meth:`LeadState.checkpoint`): the conversation, the roster of sub-agents, where the
loop stands (:class:`~baton.lead.checkpoint.Progress`), the delegation of the current request
(tasks sent, sends refused, waves spent, the running turn's sends), the policy's own memory, and
the inbox messages taken in. Nothing else of the lead survives a crash, so nothing else may decide
what it does next.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from pydantic import JsonValue

from baton.lead.checkpoint import (
    TAKEN_KEEP,
    CheckpointSink,
    LastTurn,
    LeadCheckpoint,
    Progress,
    TurnSend,
    restore_roster,
    roster_state,
    turn_messages,
)
from baton.lead.delegation import Waves
from baton.lead.items import DeclaredItem
from baton.lead.keeper import LeadTakenOver
from baton.lead.roster import Roster
from baton.llm.types import Message


@dataclass(slots=True)
class LeadState:
    """See the module docstring."""

    session: str
    history: list[Message]
    roster: Roster
    waves: Waves
    """Turns of this request that delegated; once spent, the lead answers without tools."""
    progress: Progress = field(default_factory=Progress)
    tasks: dict[str, str] = field(default_factory=dict)
    """The tasks sent for the current request: normalised content -> the agent that got it."""
    refused: list[str] = field(default_factory=list)
    """What the delegation caps refused for the current request (the refusal, as told)."""
    items: list[DeclaredItem] = field(default_factory=list)
    """The deliverables the model declared for the current request (lead/items.py)."""
    policy: dict[str, JsonValue] = field(default_factory=dict)
    """The lead policy's memory for the current request (lead/policy.py)."""
    taken: list[str] = field(default_factory=list)
    """Ids of the last inbox messages put into the context."""
    turn_sends: list[TurnSend] = field(default_factory=list)
    """What the running turn sent (cleared at each turn), for a checkpoint written mid-turn."""

    def new_request(self, request: str) -> None:
        """A person asked something new: its delegation and the policy's memory start over."""
        self.tasks.clear()
        self.refused.clear()
        self.items.clear()
        self.policy.clear()
        self.waves.reset()
        self.progress.waves_noted = False
        self.progress.request = request

    def took(self, ids: list[str]) -> None:
        """Inbox messages went into the context (a re-delivery of one is skipped)."""
        self.taken = [*self.taken, *ids][-TAKEN_KEEP:]

    def unsay(self, text: str) -> None:
        """Take the turn's reply ``text`` out of the context: the policy judged it no answer (it
        quoted the system prompt or a note), and shown to the model again it is said again (a
        1.5B lead that had quoted its instructions, asked for its answer, answered about them).
        Only the newest assistant message is looked at, and only one without calls."""
        for index in range(len(self.history) - 1, -1, -1):
            message = self.history[index]
            if message.get("role") != "assistant":
                continue
            if message.get("content") == text and not message.get("tool_calls"):
                del self.history[index]
            return

    @property
    def delegated(self) -> bool:
        """Whether the current request has had work sent for it (a wave, or a send this turn)."""
        return bool(self.waves.spent or self.turn_sends)

    def checkpoint(self, *, mid_turn: bool = False) -> LeadCheckpoint:
        """Everything but the conversation, as it stands now; ``mid_turn``: written during a turn
        (a send), with that turn's sends so far."""
        agents, successors = roster_state(self.roster)
        return LeadCheckpoint(
            agents=agents,
            successors=successors,
            tasks=dict(self.tasks),
            waves_spent=self.waves.spent,
            refused=list(self.refused),
            items=[item.model_copy() for item in self.items],
            progress=self.progress.model_copy(deep=True),
            policy=dict(self.policy),
            taken=list(self.taken),
            mid_turn=mid_turn,
            turn_sends=list(self.turn_sends) if mid_turn else [],
        )

    def restore(self, history: list[Message], checkpoint: LeadCheckpoint) -> None:
        """Put a checkpoint back: the conversation, the roster and where the loop stood. A turn
        cut off after it delegated is not run again: its sends go into the context as the calls
        they were, and the lead waits for their results."""
        self.history[:] = history
        restore_roster(self.roster, checkpoint)
        self.tasks = dict(checkpoint.tasks)
        self.waves.spent = checkpoint.waves_spent
        self.refused = list(checkpoint.refused)
        self.items = [item.model_copy() for item in checkpoint.items]
        self.progress = checkpoint.progress.model_copy(deep=True)
        self.policy = dict(checkpoint.policy)
        self.taken = list(checkpoint.taken)
        if checkpoint.mid_turn and checkpoint.turn_sends:
            self.history.extend(turn_messages(checkpoint.turn_sends))
            self.waves.count(len(checkpoint.turn_sends))
            self.progress.phase, self.progress.last = "gather", LastTurn()
            self.progress.final_due = False


class LeadCheckpoints:
    """The lead's checkpointing, observing its state: a whole checkpoint after each step of the
    loop (:meth:`step`), a small one without the conversation after each send (:meth:`mid_turn`).
    A send's checkpoint runs inside a tool call, whose errors the engine would hand to the model:
    a lead that was taken over is told through ``on_lost`` instead, and stops."""

    def __init__(
        self,
        sink: CheckpointSink | None,
        state: LeadState,
        on_lost: Callable[[LeadTakenOver], None],
    ) -> None:
        self._sink = sink
        self._state = state
        self._on_lost = on_lost

    async def step(self) -> None:
        """A checkpoint at a step: the whole conversation and the rest."""
        if self._sink is not None:
            await self._sink.save(self._state.checkpoint(), self._state.history)

    async def close(self) -> bool:
        """The lead reads no more (:meth:`CheckpointSink.close`); with nowhere to write, there
        is nothing to close either."""
        return True if self._sink is None else await self._sink.close()

    async def mid_turn(self) -> None:
        """A checkpoint during a turn (a send): the rest, with the turn's sends so far."""
        if self._sink is None:
            return
        try:
            await self._sink.save(self._state.checkpoint(mid_turn=True), None)
        except LeadTakenOver as exc:
            self._on_lost(exc)
