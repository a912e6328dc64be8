"""Who may report to the lead: an agent it spawned, speaking as that agent's owner.

Anyone who can write to the lead's inbox can write any ``sender``. Taken on trust, a ``result``
in an unknown name would be read as a person's request (its text and media in the lead's
context, its URLs counted as given), and one in an agent's name would end that agent's work with
the forger's words (``meta.final`` defaults to true) and its media in the session's answer. So the
lead checks every report before it reads it (docs/protocol.md, *Who may say what*):

- the sender is on the roster: an agent this lead spawned (the checkpoint keeps the roster across
  a resume);
- the report comes from the agent's owner: its ``meta.owner`` is the ``owner`` that the agent's
  hash on the bus records, the claim of the worker hosting it. A worker whose lease lapsed and
  whose agent was taken over no longer owns it, and what it still sends is not the agent's word;
- the run the owner hosts was started by the lead's own spawn request (the hash's ``spawn``): a
  spawn request someone else queued for the same name cannot take the agent over and speak for it;
- the one report of an agent that no worker claimed is a worker's refusal of the lead's own spawn
  request, known by its id (``refusal_id``); a claimed agent's report is never taken as one.

What fails is refused with a reason (dead-lettered and acked by the caller); none of it reaches
the context, the roster or the answer. A check that cannot read the bus (only once the session is
being cancelled: reads are retried until then) leaves the report unread rather than guess.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Final

from baton.bus.base import Bus
from baton.bus.messages import REFUSAL_PREFIX, Envelope, refusal_id
from baton.bus.payloads import owner_of
from baton.bus.retry import persist
from baton.lead.roster import Roster

REPORT_TYPES: Final = frozenset({"result", "progress"})
"""What a sub-agent sends its lead; a person never does (baton.bus.user_post)."""


class ReportCheck:
    """Checks the reports in one lead's inbox against its roster and the agents' owners."""

    def __init__(self, bus: Bus, session: str, roster: Roster, give_up: Callable[[], bool]) -> None:
        self.bus = bus
        self.session = session
        self.roster = roster
        self._give_up = give_up

    def concerns(self, envelope: Envelope) -> bool:
        """Whether the envelope speaks as a sub-agent (a report, or anything in an agent's
        name); a person's task, message or shutdown is not checked here."""
        return envelope.type in REPORT_TYPES or self.roster.is_agent(envelope.sender)

    async def refusal(self, envelope: Envelope) -> str | None:
        """Why the envelope is refused, or None when the lead may read it. Raises
        ``BusUnreachable`` only once ``give_up()`` says so, when the agent's owner could not be
        read."""
        if not self.concerns(envelope):
            return None
        sender, kind = envelope.sender, envelope.type
        record = self.roster.agents.get(sender)
        if record is None:
            return f"{kind} from {sender!r}, an agent this session did not spawn"
        if kind not in REPORT_TYPES:
            return (
                f"{kind} from {sender!r}: a sub-agent speaks to its lead only with a result or "
                "progress"
            )
        read = partial(self.bus.records.agent, self.session, sender)
        state = await persist(read, f"{self.session}: owner of {sender}", give_up=self._give_up)
        if "owner" not in state:
            if kind == "result" and _is_refusal(envelope.id, record.spawn_id):
                return None  # the worker's answer to the lead's own request: it never ran
            return f"{kind} from {sender!r}, which no worker has claimed"
        spawn = state.get("spawn")
        if record.spawn_id and spawn and spawn != record.spawn_id:
            return (
                f"{kind} from {sender!r}, whose run was started by spawn request {spawn!r}, not "
                f"by this lead's {record.spawn_id!r}"
            )
        owner, claimed = state["owner"], owner_of(envelope)
        if claimed != owner:
            return (
                f"{kind} from {sender!r} sent as owner {claimed or 'none'!r}, but the agent's "
                f"owner is {owner or 'none'!r}: only the worker that owns it speaks for it"
            )
        return None


def _is_refusal(envelope_id: str, spawn_id: str) -> bool:
    """Whether a result's id is a worker's refusal of the lead's spawn request ``spawn_id``; a
    roster restored from a checkpoint written before requests' ids were kept has none to compare,
    and takes any refusal's id."""
    if spawn_id:
        return envelope_id == refusal_id(spawn_id)
    return envelope_id.startswith(REFUSAL_PREFIX)
