"""What a sub-agent keeps in its agent state hash so another worker can resume it.

The hash (``baton:{S}:agent:<name>`` on Redis) holds a few flat fields, written with one
``set_agent_state`` each time so a crash leaves either the old or the new version of each:

- ``status``: ``running`` → ``finishing`` (the final report is decided and about to be sent) →
  ``exited``; a worker that resumes a ``finishing`` agent re-sends the *same* report (same
  envelope id, which the lead dedupes) instead of running the agent again;
- ``owner``: the worker claim that runs it now; a worker whose lease lapsed and was taken over
  sees a different owner at its next checkpoint and stops quietly;
- ``spawn``, ``profile``: the spawn request it runs for;
- ``checkpoint``: :class:`Checkpoint` as JSON — memory, processed message ids, media, step;
- ``final``: :class:`FinalReport` as JSON, once decided;
- ``logged``: the id of the final report whose ``agent.result`` and ``agent.exited`` events are in
  the log (set in the same step as they are appended, so a report delivered again is logged once).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError

from baton.bus.messages import Envelope

ExitKind = Literal[
    "finished", "idle", "shutdown", "max_steps", "round_limit", "error", "cancelled", "budget"
]
PROCESSED_KEEP = 2000
"""How many processed ids a checkpoint remembers (duplicates come soon, not years later)."""


class Checkpoint(BaseModel):
    """An agent's progress after its last completed round."""

    model_config = ConfigDict(defer_build=True, extra="ignore")

    memory: list[dict[str, JsonValue]] = Field(default_factory=list)
    processed: list[str] = Field(default_factory=list)
    media: list[str] = Field(default_factory=list)
    step: int = 0
    last_text: str = ""
    result: str | None = None
    """What the agent sent with ``send_message(type='result')``, if it did."""
    reply_to: str | None = None
    ending: ExitKind | None = None
    """How the last round ended the agent, when it did: checkpointed with that round, so an owner
    killed before recording its report leaves the exit to the next one, which reports it at once
    instead of waiting for a message that will never come."""
    error: str = ""
    """The error text of an ``error`` ending."""
    tool_errors: list[str] = Field(default_factory=list)
    """What its failing tools said in its last round (engine ``TurnResult.tool_errors``)."""


class FinalReport(BaseModel):
    """The one final ``result`` message of a run, decided before it is sent."""

    model_config = ConfigDict(defer_build=True, extra="ignore")

    id: str
    reason: ExitKind
    content: str
    media: list[str] = Field(default_factory=list)
    steps: int = 0
    reply_to: str | None = None
    owner: str = ""
    """The claim that decided it: whoever delivers it sends it as that owner, whom the agent's hash
    still names (a ``finishing`` agent is not claimed again), so the lead takes it."""
    tool_errors: list[str] = Field(default_factory=list)
    """What its failing tools said: the work did not get done as asked, whatever its text says."""


def load_checkpoint(raw: str | None) -> Checkpoint | None:
    """The checkpoint from its JSON, or None when absent or unreadable (then start afresh)."""
    if not raw:
        return None
    try:
        return Checkpoint.model_validate_json(raw)
    except ValidationError:
        return None


def load_final(raw: str | None) -> FinalReport | None:
    if not raw:
        return None
    try:
        return FinalReport.model_validate_json(raw)
    except ValidationError:
        return None


def format_inbox(batch: Sequence[Envelope]) -> str:
    """The inbox batch as one user message, in the block format the offline model reads::

    [task from lead] Paint a fox.
    media: https://example.com/ref.png
    """
    blocks = []
    for envelope in batch:
        block = f"[{envelope.type} from {envelope.sender}] {envelope.content}"
        if envelope.media_urls:
            block += "\nmedia: " + " ".join(envelope.media_urls)
        blocks.append(block)
    return "\n\n".join(blocks)


def exit_note(reason: ExitKind, *, idle_s: float, steps: int, error: str) -> str:
    """What the final report says when the agent did not finish on its own."""
    notes: dict[ExitKind, str] = {
        "finished": "Done.",
        "idle": f"No new messages for {idle_s:g} s; stopped waiting.",
        "shutdown": "Shut down on request.",
        "max_steps": f"Stopped at the step limit after {steps} round(s).",
        "round_limit": "Stopped at the hard limit of tool rounds in one step.",
        "budget": "Stopped: the session's budget of model calls or tokens is spent.",
        "error": f"Stopped because of an error: {error}",
        "cancelled": "Cancelled before finishing.",
    }
    return notes[reason]
