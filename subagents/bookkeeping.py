"""A sub-agent's durable bookkeeping: what survives its worker, and its one final report.

The inbox loop (:mod:`baton.subagents.loop`) decides *when* an agent leaves; this module decides
what is written down on the way, so that a worker dying at any point (kill -9) leaves enough
behind for the next owner to carry on, and the lead still gets exactly one final ``result``:

- on the way in, :meth:`Bookkeeper.restore` reads the agent state hash (:mod:`~.state`): a
  report a previous owner already decided is delivered again rather than the agent run again;
  otherwise the checkpoint comes back and the agent is claimed for this owner;
- after each round, :meth:`Bookkeeper.complete_round` checkpoints *before* acking, so a crash
  re-delivers the round's messages instead of losing them, and their ids (kept in the checkpoint)
  are skipped if they had been handled after all;
- every write first checks that the agent is still ours: a worker whose lease lapsed and was taken
  over stops quietly (:class:`~baton.subagents.errors.LostOwnership`) instead of writing over the
  new owner's state or reporting twice;
- on the way out, :meth:`Bookkeeper.finish` decides the report and records it (``finishing``)
  before :meth:`Bookkeeper.deliver` sends it, so a report interrupted half-way goes out again with
  the same envelope id (which the lead dedupes), never as a second, different report.

The final steps run shielded (a cancelled agent still reports) but bounded
(:data:`FINAL_BOOKKEEPING_S`, and cut at a stopping worker's deadline:
:mod:`~baton.subagents.stopping`), so a bus outage cannot hold a stopping worker: what is left
undone stays recorded and the next owner finishes it. The bookkeeper knows nothing of the loop's
phases; it says how each final step went (:class:`Delivery`) and the agent moves accordingly.
"""

from __future__ import annotations

import enum
import logging
from functools import partial
from typing import NamedTuple

from baton.bus.base import Bus
from baton.bus.events import AgentExited, AgentResult
from baton.bus.ids import new_id
from baton.bus.inbox import InboxReader
from baton.bus.messages import Envelope
from baton.bus.parts.inboxes import Inboxes
from baton.bus.payloads import ResultReport
from baton.bus.retry import persist
from baton.engine.bus_channel import approvals_inbox
from baton.subagents.errors import LostOwnership
from baton.subagents.phases import Outcome
from baton.subagents.profiles import Profile
from baton.subagents.state import (
    PROCESSED_KEEP,
    Checkpoint,
    FinalReport,
    exit_note,
    load_checkpoint,
    load_final,
)
from baton.subagents.stopping import shielded

log = logging.getLogger(__name__)

FINAL_BOOKKEEPING_S = 30.0
"""How long each shielded step of the final bookkeeping may take (recording the report, then
delivering it; or releasing the inbox of an agent given back). A bus outage longer than that leaves
the spawn request un-acked, so another worker sends the same report instead."""


class Restored(NamedTuple):
    """What the agent state said on the way in; ``Restored()`` means: run the agent."""

    final: FinalReport | None = None
    """A final report a previous owner already decided; None when the agent should run."""
    delivered: bool = False
    """Whether that report already went out in full (this same spawn's run exited)."""


class Delivery(enum.Enum):
    """How the final report went; anything but DELIVERED means the spawn request must go back,
    so that another worker delivers the recorded report (or nobody does, when LOST)."""

    DELIVERED = "delivered"
    """Sent, the events emitted, the agent marked ``exited`` and its inbox acked and released."""
    LOST = "lost"
    """Another worker owns the agent now; it reports, this copy does not."""
    UNFINISHED = "unfinished"
    """A step ran out of time (a bus outage); what was recorded stays for the next owner."""


class Bookkeeper:
    """Keeps one sub-agent's state hash, checkpoints and final report; owned by its
    :class:`~baton.subagents.loop.SubAgent`.

    ``inbox`` is the agent's own reader: it acks what the checkpoints cover, and says where the
    agent lives (bus, session, name). ``state`` is the agent's progress, which the loop updates in
    place between checkpoints.
    """

    # A worker hosts thousands of idle agents, each owning one: no per-instance __dict__, and
    # nothing the inbox already holds.
    __slots__ = ("_inbox", "_lead", "_owner", "_profile", "_resumed", "_spawn_id", "state")

    def __init__(
        self, inbox: InboxReader, profile: Profile, *, lead: str, spawn_id: str, owner: str
    ) -> None:
        self._inbox = inbox
        self._profile = profile
        self._lead = lead
        self._spawn_id = spawn_id
        self._owner = owner
        self._resumed = False
        self.state = Checkpoint()

    @property
    def owner(self) -> str:
        """The claim this run is under: what its reports to the lead say they come from."""
        return self._owner

    @property
    def resumed(self) -> bool:
        """True when this run took over an agent another worker left running (its checkpoint)."""
        return self._resumed

    def record_result(self, content: str) -> None:
        """Keep the agent's final answer (its ``send_message(type='result')``) for the report."""
        self.state.result = content

    # -- on the way in --------------------------------------------------------------------------

    async def restore(self) -> Restored:
        """Load the checkpoint and claim the agent, unless a previous owner decided its report."""
        bus, session, name = self._where()
        fields = await persist(lambda: bus.records.agent(session, name), "load state")
        final = load_final(fields.get("final"))
        status = fields.get("status")
        same_run = fields.get("spawn") == self._spawn_id
        if final is not None and status == "finishing":
            return Restored(final)
        if final is not None and status == "exited" and same_run and self._spawn_id:
            return Restored(final, delivered=True)
        self._resumed = status == "running"
        checkpoint = load_checkpoint(fields.get("checkpoint"))
        if checkpoint is not None:
            if not self._resumed:  # a new run of an agent that finished before: keep memory only
                checkpoint = Checkpoint(memory=checkpoint.memory, processed=checkpoint.processed)
            self.state = checkpoint
            self._inbox.remember(checkpoint.processed)
        claim = {
            "status": "running",
            "owner": self._owner,
            "spawn": self._spawn_id,
            "profile": self._profile.name,
        }
        await persist(lambda: bus.records.set_agent(session, name, claim), "claim")
        if self._resumed:
            log.info("resuming %s/%s at step %d", session, name, self.state.step)
        return Restored()

    # -- between rounds -------------------------------------------------------------------------

    async def complete_round(self, ids: list[str]) -> None:
        """Count the round, checkpoint it with its message ids, then ack those messages."""
        state = self.state
        state.step += 1
        state.processed = [*state.processed, *ids][-PROCESSED_KEEP:]
        await self._write({"checkpoint": state.model_dump_json()})
        await self._inbox.ack(ids)

    async def _write(self, fields: dict[str, str]) -> None:
        """Write state, unless another worker owns the agent now (then stop quietly)."""
        bus, session, name = self._where()
        owner = self._owner or None
        written = await persist(
            lambda: bus.records.set_agent(session, name, fields, if_owner=owner), "checkpoint"
        )
        if not written:  # the look and the write are one step: nothing was written
            current = await persist(lambda: bus.records.agent(session, name), "check owner")
            raise LostOwnership(session, name, current.get("owner", ""))

    # -- on the way out -------------------------------------------------------------------------

    async def finish(self, outcome: Outcome) -> Delivery:
        """Decide the final report, record it, deliver it; shielded and bounded."""
        final = self._decide(outcome)
        with shielded(FINAL_BOOKKEEPING_S) as bound:
            try:
                await self._write(
                    {
                        "status": "finishing",
                        "final": final.model_dump_json(),
                        "checkpoint": self.state.model_dump_json(),
                    }
                )
            except LostOwnership as exc:
                log.warning("%s", exc)
                return Delivery.LOST
        if bound.cancelled_caught:
            return self._unfinished()
        return await self.deliver(final)

    def _decide(self, outcome: Outcome) -> FinalReport:
        """The one report of this run: the agent's own result, else its last answer and why it
        stopped."""
        state = self.state
        reason = outcome.reason
        if state.result is not None:
            content = state.result
        elif reason == "finished":
            content = state.last_text or "Done."
        else:
            note = exit_note(
                reason,
                idle_s=self._profile.limits.idle_timeout_s,
                steps=state.step,
                error=outcome.error,
            )
            content = f"{note}\nLast answer: {state.last_text}" if state.last_text else note
        return FinalReport(
            id=new_id(),
            reason=reason,
            content=content,
            media=state.media,
            steps=state.step,
            reply_to=state.reply_to,
            owner=self._owner,
            tool_errors=state.tool_errors,
        )

    async def deliver(self, final: FinalReport) -> Delivery:
        """Emit the events, send the report (same id on every attempt), mark exited, ack all;
        shielded and bounded. Unless DELIVERED, the ``finishing`` state stays for another worker
        to deliver the same report.

        The events go out before the report: a lead ends its session once every report is in, and
        its ``session.finished`` must come after everything its agents logged (a viewer stops
        reading there). They are appended in one step with the report's id recorded as logged
        (:meth:`~baton.bus.parts.log.EventLog.emit_once`), so a worker dying between them and the
        report makes the next owner send the report without logging them again: exactly once.
        """
        bus, session, name = self._where()
        with shielded(FINAL_BOOKKEEPING_S) as bound:
            events = (
                AgentResult(
                    session=session,
                    agent=name,
                    content=final.content,
                    media_urls=final.media,
                ),
                AgentExited(session=session, agent=name, reason=final.reason),
            )
            log_once = partial(bus.log.emit_once, session, name, events, mark=final.id)
            await persist(log_once, "exit events")
            envelope = Envelope(
                id=final.id,
                session=session,
                sender=name,
                recipient=self._lead,
                type="result",
                content=final.content,
                media_urls=final.media,
                reply_to=final.reply_to,
                meta=ResultReport(
                    reason=final.reason,
                    steps=final.steps,
                    owner=final.owner,
                    tool_errors=final.tool_errors,
                ).to_meta(),
            )
            await persist(lambda: bus.inboxes.send(envelope), "final result")
            done = {"status": "exited"}
            await persist(lambda: bus.records.set_agent(session, name, done), "exit")
            await self._inbox.ack_pending()
            await _release_inboxes(bus.inboxes, session, name)
        if bound.cancelled_caught:
            return self._unfinished()
        return Delivery.DELIVERED

    async def release(self) -> None:
        """Hand the inbox back unfinished (its un-acked messages go to the next owner);
        shielded and bounded, since only a stopping worker calls it."""
        bus, session, name = self._where()
        with shielded(FINAL_BOOKKEEPING_S):
            await _release_inboxes(bus.inboxes, session, name)

    def _where(self) -> tuple[Bus, str, str]:
        """The bus, session and name of the agent, as its inbox holds them."""
        return self._inbox.bus, self._inbox.session, self._inbox.agent

    def _unfinished(self) -> Delivery:
        log.error(
            "final bookkeeping of %s/%s timed out; another worker will finish it",
            self._inbox.session,
            self._inbox.agent,
        )
        return Delivery.UNFINISHED


def watched_inboxes(session: str, name: str) -> tuple[tuple[str, str], tuple[str, str]]:
    """The inboxes an agent may watch: its own and its approvals' (once it asked one)."""
    return (session, name), (session, approvals_inbox(name))


async def _release_inboxes(inboxes: Inboxes, session: str, name: str) -> None:
    """Stop watching the agent's inboxes: a worker hosting agent after agent would otherwise stay
    subscribed to every one's wake-up channel."""
    await persist(partial(inboxes.forget_all, watched_inboxes(session, name)), "release inbox")
