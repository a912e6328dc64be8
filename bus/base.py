"""The ``Bus`` interface: what every backend guarantees, and what it raises.

Two backends implement it — :class:`baton.bus.memory.MemoryBus` (in-process, the default) and
:class:`baton.bus.redis.RedisBus` — and one contract test suite runs against both. Delivery is
at-least-once: a message handed out and not acked is handed out again once its lease expires, so
consumers dedupe by envelope ``id`` (the bus also drops duplicates it has seen acked itself).

Errors: every method may raise ``BusUnreachable`` when the backend cannot be reached after its
retries, and ``BusClosed`` after ``aclose()``. Malformed input never raises out of a read: it is
moved to the dead-letter stream with its reason and an ``error`` event goes to the session's log.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import AsyncIterator, Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Literal, Self

from pydantic import SecretStr

from baton.bus.errors import BusClosed, InvalidEnvelope, redact_url
from baton.bus.events import ErrorEvent, Event
from baton.bus.ids import new_id
from baton.bus.messages import (
    DEFAULT_MAX_MESSAGE_BYTES,
    DEFAULT_POOL,
    KEY_ID_KEY,
    LOCAL_POOL,
    DeadLetter,
    Envelope,
    SpawnRequest,
    check_addressed,
    check_pool,
    parse_envelope,
)
from baton.bus.signing import Signer, key_id, key_mismatch, stored_key_id
from baton.bus.spend import SpendLimits, SpendTotals

log = logging.getLogger(__name__)

DEFAULT_WAIT_S = 60.0
DEFAULT_LEASE_S = 30.0
DEFAULT_EVENT_LOG_CAP = 10_000
DEFAULT_RETENTION_S = 7 * 24 * 3600.0
"""How long a finished session's data is kept (``docs/bus.md``, *Retention*)."""
_RECENT_ACKS = 256


@dataclass(frozen=True, slots=True)
class LoggedEvent:
    """An event read back from a session log; ``cursor`` resumes a tail right after it."""

    cursor: str
    event: Event


@dataclass(frozen=True, slots=True)
class SpawnClaim:
    """A spawn request this worker now owns; ``receipt`` renews, acks or releases it.

    A receipt is opaque to callers; on both backends it names the request's stream too
    (``<entry id>@<stream>``), so it alone says where to renew, ack or release.
    """

    receipt: str
    request: SpawnRequest


def spawn_receipt(stream: str, entry_id: str) -> str:
    """A claim's receipt on either backend: its entry and the stream it sits in."""
    return f"{entry_id}@{stream}"


def spawn_receipts_by_stream(receipts: Sequence[str]) -> dict[str, list[str]]:
    """Receipts grouped by their stream: stream → entry ids (an entry id holds no ``@``)."""
    grouped: dict[str, list[str]] = {}
    for receipt in receipts:
        entry_id, at, stream = receipt.partition("@")
        if not at or not entry_id or not stream:
            raise ValueError(f"{receipt!r} is not a spawn receipt (<entry id>@<stream>)")
        grouped.setdefault(stream, []).append(entry_id)
    return grouped


SpawnState = Literal["queued", "claimed", "gone"]
"""Where a submitted spawn request stands (:meth:`Bus.spawn_states`): still waiting in its queue,
delivered to a worker (and not acked yet), or no longer in its queue (acked, withdrawn,
deleted)."""
SpawnListener = Callable[[SpawnRequest, str], None]
"""Told of each spawn request a bus submits for one session, with its receipt
(:meth:`Bus.watch_spawns`)."""


@dataclass(frozen=True, slots=True)
class SpawnQueue:
    """What a worker claims from: one session's own spawn requests (``session`` set: the worker
    inside that session), or those routed to ``pool`` for the ``profiles`` it knows.

    A worker never sees a request outside its queue, so it never answers one another worker
    could serve (``docs/protocol.md``, *Spawn requests and worker pools*).
    """

    pool: str = DEFAULT_POOL
    profiles: frozenset[str] = frozenset()
    session: str | None = None

    @classmethod
    def of_session(cls, session: str) -> SpawnQueue:
        """The requests of ``session`` routed to its own worker (``pool`` = ``local``)."""
        return cls(pool=LOCAL_POOL, session=session)

    @classmethod
    def of_pool(cls, pool: str, profiles: Iterable[str]) -> SpawnQueue:
        """The requests routed to ``pool`` for one of ``profiles``; raises ``ValueError`` for a
        malformed pool name or the reserved ``local``."""
        return cls(pool=check_pool(pool), profiles=frozenset(profiles))

    @property
    def local(self) -> bool:
        return self.session is not None

    def __str__(self) -> str:
        if self.session is not None:
            return f"session {self.session}'s own queue"
        return f"pool {self.pool} ({', '.join(sorted(self.profiles)) or 'no profiles'})"


@dataclass(frozen=True, slots=True)
class LeadLease:
    """How :meth:`Bus.hold_lead` went: ``held`` (the fields were written), or the lead that
    holds the lease instead (``holder``) and how long it still has (``ttl_s``)."""

    held: bool
    holder: str = ""
    ttl_s: float = 0.0


@dataclass(frozen=True, slots=True)
class Retired:
    """What :meth:`Bus.retire_session` did: the keys given a lifetime, the consumers deleted
    (their pending lists were empty), the unread entries dropped from inboxes nobody reads."""

    keys: int = 0
    consumers: int = 0
    dropped: int = 0


@dataclass(slots=True)
class BusOptions:
    """Tunables shared by both backends."""

    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    lease_s: float = DEFAULT_LEASE_S
    event_log_cap: int = DEFAULT_EVENT_LOG_CAP
    consumer: str = field(default_factory=lambda: f"c-{new_id()[-12:]}")
    signing_key: SecretStr | None = None
    """Sign every envelope sent and refuse unsigned or wrongly signed ones on every inbox read
    (:mod:`baton.bus.signing`); None (the default): envelopes are neither signed nor checked."""


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


class Bus(ABC):
    """One message bus: inboxes with wake-ups, a session event log, a spawn queue, dead letters.

    Use it as an async context manager (or call ``aclose()``); a closed bus raises ``BusClosed``.
    """

    url: str

    def __init__(self, options: BusOptions | None = None) -> None:
        self.options = options or BusOptions()
        self._closed = False
        self._in_context = False
        # (session, agent) → consumer → ledger: forgetting an inbox must not scan them all.
        self._ledgers: dict[tuple[str, str], dict[str, InboxLedger]] = {}
        self._spawn_listeners: dict[str, list[SpawnListener]] = {}

    @property
    def consumer(self) -> str:
        """This instance's consumer name: un-acked deliveries are tracked against it."""
        return self.options.consumer

    async def __aenter__(self) -> Self:
        await self.start()
        self._in_context = True
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
        await self._finish()

    async def _finish(self) -> None:
        """The part of closing that must happen where the bus was opened (a backend with
        background tasks exits their task group here); nothing for a bus without any."""
        return None

    async def start(self) -> None:
        """Connect (a no-op for the memory bus). Raises ``BusUnreachable`` if it cannot."""
        self._check_open()

    async def aclose(self) -> None:
        """Release every connection and wake every waiter; idempotent."""
        self._closed = True

    def _check_open(self) -> None:
        if self._closed:
            raise BusClosed(f"the bus {redact_url(self.url)} is closed; open a new one")

    # -- inboxes ---------------------------------------------------------------------------

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
    async def read_inbox(
        self, session: str, agent: str, *, count: int = 100, consumer: str | None = None
    ) -> list[Envelope]:
        """The messages not yet handed out (and any whose lease expired), without blocking.

        The first read of an inbox by this instance (and the first after a reconnect) also
        returns its own un-acked deliveries, so nothing stays stranded by a lost reply.
        """

    @abstractmethod
    async def wait(self, session: str, agent: str, timeout: float = DEFAULT_WAIT_S) -> bool:
        """Block until the inbox is woken or ``timeout`` seconds pass; returns whether woken.

        A wake-up that arrives between an empty ``read_inbox`` and this call is not lost.
        """

    @abstractmethod
    async def ack(
        self, session: str, agent: str, ids: Sequence[str], *, consumer: str | None = None
    ) -> None:
        """Mark messages (by envelope id) done; they are never handed out again."""

    @abstractmethod
    async def release_inbox(self, session: str, agent: str, *, consumer: str | None = None) -> None:
        """Hand this consumer's un-acked deliveries of an inbox back at once (an agent given
        back during a drain), so whoever resumes the agent gets them without waiting a lease."""

    @abstractmethod
    async def release(self, session: str, agent: str) -> None:
        """Stop watching an inbox (its agent left this process); frees its wake-up slot."""

    # -- session event log -----------------------------------------------------------------

    @abstractmethod
    async def emit(self, event: Event) -> str:
        """Append to ``event.session``'s log (capped); returns the event's cursor."""

    @abstractmethod
    async def emit_once(
        self, session: str, agent: str, events: Sequence[Event], *, mark: str
    ) -> bool:
        """Append ``events`` to the session's log unless the agent's state already records
        ``mark`` (its ``logged`` field), and record it, in one step; whether they were appended.

        For a step that a worker killed half-way leaves to the next owner: redone, it is still
        logged once (a sub-agent's exit events, marked with its final report's id)."""

    @abstractmethod
    def events(
        self, session: str, *, after: str | None = None, follow: bool = True
    ) -> AsyncIterator[LoggedEvent]:
        """Events after ``after`` (all when None), in order; with ``follow`` keeps tailing."""

    @abstractmethod
    async def sessions(self) -> list[str]:
        """Ids of the sessions with an event log, most recently active first."""

    # -- spawn queue -----------------------------------------------------------------------

    async def submit_spawn(self, request: SpawnRequest) -> str:
        """Queue a request to start a sub-agent where its ``pool`` routes it; returns its
        receipt.

        The request goes out with this bus's signing key id in ``meta.key_id`` (unless it names
        one already; ``""`` without a key), so the worker that claims it can tell at once whether
        it can read the agent's messages and the session its reports (docs/protocol.md, *Signed
        envelopes*). Whoever watches the session's spawns here (:meth:`watch_spawns`) is told."""
        if KEY_ID_KEY not in request.meta:
            meta = {**request.meta, KEY_ID_KEY: self.key_id}
            request = request.model_copy(update={"meta": meta})
        receipt = await self._submit_spawn(request)
        for listener in self._spawn_listeners.get(request.session, ()):
            listener(request, receipt)
        return receipt

    def watch_spawns(self, session: str, listener: SpawnListener) -> Callable[[], None]:
        """Tell ``listener`` of every spawn request this bus submits for ``session`` from now
        on, with its receipt (a session's watch over its own requests that no worker claims);
        returns what stops it."""
        self._spawn_listeners.setdefault(session, []).append(listener)

        def stop() -> None:
            listeners = self._spawn_listeners.get(session, [])
            if listener in listeners:
                listeners.remove(listener)
            if not listeners:
                self._spawn_listeners.pop(session, None)

        return stop

    @abstractmethod
    async def _submit_spawn(self, request: SpawnRequest) -> str:
        """Append the request to the stream its routing names and wake that stream's workers;
        returns its receipt."""

    @abstractmethod
    async def spawn_states(self, receipts: Sequence[str]) -> dict[str, SpawnState]:
        """Where each submitted request (``submit_spawn``'s receipts) stands: ``queued`` (no
        worker has claimed it), ``claimed`` (delivered to a worker, not acked) or ``gone``."""

    # -- workers ---------------------------------------------------------------------------

    @abstractmethod
    async def announce_worker(
        self, pool: str, worker: str, profiles: Collection[str], ttl_s: float
    ) -> None:
        """Say that ``worker`` serves ``pool`` for ``profiles`` for the next ``ttl_s`` seconds
        (a live worker renews it; ``ttl_s`` 0 withdraws it at once: the worker stopped). What
        a session asks before it gives up on a request nobody claims (:meth:`pool_workers`)."""

    @abstractmethod
    async def pool_workers(self, pool: str) -> dict[str, frozenset[str]]:
        """The workers of ``pool`` whose announcement is live, each with the profiles it
        serves."""

    @abstractmethod
    async def claim_spawn(self, queue: SpawnQueue, *, timeout: float = 0.0) -> SpawnClaim | None:
        """Claim one request of ``queue`` for this worker (or one a dead worker's lease let go),
        or None.

        Each request goes to exactly one claimant, and only to a claimant whose queue holds it.
        Waits up to ``timeout`` for one to arrive.
        """

    @abstractmethod
    async def leave_spawn(self, queue: SpawnQueue) -> None:
        """The worker of a session's own queue stopped: stop watching its wake-ups and forget
        it (a server hosting many sessions would otherwise collect them). A pool's queue may be
        shared by several workers of this process, and is kept."""

    @abstractmethod
    async def renew_spawn(self, receipts: Sequence[str]) -> list[str]:
        """Heartbeat: restart the lease of requests this worker still holds.

        Returns the receipts that are still ours. One missing was taken over by another worker
        after our lease lapsed (a stall, a partition): stop running that agent, its new owner
        resumes it. Renewal never takes a request back from its new owner.
        """

    @abstractmethod
    async def ack_spawn(self, receipts: Sequence[str]) -> None:
        """The agent is done for good: the request leaves the queue."""

    @abstractmethod
    async def release_spawn(self, receipts: Sequence[str]) -> None:
        """Give requests back at once (graceful drain) so another worker resumes them."""

    @abstractmethod
    async def withdraw_spawn(self, receipts: Sequence[str]) -> list[str]:
        """Take back the requests (``submit_spawn``'s receipts) that no worker has claimed yet:
        their session is ending. Each is deleted in one step with that check, so it is never
        claimed, and its agent's inbox goes with it (the agent never ran, nothing will read
        it). Returns the receipts withdrawn; a request already claimed is left as it is."""

    @abstractmethod
    async def drop_spawn_queue(self, session: str) -> int:
        """The session ended: delete its own spawn queue with whatever is left in it (requests
        of agents given back unfinished, which nobody will resume). Returns how many requests
        it held."""

    # -- agent state -----------------------------------------------------------------------

    @abstractmethod
    async def set_agent_state(self, session: str, agent: str, fields: Mapping[str, str]) -> None:
        """Merge fields into the agent's state record (status, worker, checkpoint...)."""

    @abstractmethod
    async def get_agent_state(self, session: str, agent: str) -> dict[str, str]:
        """The agent's state record; empty when it has none."""

    # -- the session's lead ----------------------------------------------------------------

    @abstractmethod
    async def hold_lead(
        self, session: str, holder: str, lease_s: float, fields: Mapping[str, str] | None = None
    ) -> LeadLease:
        """Take or renew the session's lead lease for ``holder`` and merge ``fields`` into the
        lead's record, in one step; when another holder's lease is live, write nothing.

        ``lease_s`` 0 writes, then gives the lease up (a lead that finished). The lease lets one
        lead run a session and fences its checkpoints (``docs/protocol.md``).
        """

    @abstractmethod
    async def lead_record(self, session: str) -> dict[str, str]:
        """The lead's record (status, setup, checkpoint...); empty when it has none."""

    @abstractmethod
    async def lead_lease(self, session: str) -> LeadLease | None:
        """Who holds the session's lead lease now (``held`` True, the holder, the time it has
        left), without touching it; None when nobody does (no lead yet, or its lease lapsed)."""

    # -- the session's budget --------------------------------------------------------------

    @abstractmethod
    async def set_spend_limits(self, session: str, limits: SpendLimits) -> None:
        """Set (replace) the session's caps; what was spent so far is kept."""

    @abstractmethod
    async def reserve_spend(self, session: str) -> SpendTotals:
        """Count one model call, atomically with the check that the budget allows it; returns
        the totals after it. Raises ``SpendRefused`` (counting nothing) once a cap is reached.

        A call retried after a lost reply may be counted twice: a budget errs on the safe side.
        """

    @abstractmethod
    async def record_spend(self, session: str, tokens: int) -> SpendTotals:
        """Add a finished call's tokens; returns the totals after it."""

    @abstractmethod
    async def spend(self, session: str) -> SpendTotals:
        """The session's totals and caps (zeros and no caps for a session without any)."""

    # -- retention -------------------------------------------------------------------------

    async def retire_session(
        self,
        session: str,
        retention_s: float,
        *,
        agents: Collection[str] = (),
        inboxes: Collection[str] = (),
        unread: Collection[str] = (),
    ) -> Retired:
        """The session's end is logged: everything the bus keeps of it lives ``retention_s``
        more seconds, then goes (``docs/bus.md``, *Retention*). ``agents`` name its agents
        (their state records), ``inboxes`` every inbox it used; those of ``unread`` (among
        ``inboxes``) nobody reads any more, and are emptied now. A backend whose data ends with
        its process keeps nothing to expire: the default does nothing."""
        return Retired()

    async def session_expiry(self, session: str) -> float | None:
        """Seconds until the session's data expires; None when it has no expiry (it runs, it
        never logged its end, or the backend keeps nothing past its process)."""
        return None

    # -- the session's HTTP tokens (docs/http.md, *Session tokens*) -------------------------

    @abstractmethod
    async def save_token_scopes(self, session: str, scopes: Mapping[str, str]) -> None:
        """Record the session's HTTP tokens: token digest → scope (``read`` or ``write``).

        Only digests are kept, so whoever can read the bus cannot use what it reads; kept on the
        bus so every server sharing it accepts the tokens, and they end with the session."""

    @abstractmethod
    async def token_scope(self, session: str, digest: str) -> str | None:
        """The scope recorded for the token of ``digest`` in ``session``; None when unknown."""

    # -- dead letters and health -----------------------------------------------------------

    @abstractmethod
    async def dead_letters(self, count: int = 100) -> list[DeadLetter]:
        """The most recent dead letters, oldest first."""

    @abstractmethod
    async def ping(self) -> None:
        """Raises ``BusUnreachable`` unless the backend answers."""

    async def probe(self, timeout_s: float) -> None:
        """Raises ``BusUnreachable`` unless the bus can carry a session now, checked within
        ``timeout_s``: the backend answers, takes a write, and delivers a wake-up to this process.

        A ``PING`` alone says too little: a process whose wake-ups no longer arrive answers it
        while every agent it hosts waits for ever (issue 22). This default suits a backend whose
        wake-ups cannot be lost (in-process); Redis sends one round trip through its pub/sub."""
        await self.ping()

    def signer(self) -> Signer | None:
        """What signs and checks envelopes on this bus; None unless it has a signing key."""
        key = self.options.signing_key
        return None if key is None else Signer(key)

    async def key_problem(self, session: str, *, sender: str = "this command") -> str | None:
        """Why ``session`` would refuse what this bus sends it (one line that says what to
        do): the session signs its envelopes (its stored setup records its key id) and this bus
        does not, or with another key. None when the keys agree, the session signs nothing, or
        it records no key id. A sender asks before it sends, so nothing goes out to be
        dead-lettered unread."""
        stored = stored_key_id((await self.lead_record(session)).get("setup", ""))
        if not stored:
            return None
        return key_mismatch(stored, self.key_id, they=f"session {session}", we=sender)

    @property
    def key_id(self) -> str:
        """The id of this bus's signing key (``baton.bus.signing.key_id``; never the key), or
        ``""`` when it signs nothing."""
        return key_id(self.options.signing_key)

    def _signed_fields(self, raw: str) -> tuple[str, ...]:
        """The stream fields an envelope's wire text is sent with besides ``msg``: its
        signature and key id (``sig``, ``kid``); none on a bus without a key."""
        signer = self.signer()
        return () if signer is None else signer.fields(raw)

    def _ledger(self, session: str, agent: str, consumer: str | None) -> InboxLedger:
        by_consumer = self._ledgers.get((session, agent))
        if by_consumer is None:
            by_consumer = self._ledgers[(session, agent)] = {}
        name = consumer or self.consumer
        ledger = by_consumer.get(name)
        if ledger is None:
            ledger = by_consumer[name] = InboxLedger()
        return ledger

    def _forget_ledgers(self, session: str, agent: str) -> None:
        self._ledgers.pop((session, agent), None)

    async def _screen(
        self,
        session: str,
        agent: str,
        ledger: InboxLedger,
        entries: Sequence[tuple[str, str, str | None, str | None]],
        source: str,
    ) -> tuple[list[Envelope], list[str]]:
        """Validate what a read returned (receipt, wire text, signature and key id, each or
        None): dead-letter the
        malformed (text that is not UTF-8, an envelope addressed to another inbox, one unsigned
        or wrongly signed on a signing bus included) and drop duplicates.

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
                await self._dead_letter(exc, source=source, session=session, raw=raw)
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

    @abstractmethod
    async def _store_dead_letter(self, letter: DeadLetter) -> None:
        """Append to the dead-letter stream."""

    async def _dead_letter(
        self, error: InvalidEnvelope, *, source: str, session: str | None, raw: str | bytes
    ) -> None:
        """Move a rejected message aside with its reason, and tell the session's observers."""
        text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
        letter = DeadLetter(
            id=new_id(), reason=error.reason, source=source, session=session, raw=text[:65536]
        )
        log.warning("dead letter from %s: %s", source, error.reason)
        await self._store_dead_letter(letter)
        if session is not None:
            await self.emit(
                ErrorEvent(
                    session=session,
                    agent="bus",
                    message=f"a malformed message was moved to the dead letters: {letter.reason}",
                    detail={"dead_letter": letter.id, "source": source},
                )
            )
