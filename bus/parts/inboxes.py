"""Agent inboxes: at-least-once delivery with wake-ups, and what both backends share of it.

Delivery is at-least-once: a message handed out and not acked is handed out again once its lease
(``BusOptions.lease_s``) expires, so consumers dedupe by envelope ``id``; each bus also drops
duplicates it has seen acked itself (:class:`InboxLedger`). What a read returns has been checked
again on the way out (:meth:`Inboxes.screen`): wire text that does not parse, an envelope
addressed to another inbox, or one unsigned or wrongly signed on a signing bus never reaches an
agent, it goes to the dead letters (:class:`~baton.bus.parts.dead.Quarantine`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Callable, Sequence

from baton.bus.errors import InvalidEnvelope
from baton.bus.messages import Envelope, check_addressed, parse_envelope
from baton.bus.options import BusOptions
from baton.bus.parts.dead import Quarantine
from baton.bus.signing import Signer

DEFAULT_WAIT_S = 60.0
_RECENT_ACKS = 256

Entry = tuple[str, str, str | None, str | None]
"""What a backend read from an inbox: the entry's receipt, its wire text, and its signature and
key id (each None when it has none)."""


class InboxLedger:
    """What one bus instance knows about one inbox: what it handed out, and what it acked.

    Kept per instance (not on the backend) because it only serves to map envelope ids back to
    backend receipts for ``ack``, and to drop a duplicate whose twin was acked moments ago. The
    memory of recent acks is made on first use: ten thousand idle agents should not each carry
    an empty deque.
    """

    __slots__ = (
        "claims_checked_at",
        "handed_out",
        "pending_epoch",
        "recent_acks",
        "recent_set",
        "releases_seen",
    )

    def __init__(self) -> None:
        self.pending_epoch = -1  # the fault epoch in which we last re-read our own pending
        self.claims_checked_at = float("-inf")  # when we last looked for expired leases
        self.releases_seen = 0  # hand-backs announced on the inbox's wake channel
        self.handed_out: dict[str, list[str]] = {}
        self.recent_acks: deque[str] | None = None
        self.recent_set: set[str] = set()

    def record(self, envelope_id: str, receipt: str) -> None:
        self.handed_out.setdefault(envelope_id, []).append(receipt)

    def was_acked(self, envelope_id: str) -> bool:
        return envelope_id in self.recent_set

    def receipts(self, envelope_ids: Sequence[str]) -> list[str]:
        """The receipts of the given ids, left in the ledger: an ack takes them only once the
        backend has acked, so a failed ack can be retried with the same receipts."""
        handed_out = self.handed_out
        return [receipt for i in envelope_ids for receipt in handed_out.get(i, ())]

    def take(self, envelope_ids: Sequence[str]) -> list[str]:
        """Forget the given ids as handed out, remember them as acked; return their receipts."""
        receipts: list[str] = []
        if self.recent_acks is None:
            self.recent_acks = deque(maxlen=_RECENT_ACKS)
        recent = self.recent_acks
        for envelope_id in envelope_ids:
            receipts.extend(self.handed_out.pop(envelope_id, ()))
            if envelope_id not in self.recent_set:
                if len(recent) == recent.maxlen:
                    self.recent_set.discard(recent[0])
                recent.append(envelope_id)
                self.recent_set.add(envelope_id)
        return receipts


class Inboxes(ABC):
    """One inbox per agent of a session, each woken when something lands in it.

    Every method may raise ``BusUnreachable`` when the backend cannot be reached after its
    retries, and ``BusClosed`` after the bus was closed (a ``wait`` in progress then ends with
    it at once). Malformed input never raises out of a read: it is dead-lettered.
    """

    __slots__ = ("_ledgers", "_quarantine", "options")

    def __init__(self, options: BusOptions, quarantine: Quarantine) -> None:
        self.options = options
        self._quarantine = quarantine
        # (session, agent) → consumer → ledger: forgetting an inbox must not scan them all.
        self._ledgers: dict[tuple[str, str], dict[str, InboxLedger]] = {}

    @property
    def consumer(self) -> str:
        """This bus's consumer name: un-acked deliveries are tracked against it."""
        return self.options.consumer

    # -- the contract ----------------------------------------------------------------------

    @abstractmethod
    async def send(self, envelope: Envelope) -> str:
        """Append to the recipient's inbox and wake it, atomically; returns the envelope id.

        Raises ``InvalidEnvelope`` for a message over the size limit (nothing is sent).
        """

    @abstractmethod
    async def send_if_running(self, envelope: Envelope) -> str:
        """``send``, only while the envelope's session runs: its lead record's ``status`` is
        ``running`` (a session whose lead died counts: ``baton resume`` reads what waits). The
        look and the write are one step, so nothing lands in a session that finished meanwhile.

        Raises ``SessionNotRunning`` (nothing sent) for a session without a lead record or
        with another status; ``InvalidEnvelope`` as ``send``.
        """

    @abstractmethod
    async def send_raw(self, session: str, recipient: str, raw: str | bytes) -> None:
        """Append unvalidated text to an inbox and wake it, as a foreign producer would.

        The reader validates it; what fails goes to the dead letters. Exists so bridges and tests
        can put exactly the bytes they want on the bus.
        """

    @abstractmethod
    async def read(
        self, session: str, agent: str, *, count: int = 100, consumer: str | None = None
    ) -> list[Envelope]:
        """The messages not yet handed out (and any whose lease expired), without blocking.

        The first read of an inbox by this instance (and the first after a reconnect) also
        returns its own un-acked deliveries, so nothing stays stranded by a lost reply.
        """

    @abstractmethod
    async def wait(self, session: str, agent: str, timeout: float = DEFAULT_WAIT_S) -> bool:
        """Block until the inbox is woken or ``timeout`` seconds pass; returns whether woken.

        A wake-up that arrives between an empty ``read`` and this call is not lost.
        ``math.inf``: no timeout of its own, for a caller whose cancel scope bounds the wait
        (an idle agent's, :meth:`baton.bus.inbox.Inbox.collect`: one scope fewer to hold).
        """

    @abstractmethod
    def park(self, session: str, agent: str, wake: Callable[[], None]) -> Callable[[], None]:
        """Call ``wake`` once, soon after the inbox is woken past this bus's last ``read`` of it
        (at once if it already was); returns what takes the park back (a call a wake-up
        already scheduled may still come: make ``wake`` idempotent).

        :meth:`wait` without a waiting task, on the same rule (a wake-up between the read and
        this call is not lost), for a host that keeps its idle readers as callbacks instead of
        tasks (subagents/parking.py). Nothing calls ``wake`` on a timeout: the caller keeps its
        own clock, as it reads again at least once a minute anyway. A bus closed, or a
        connection lost and made again, wakes it too (the reader then reads and learns which).
        """

    @abstractmethod
    async def holding(self, inboxes: Sequence[tuple[str, str]]) -> list[bool]:
        """Whether each ``(session, agent)`` inbox holds any message at all: one nobody has
        read, or one read and not acked yet (an ack removes a message). All of them in one
        step, a round trip per node, without reading or watching any.

        A parked reader's minute look (subagents/parking.py) asks this of many inboxes at once:
        an idle inbox holds nothing, and only one that holds something is worth a read.
        """

    @abstractmethod
    async def ack(
        self, session: str, agent: str, ids: Sequence[str], *, consumer: str | None = None
    ) -> None:
        """Mark messages (by envelope id) done; they are never handed out again."""

    @abstractmethod
    async def hand_back(self, session: str, agent: str, *, consumer: str | None = None) -> None:
        """Hand this consumer's un-acked deliveries of an inbox back at once (an agent given
        back during a drain), so whoever resumes the agent gets them without waiting a lease."""

    @abstractmethod
    async def forget(self, session: str, agent: str) -> None:
        """Stop watching an inbox (its agent left this process); frees its wake-up slot."""

    async def hand_back_all(self, inboxes: Sequence[tuple[str, str]]) -> None:
        """:meth:`hand_back` of each of this consumer's ``(session, agent)`` inboxes, where the
        backend can as a few operations for all of them: a stopping worker gives back every
        agent it parked at once, thousands of them, within its stop's bound (issue 24)."""
        for session, agent in inboxes:
            await self.hand_back(session, agent)

    async def forget_all(self, inboxes: Sequence[tuple[str, str]]) -> None:
        """:meth:`forget` of each inbox, where the backend can as one step (see
        :meth:`hand_back_all`)."""
        for session, agent in inboxes:
            await self.forget(session, agent)

    # -- what both backends share ----------------------------------------------------------

    def signer(self) -> Signer | None:
        """What signs and checks envelopes on this bus; None unless it has a signing key."""
        key = self.options.signing_key
        return None if key is None else Signer(key)

    def signed_fields(self, raw: str) -> tuple[str, ...]:
        """The stream fields an envelope's wire text is sent with besides ``msg``: its
        signature and key id (``sig``, ``kid``); none on a bus without a key."""
        signer = self.signer()
        return () if signer is None else signer.fields(raw)

    def ledger(self, session: str, agent: str, consumer: str | None) -> InboxLedger:
        """This bus's ledger of one inbox for ``consumer`` (this bus's own when None)."""
        by_consumer = self._ledgers.get((session, agent))
        if by_consumer is None:
            by_consumer = self._ledgers[(session, agent)] = {}
        name = consumer or self.consumer
        ledger = by_consumer.get(name)
        if ledger is None:
            ledger = by_consumer[name] = InboxLedger()
        return ledger

    def forget_ledgers(self, session: str, agent: str) -> None:
        """Drop what this bus knows of one inbox (its agent left, or never ran)."""
        self._ledgers.pop((session, agent), None)

    def forget_session_ledgers(self, session: str) -> None:
        """Drop what this bus knows of every inbox of ``session`` (it is gone for good)."""
        for key in [key for key in self._ledgers if key[0] == session]:
            del self._ledgers[key]

    async def screen(
        self, session: str, agent: str, ledger: InboxLedger, entries: Sequence[Entry], source: str
    ) -> tuple[list[Envelope], list[str]]:
        """Validate what a read returned: dead-letter the malformed (text that is not UTF-8,
        an envelope addressed to another inbox, one unsigned or wrongly signed on a signing bus
        included) and drop duplicates.

        Returns the envelopes to hand out and the receipts to remove from the inbox now.
        """
        envelopes: list[Envelope] = []
        drop: list[str] = []
        signer = self.signer()
        for receipt, raw, sig, kid in entries:
            try:
                if signer is not None:
                    signer.check(raw, sig, kid)
                envelope = parse_envelope(raw, max_bytes=self.options.max_message_bytes)
                check_addressed(envelope, session, agent)
            except InvalidEnvelope as exc:
                await self._quarantine(exc, source=source, session=session, raw=raw)
                drop.append(receipt)
                continue
            if ledger.was_acked(envelope.id):
                drop.append(receipt)  # a duplicate of something already done
                continue
            first = envelope.id not in ledger.handed_out
            ledger.record(envelope.id, receipt)
            if first:
                envelopes.append(envelope)
        return envelopes, drop
