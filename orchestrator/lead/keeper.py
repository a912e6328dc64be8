"""The lead's durable side: its lease, its record on the bus, and taking a dead lead's place.

A session's lead holds a lease (``baton:{S}:lead:lease``) while it runs and writes its record
(``baton:{S}:lead``) through it, so that:

- one lead runs a session: a new session whose lease a live lead holds is refused, and a resume
  waits for the lease to lapse (a live lead renews it first: then it is refused too);
- a lead taken over after a stall cannot write over its successor: every write is fenced by the
  lease in the same step (:meth:`~baton.bus.base.Bus.hold_lead`), and a refused write raises
  :class:`LeadTakenOver`, on which the lead stops without a word;
- exactly one final answer is logged: the outcome is recorded (``finishing``) before its
  ``session.finished`` goes out, so a lead that dies between the two is finished by the resume
  with that same outcome, never with a second one.

The record's fields and when each is written are in ``docs/protocol.md`` (*The lead's checkpoint
and resuming a session*); why the layout is what it is, in ``docs/bus.md``.
"""

from __future__ import annotations

import json
import logging
import os
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

import anyio
from anyio.abc import TaskStatus
from pydantic import BaseModel, ConfigDict, ValidationError

from baton.bus.base import Bus, LeadLease
from baton.bus.errors import BusError, BusUnreachable
from baton.bus.events import SessionFinished
from baton.bus.ids import new_id
from baton.bus.messages import LEAD_NAME
from baton.bus.parts.records import LEAD_LEASE_S
from baton.bus.retry import persist
from baton.errors import BatonError, ConfigError
from baton.lead.checkpoint import LeadCheckpoint
from baton.lead.outcome import LeadOutcome, LeadStatus
from baton.llm.types import Message

log = logging.getLogger(__name__)

T = TypeVar("T")

RENEWALS_PER_LEASE = 3
LEASE_SLACK_S = 0.25
"""A resume looks at a held lease again this long after its time was up."""


class ResumeRefused(ConfigError):
    """The session cannot be resumed: it has no lead record, it finished, its lead is alive, or
    its bus cannot hold one (``memory://``). ``baton resume`` exits 2 with the message."""


class SessionExists(ConfigError):
    """A new session was given the id of one the bus already knows (its lead runs, or it has a
    lead record or an event log): refused, never appended to. ``baton run`` exits 2 with it."""


class LeadTakenOver(BatonError):
    """Another lead took this session's lease (this one stalled past it): this lead stops
    without touching the session again."""

    def __init__(self, session: str, holder: str) -> None:
        super().__init__(
            f"session {session}: another lead ({holder}) took the session over after this "
            "lead's lease lapsed; this one stops"
        )
        self.session = session
        self.holder = holder


class _Outcome(BaseModel):
    model_config = ConfigDict(defer_build=True)

    status: LeadStatus
    answer: str = ""
    media_urls: list[str] = []
    error: str = ""
    invented_urls: list[str] = []


@dataclass(frozen=True, slots=True)
class LeadRecord:
    """A lead's record as read back for a resume."""

    status: str
    setup: str
    consumer: str
    history: list[Message] | None
    """The conversation at the last step; None before the first checkpoint."""
    checkpoint: LeadCheckpoint | None
    outcome: LeadOutcome | None
    """The decided outcome of a ``finishing`` lead."""

    @property
    def restorable(self) -> bool:
        """Whether it holds a checkpoint to carry on from (else the lead starts on its task)."""
        return self.history is not None and self.checkpoint is not None

    @classmethod
    def of(cls, session: str, fields: dict[str, str]) -> LeadRecord:
        """Parse the record; a field that cannot be read is a :class:`ResumeRefused`."""
        try:
            history = json.loads(fields["history"]) if fields.get("history") else None
            state = fields.get("state")
            checkpoint = LeadCheckpoint.model_validate_json(state) if state else None
            raw = fields.get("outcome")
            decided = _Outcome.model_validate_json(raw) if raw else None
        except (ValueError, ValidationError) as exc:
            why = f"session {session}: its lead checkpoint cannot be read: {exc}"
            raise ResumeRefused(why) from exc
        if history is not None and not isinstance(history, list):
            raise ResumeRefused(f"session {session}: its lead's history is not a list")
        outcome = None
        if decided is not None:
            outcome = LeadOutcome(
                decided.status,
                decided.answer,
                decided.media_urls,
                decided.error,
                decided.invented_urls,
            )
        return cls(
            status=fields.get("status", ""),
            setup=fields.get("setup", ""),
            consumer=fields.get("consumer", ""),
            history=history,
            checkpoint=checkpoint,
            outcome=outcome,
        )


async def has_events(bus: Bus, session: str) -> bool:
    """Whether the session's event log holds anything (read no further than its first event)."""
    events = bus.log.tail(session, follow=False)
    try:
        async for _logged in events:
            return True
        return False
    finally:
        aclose = getattr(events, "aclose", None)
        if aclose is not None:
            await aclose()


async def lead_lost(bus: Bus, session: str) -> bool:
    """Whether the session's lead died: it has a lead record that is not ``finished`` and
    nobody holds its lead lease (a live lead renews it every third of a lease). Its
    ``session.finished`` may still be logged (a lead that died between the two): check the log.
    ``baton resume`` continues such a session."""
    record = await bus.records.lead(session)
    if not record or record.get("status") == "finished":
        return False
    return await bus.records.lead_lease(session) is None


def holder_name() -> str:
    """This lead's name on the lease: where it runs, and unique."""
    return f"{socket.gethostname()}:{os.getpid()}:{new_id()[-8:]}"


class LeadKeeper:
    """One session's lead lease and record; see the module docstring.

    ``give_up`` (the lead was cancelled) ends the retries of a write through a bus outage;
    ``outage_s`` bounds them (:func:`~baton.bus.retry.persist`).
    """

    def __init__(
        self,
        bus: Bus,
        session: str,
        *,
        holder: str | None = None,
        lease_s: float = LEAD_LEASE_S,
        outage_s: float | None = None,
        give_up: Callable[[], bool] = lambda: False,
    ) -> None:
        self.bus = bus
        self.session = session
        self.holder = holder or holder_name()
        self.lease_s = lease_s
        self._outage_s = outage_s
        self._give_up = give_up
        self._held = False
        self._renewing: anyio.CancelScope | None = None
        self.closed = False
        """This lead closed (:meth:`close`): nothing reached its inbox unread after that."""
        self.began = False
        """This lead wrote its record (a new session's, or a dead lead's taken over): from now on
        the record's status says whether it reads posts (``send_if_running``)."""

    # -- taking the lead ------------------------------------------------------------------------

    async def claim(self) -> None:
        """Take the lease for a new session: refused (:class:`SessionExists`) while a live lead
        holds it, and for an id the bus already has a lead record or an event log of.

        The lease is taken first, so of two new sessions given one id at once only one gets
        past it; the other id checks then run under the lease, and a refusal gives it back."""
        lease = await self._hold({})
        if not lease.held:
            raise SessionExists(
                f"session {self.session} is running: its lead ({lease.holder}) holds the "
                f"session's lease for {lease.ttl_s:.1f} s more; pick another session id (or "
                f"none: a new one is drawn), or follow it up with `baton post --session "
                f"{self.session} --to lead TEXT`"
            )
        try:
            known = await self._known_as()
        except BaseException:
            await self.let_go()
            raise
        if known:
            await self.let_go()
            raise SessionExists(
                f"session {self.session} already exists on this bus ({known}); a session id "
                "names one session: pick another (or none: a new one is drawn); "
                f"`baton watch {self.session} --from-start` shows it, `baton resume "
                f"{self.session}` continues one whose lead died"
            )

    async def _known_as(self) -> str:
        """What the bus already holds of this session id ('' when nothing)."""
        fields = await self._persist(lambda: self.bus.records.lead(self.session), "read the lead")
        if fields:
            return f"its lead record says {fields.get('status') or 'unknown'}"
        return "it has an event log" if await has_events(self.bus, self.session) else ""

    async def take_over(self) -> LeadRecord:
        """Take the place of a lead that died: refused when there is none to take (no record,
        finished) or it is alive (it renews its lease within one lease). Waits at most one
        lease for a dead lead's lease to lapse."""
        await self._record()  # refused now if there is nothing to take over
        seen: LeadLease | None = None
        while True:
            lease = await self._hold({})
            if lease.held:
                break
            if seen is not None:  # renewed, or taken by another resume, since we last looked
                raise ResumeRefused(
                    f"session {self.session}: its lead is alive ({lease.holder} renewed the "
                    "session's lease); nothing to resume"
                )
            seen = lease
            log.info("session %s: waiting %.1f s for the lease of %s to lapse",
                     self.session, lease.ttl_s, lease.holder)  # fmt: skip
            await anyio.sleep(lease.ttl_s + LEASE_SLACK_S)
        try:
            record = await self._record()  # it may have finished while we waited
        except ResumeRefused:
            await self.let_go()
            raise
        if record.outcome is not None and await self.finished_in_log() is not None:
            await self.ended()  # it died after logging its end: the record catches up
            raise ResumeRefused(f"session {self.session} finished: nothing to resume")
        return record

    async def _record(self) -> LeadRecord:
        fields = await self._persist(lambda: self.bus.records.lead(self.session), "read the lead")
        if not fields:
            raise ResumeRefused(
                f"session {self.session} has no lead checkpoint on this bus: it never ran here "
                "(check --bus and --prefix), or its keys are gone"
            )
        record = LeadRecord.of(self.session, fields)
        if record.status == "finished":
            raise ResumeRefused(f"session {self.session} finished: nothing to resume")
        if not record.setup:
            raise ResumeRefused(f"session {self.session}: its lead record has no setup")
        return record

    async def finished_in_log(self) -> SessionFinished | None:
        """The ``session.finished`` the session's log holds, if any."""
        found: SessionFinished | None = None
        async for logged in self.bus.log.tail(self.session, follow=False):
            if isinstance(logged.event, SessionFinished):
                found = logged.event
        return found

    # -- while it runs --------------------------------------------------------------------------

    async def begin(self, setup: str) -> None:
        """A new session's record: running, its setup, nothing of an earlier run of this id."""
        fields = {
            "status": "running",
            "setup": setup,
            "consumer": self.bus.consumer,
            "history": "",
            "state": "",
            "outcome": "",
        }
        await self._write(fields)
        self.began = True

    async def adopt_inbox(self, record: LeadRecord) -> None:
        """After a resume handed the dead lead's inbox entries back: the lead's inbox is read
        with this process's consumer from now on. A lead that died ``closing`` (answered, its
        outcome not yet decided) runs again, so it takes posts again until it closes anew."""
        fields = {"consumer": self.bus.consumer}
        if record.status == "closing":
            fields["status"] = "running"
        await self._write(fields)
        self.began = True

    async def save(self, checkpoint: LeadCheckpoint, history: list[Message] | None) -> None:
        """One checkpoint (the lead's :class:`~baton.lead.checkpoint.CheckpointSink`): fenced by
        the lease; best effort once the lead was cancelled and the bus is away."""
        fields = {"state": checkpoint.model_dump_json()}
        if history is not None:
            fields["history"] = json.dumps(history, ensure_ascii=False)
        try:
            await self._write(fields)
        except BusUnreachable as exc:
            if not self._give_up():
                raise
            log.warning("session %s: the lead's last checkpoint was not written: %s",
                        self.session, exc)  # fmt: skip

    async def keep(
        self,
        *,
        on_lost: Callable[[LeadTakenOver], None],
        task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """Renew the lease every third of it until cancelled or :meth:`stop_renewing`; a bus
        fault skips a renewal (the session's own outage handling decides when it is gone). A
        lease found taken calls ``on_lost``."""
        with anyio.CancelScope() as scope:
            self._renewing = scope
            task_status.started()
            while True:
                await anyio.sleep(self.lease_s / RENEWALS_PER_LEASE)
                try:
                    lease = await self.bus.records.hold_lead(
                        self.session, self.holder, self.lease_s
                    )
                except BusError as exc:
                    log.debug("session %s: lead lease not renewed: %s", self.session, exc)
                    continue
                if not lease.held:
                    self._held = False
                    on_lost(LeadTakenOver(self.session, lease.holder))
                    return

    def stop_renewing(self) -> None:
        if self._renewing is not None:
            self._renewing.cancel()

    # -- the end --------------------------------------------------------------------------------

    async def close(self) -> bool:
        """``closing``: the lead's last read found nothing, and it reads no more, so a post
        (``send_if_running``) is refused from now on; written only while the lead's inbox holds
        nothing unread, in the same step (False: nothing written, it reads first)."""
        self.closed = await self._write({"status": "closing"}, if_read=LEAD_NAME)
        return self.closed

    async def decided(self, outcome: LeadOutcome) -> None:
        """Record the outcome before its ``session.finished`` is logged (``finishing``)."""
        decided = _Outcome(
            status=outcome.status,
            answer=outcome.answer,
            media_urls=outcome.media_urls,
            error=outcome.error,
            invented_urls=outcome.invented_urls,
        )
        await self._write({"status": "finishing", "outcome": decided.model_dump_json()})

    async def ended(self) -> None:
        """``session.finished`` is logged: the session is over, and its lease given up."""
        self.stop_renewing()
        await self._write({"status": "finished"}, lease_s=0)

    async def let_go(self) -> None:
        """Give the lease up if this keeper holds it (a session closed without an end of its
        own): a resume need not wait for it. Best effort, bounded."""
        self.stop_renewing()
        if not self._held:
            return
        with anyio.move_on_after(self.lease_s / RENEWALS_PER_LEASE, shield=True):
            try:
                await self.bus.records.hold_lead(self.session, self.holder, 0)
                self._held = False
            except BusError as exc:
                log.debug("session %s: lead lease not given up: %s", self.session, exc)

    # -- helpers --------------------------------------------------------------------------------

    async def _write(
        self, fields: dict[str, str], *, lease_s: float | None = None, if_read: str | None = None
    ) -> bool:
        """Write the record through the lease (``owner``: who wrote it last), or raise
        :class:`LeadTakenOver` when another holds the lease. False: nothing was written, as
        ``if_read``'s inbox holds what nobody read (:meth:`~baton.bus.base.Bus.hold_lead`)."""
        lease = await self._hold({**fields, "owner": self.holder}, lease_s, if_read=if_read)
        if not lease.held:
            self._held = False
            raise LeadTakenOver(self.session, lease.holder)
        return not lease.unread

    async def _hold(
        self, fields: dict[str, str], lease_s: float | None = None, *, if_read: str | None = None
    ) -> LeadLease:
        lease_s = self.lease_s if lease_s is None else lease_s
        records = self.bus.records
        lease = await self._persist(
            lambda: records.hold_lead(self.session, self.holder, lease_s, fields, if_read=if_read),
            "lead record",
        )
        self._held = lease.held and lease_s > 0
        return lease

    async def _persist(self, operation: Callable[[], Awaitable[T]], what: str) -> T:
        return await persist(
            operation, f"{self.session}: {what}", give_up=self._give_up, outage_s=self._outage_s
        )
