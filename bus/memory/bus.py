"""The in-process bus: the embedded default, not a test fake.

It keeps the wire format — inboxes store JSON text and every read validates it again — so a
serialisation bug shows up here without Redis, and its delivery rules (consumer leases,
redelivery, dead letters) match the Redis backend's, which one contract test suite checks.
Everything runs on one event loop, so no locks are needed: there is no await between a check and
the update it guards.

**A bounded number of finished sessions.** A session is finished once its ``session.finished``
event is logged (a ``session.started`` logged later makes it running again). The bus keeps the
newest ``finished_kept`` finished sessions (default :data:`DEFAULT_FINISHED_KEPT`), and when one
more finishes it forgets the oldest entirely: its event log, inboxes, agent and lead records, lease,
budget, own spawn queue and wake-up watches. A running session is never dropped, however many
there are. So a long-lived in-process server does not grow with every session it ever ran; the
price is that an old finished session's log can no longer be read back (``sessions()`` no longer
lists it). Something written to a session after it was forgotten (a straggler) starts its state
afresh. Dead letters are bounded on their own (the newest 10,000).
"""

from __future__ import annotations

import itertools
import weakref
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace

import anyio

from baton.bus.base import (
    Bus,
    BusOptions,
    LeadLease,
    LoggedEvent,
    SpawnClaim,
    SpawnQueue,
    SpawnState,
    spawn_receipt,
    spawn_receipts_by_stream,
)
from baton.bus.errors import InvalidEnvelope, SessionNotRunning
from baton.bus.events import Event, SessionFinished, SessionStarted, dump_event, parse_event
from baton.bus.keys import Keys
from baton.bus.messages import (
    DeadLetter,
    Envelope,
    SpawnRequest,
    encode_envelope,
    parse_spawn_request,
)
from baton.bus.signing import KID_FIELD, SIG_FIELD
from baton.bus.spend import SpendLimits, SpendRefused, SpendTotals
from baton.bus.wake import WakeHub

_KEYS = Keys()
"""Stream names as on Redis: the spawn queues route by name, and both backends route alike."""

DEFAULT_FINISHED_KEPT = 256
"""How many finished sessions a memory bus keeps (the newest); older ones are forgotten."""


@dataclass(slots=True)
class _Stream:
    """A stream with one consumer group: entries, the undelivered tail and the pending list."""

    entries: OrderedDict[int, str] = field(default_factory=OrderedDict)
    undelivered: deque[int] = field(default_factory=deque)
    pending: dict[int, tuple[str, float]] = field(default_factory=dict)
    seen_by: set[str] = field(default_factory=set)
    expiry_checked_at: float = float("-inf")
    sigs: dict[int, tuple[str, str]] = field(default_factory=dict)
    """Signatures and key ids of the entries that have them (a signing bus's envelopes), as
    Redis's ``sig`` and ``kid``."""

    def add(self, entry_id: int, raw: str, signed: Sequence[str] = ()) -> None:
        self.entries[entry_id] = raw
        fields = dict(zip(signed[::2], signed[1::2], strict=True))
        if SIG_FIELD in fields:
            self.sigs[entry_id] = (fields[SIG_FIELD], fields.get(KID_FIELD, ""))
        self.undelivered.append(entry_id)

    def signature(self, entry_id: int) -> tuple[str | None, str | None]:
        """An entry's ``sig`` and ``kid``, each None when it has none."""
        sig = self.sigs.get(entry_id)
        return (None, None) if sig is None else (sig[0], sig[1] or None)

    def take(self, consumer: str, count: int, lease_s: float) -> list[tuple[int, str]]:
        """Own pending on first sight, then expired leases, then new entries (like Redis).

        Expired leases are looked for at most every quarter lease (or right after a release),
        as on Redis: a scan per take would make claiming n requests cost n² with n held.
        """
        now = anyio.current_time()
        chosen: dict[int, None] = {}  # an ordered set
        if consumer not in self.seen_by:
            self.seen_by.add(consumer)
            chosen.update((i, None) for i, (owner, _) in self.pending.items() if owner == consumer)
        if now - self.expiry_checked_at >= lease_s / 4:
            self.expiry_checked_at = now
            for entry_id, (_, since) in self.pending.items():
                if now - since >= lease_s:
                    chosen[entry_id] = None
        while self.undelivered and len(chosen) < count:
            chosen[self.undelivered.popleft()] = None
        taken = []
        for entry_id in list(chosen)[:count]:
            raw = self.entries.get(entry_id)
            if raw is None:
                self.pending.pop(entry_id, None)
                continue
            self.pending[entry_id] = (consumer, now)
            taken.append((entry_id, raw))
        return taken

    def release(self, entry_ids: Sequence[int]) -> None:
        """Make pending entries claimable by anyone right now."""
        for entry_id in entry_ids:
            held = self.pending.get(entry_id)
            if held is not None:
                self.pending[entry_id] = (held[0], float("-inf"))
        self.expiry_checked_at = float("-inf")

    def done(self, entry_ids: Sequence[int]) -> None:
        for entry_id in entry_ids:
            self.pending.pop(entry_id, None)
            self.entries.pop(entry_id, None)
            self.sigs.pop(entry_id, None)

    def withdraw(self, entry_id: int) -> str | None:
        """Delete an entry never delivered to anyone; its text, or None when it was delivered
        (or is gone)."""
        if entry_id in self.pending or entry_id not in self.entries:
            return None
        if entry_id in self.undelivered:
            self.undelivered.remove(entry_id)
        self.sigs.pop(entry_id, None)
        return self.entries.pop(entry_id)


@dataclass(slots=True)
class _EventLog:
    entries: deque[tuple[int, str]]
    changed: anyio.Event = field(default_factory=anyio.Event)

    def append(self, seq: int, raw: str) -> None:
        self.entries.append((seq, raw))
        changed, self.changed = self.changed, anyio.Event()
        changed.set()


class _Broker:
    """The shared state behind one in-memory bus and all its peers."""

    def __init__(self, event_log_cap: int, finished_kept: int = DEFAULT_FINISHED_KEPT) -> None:
        self.seq = itertools.count(1)
        self.inboxes: dict[tuple[str, str], _Stream] = {}
        self.hub = WakeHub()
        self.logs: dict[str, _EventLog] = {}
        self.event_log_cap = event_log_cap
        self.session_touch: dict[str, int] = {}
        self.spawn: dict[str, _Stream] = {}  # stream name (as on Redis) → its requests
        self.workers: dict[str, dict[str, tuple[frozenset[str], float]]] = {}
        """pool → worker → (its profiles, when its announcement lapses)"""
        self.agents: dict[tuple[str, str], dict[str, str]] = {}
        self.dead: deque[DeadLetter] = deque(maxlen=10_000)
        self.spend: dict[str, SpendTotals] = {}
        self.leads: dict[str, dict[str, str]] = {}
        self.lead_leases: dict[str, tuple[str, float]] = {}  # session → (holder, ends at)
        self.tokens: dict[str, dict[str, str]] = {}  # session → token digest → scope
        self.finished_kept = finished_kept
        self.finished: OrderedDict[str, None] = OrderedDict()  # oldest finished first
        self.buses: weakref.WeakSet[MemoryBus] = weakref.WeakSet()  # their ledgers, to forget

    def logged(self, session: str, events: Sequence[Event]) -> None:
        """Follow the session's life by what it logs: finished sessions beyond the bound go."""
        for event in events:
            if isinstance(event, SessionFinished):
                self.finished[session] = None
                self.finished.move_to_end(session)
            elif isinstance(event, SessionStarted):
                self.finished.pop(session, None)
        while len(self.finished) > self.finished_kept:
            oldest, _ = self.finished.popitem(last=False)
            self.forget(oldest)

    def forget(self, session: str) -> None:
        """Drop everything kept of a finished session (its agents are gone: a scan per drop is
        bounded by what the bus holds, and a drop happens once per session)."""
        self.logs.pop(session, None)
        self.session_touch.pop(session, None)
        self.spend.pop(session, None)
        self.leads.pop(session, None)
        self.lead_leases.pop(session, None)
        self.spawn.pop(_KEYS.spawn_local(session), None)
        for key in [key for key in self.inboxes if key[0] == session]:
            del self.inboxes[key]
            self.hub.remove(MemoryBus._channel(*key))
        for key in [key for key in self.agents if key[0] == session]:
            del self.agents[key]
        for bus in self.buses:
            bus._forget_session_ledgers(session)
        self.tokens.pop(session, None)


class MemoryBus(Bus):
    """All of a process's agents on one in-memory bus (``memory://``).

    ``peer()`` gives another handle on the same bus with its own consumer name, the way a second
    process would connect to the same Redis; tests use it to play a consumer that dies.
    ``finished_kept`` bounds the finished sessions kept (see the module docstring); peers share
    the bound of the bus they came from.
    """

    def __init__(
        self,
        options: BusOptions | None = None,
        url: str = "memory://",
        *,
        finished_kept: int = DEFAULT_FINISHED_KEPT,
        _broker: _Broker | None = None,
    ) -> None:
        super().__init__(options)
        if finished_kept < 1:  # the session that just finished still writes its last records
            raise ValueError(f"finished_kept must be 1 or more, not {finished_kept}")
        self.url = url
        self._broker = _broker or _Broker(self.options.event_log_cap, finished_kept)
        self._broker.buses.add(self)
        self._spawn_turns: dict[SpawnQueue, int] = {}  # which stream a claim looks at first

    def peer(self, consumer: str | None = None) -> MemoryBus:
        """Another handle on this bus's state, as a separate consumer."""
        options = replace(self.options, consumer=consumer or BusOptions().consumer)
        return MemoryBus(options, self.url, _broker=self._broker)

    async def aclose(self) -> None:
        await super().aclose()
        self._broker.hub.wake_all()

    # -- inboxes ---------------------------------------------------------------------------

    def _inbox(self, session: str, agent: str) -> _Stream:
        stream = self._broker.inboxes.get((session, agent))
        if stream is None:
            stream = self._broker.inboxes[(session, agent)] = _Stream()
        return stream

    @staticmethod
    def _channel(session: str, agent: str) -> str:
        return f"{session}\x00{agent}"

    async def send(self, envelope: Envelope) -> str:
        self._check_open()
        raw = encode_envelope(envelope, max_bytes=self.options.max_message_bytes)
        self._append(envelope.session, envelope.recipient, raw, self._signed_fields(raw))
        return envelope.id

    async def send_if_running(self, envelope: Envelope) -> str:
        self._check_open()
        raw = encode_envelope(envelope, max_bytes=self.options.max_message_bytes)
        status = self._broker.leads.get(envelope.session, {}).get("status", "")
        if status != "running":  # no await between the look and the write: one step
            raise SessionNotRunning(envelope.session, status)
        self._append(envelope.session, envelope.recipient, raw, self._signed_fields(raw))
        return envelope.id

    async def send_raw(self, session: str, recipient: str, raw: str | bytes) -> None:
        self._check_open()
        text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
        self._append(session, recipient, text)

    def _append(self, session: str, recipient: str, raw: str, signed: Sequence[str] = ()) -> None:
        self._inbox(session, recipient).add(next(self._broker.seq), raw, signed)
        self._broker.hub.wake(self._channel(session, recipient))

    async def read_inbox(
        self, session: str, agent: str, *, count: int = 100, consumer: str | None = None
    ) -> list[Envelope]:
        self._check_open()
        self._broker.hub.add(self._channel(session, agent)).mark_read()
        stream = self._inbox(session, agent)
        taken = stream.take(consumer or self.consumer, count, self.options.lease_s)
        envelopes, drop = await self._screen(
            session,
            agent,
            self._ledger(session, agent, consumer),
            [(str(entry_id), raw, *stream.signature(entry_id)) for entry_id, raw in taken],
            source=f"inbox:{session}/{agent}",
        )
        stream.done([int(r) for r in drop])
        return envelopes

    async def wait(self, session: str, agent: str, timeout: float = 60.0) -> bool:
        self._check_open()
        woken = await self._broker.hub.add(self._channel(session, agent)).wait(timeout)
        self._check_open()
        return woken

    async def ack(
        self, session: str, agent: str, ids: Sequence[str], *, consumer: str | None = None
    ) -> None:
        self._check_open()
        receipts = self._ledger(session, agent, consumer).take(ids)
        self._inbox(session, agent).done([int(r) for r in receipts])

    async def release_inbox(self, session: str, agent: str, *, consumer: str | None = None) -> None:
        self._check_open()
        me = consumer or self.consumer
        stream = self._broker.inboxes.get((session, agent))
        if stream is not None:  # an inbox never written nor read has nothing to hand back
            stream.release([i for i, (owner, _) in stream.pending.items() if owner == me])
        self._forget_ledgers(session, agent)
        self._broker.hub.wake(self._channel(session, agent))

    async def release(self, session: str, agent: str) -> None:
        self._broker.hub.remove(self._channel(session, agent))
        self._forget_ledgers(session, agent)

    def _forget_session_ledgers(self, session: str) -> None:
        for key in [key for key in self._ledgers if key[0] == session]:
            del self._ledgers[key]

    # -- event log -------------------------------------------------------------------------

    def _log(self, session: str) -> _EventLog:
        log = self._broker.logs.get(session)
        if log is None:
            log = self._broker.logs[session] = _EventLog(deque(maxlen=self.options.event_log_cap))
        return log

    async def emit(self, event: Event) -> str:
        self._check_open()
        seq = next(self._broker.seq)
        self._log(event.session).append(seq, dump_event(event))
        self._broker.session_touch[event.session] = seq
        self._broker.logged(event.session, (event,))
        return str(seq)

    async def emit_once(
        self, session: str, agent: str, events: Sequence[Event], *, mark: str
    ) -> bool:
        self._check_open()
        state = self._broker.agents.setdefault((session, agent), {})
        if state.get("logged") == mark:
            return False
        for event in events:  # no await in between: one step, as on Redis
            seq = next(self._broker.seq)
            self._log(session).append(seq, dump_event(event))
            self._broker.session_touch[session] = seq
        state["logged"] = mark
        self._broker.logged(session, events)
        return True

    async def events(
        self, session: str, *, after: str | None = None, follow: bool = True
    ) -> AsyncIterator[LoggedEvent]:
        self._check_open()
        cursor = int(after) if after else 0
        log = self._log(session)
        while True:
            changed = log.changed
            fresh = [(seq, raw) for seq, raw in log.entries if seq > cursor]
            for seq, raw in fresh:
                cursor = seq
                yield LoggedEvent(str(seq), parse_event(raw))
            if not follow:
                return
            if not fresh:
                await changed.wait()
                self._check_open()

    async def sessions(self) -> list[str]:
        return sorted(
            self._broker.session_touch, key=self._broker.session_touch.__getitem__, reverse=True
        )

    # -- spawn queues (routed by stream name, as on Redis: docs/protocol.md) ---------------

    def _spawn_stream(self, stream: str) -> _Stream:
        queue = self._broker.spawn.get(stream)
        if queue is None:
            queue = self._broker.spawn[stream] = _Stream()
        return queue

    @staticmethod
    def _spawn_channel(stream: str) -> str:
        return f"\x00spawn\x00{_KEYS.spawn_channel(stream)}"

    async def _submit_spawn(self, request: SpawnRequest) -> str:
        self._check_open()
        stream = _KEYS.spawn_stream(request)
        entry_id = next(self._broker.seq)
        self._spawn_stream(stream).add(entry_id, request.model_dump_json())
        self._broker.hub.wake(self._spawn_channel(stream))
        return spawn_receipt(stream, str(entry_id))

    async def claim_spawn(self, queue: SpawnQueue, *, timeout: float = 0.0) -> SpawnClaim | None:
        self._check_open()
        streams, _ = _KEYS.spawn_queue(queue)
        if not streams:  # a pool worker that knows no profile: nothing is ever for it
            await anyio.sleep(max(timeout, 0.0))
            return None
        watch = self._broker.hub.add(self._spawn_channel(streams[0]))
        deadline = anyio.current_time() + timeout  # bounds the waiting, as on Redis
        while True:
            mark = watch.generation
            claim = await self._claim_from(queue, streams)
            if claim is not None:
                return claim
            left = deadline - anyio.current_time()
            if left <= 0:
                return None
            # Expired leases free up without a wake-up: look again at least once a lease.
            await watch.wait(min(left, self.options.lease_s), since=mark)
            self._check_open()

    async def _claim_from(self, queue: SpawnQueue, streams: tuple[str, ...]) -> SpawnClaim | None:
        """The first valid request of the queue's streams, starting at a rotating one; what
        is not a request, or sits in a stream it does not belong in, goes to the dead letters."""
        first = self._spawn_turns.get(queue, 0) % len(streams)
        self._spawn_turns[queue] = first + 1
        for stream in streams[first:] + streams[:first]:
            source = self._spawn_stream(stream)
            while taken := source.take(self.consumer, 1, self.options.lease_s):
                ((entry_id, raw),) = taken
                try:
                    request = parse_spawn_request(raw)
                    _KEYS.check_spawn_stream(request, stream, queue, raw)
                except InvalidEnvelope as exc:
                    source.done([entry_id])
                    await self._dead_letter(exc, source=stream, session=None, raw=raw)
                    continue
                return SpawnClaim(spawn_receipt(stream, str(entry_id)), request)
        return None

    async def leave_spawn(self, queue: SpawnQueue) -> None:
        if queue.session is not None:
            streams, _ = _KEYS.spawn_queue(queue)
            self._broker.hub.remove(self._spawn_channel(streams[0]))
            self._spawn_turns.pop(queue, None)

    def _spawn_entries(self, receipts: Sequence[str]) -> list[tuple[str, _Stream, list[int]]]:
        return [
            (name, self._spawn_stream(name), [int(i) for i in ids])
            for name, ids in spawn_receipts_by_stream(receipts).items()
        ]

    async def renew_spawn(self, receipts: Sequence[str]) -> list[str]:
        now = anyio.current_time()
        held: list[str] = []
        for name, stream, entry_ids in self._spawn_entries(receipts):
            for entry_id in entry_ids:
                owner = stream.pending.get(entry_id)
                if owner is not None and owner[0] == self.consumer:
                    stream.pending[entry_id] = (owner[0], now)
                    held.append(spawn_receipt(name, str(entry_id)))
        return held

    async def ack_spawn(self, receipts: Sequence[str]) -> None:
        for _, stream, entry_ids in self._spawn_entries(receipts):
            stream.done(entry_ids)

    async def release_spawn(self, receipts: Sequence[str]) -> None:
        for name, stream, entry_ids in self._spawn_entries(receipts):
            stream.release(entry_ids)
            self._broker.hub.wake(self._spawn_channel(name))

    async def withdraw_spawn(self, receipts: Sequence[str]) -> list[str]:
        self._check_open()
        withdrawn: list[str] = []
        for name, stream, entry_ids in self._spawn_entries(receipts):
            for entry_id in entry_ids:
                raw = stream.withdraw(entry_id)
                if raw is None:
                    continue
                withdrawn.append(spawn_receipt(name, str(entry_id)))
                try:
                    request = parse_spawn_request(raw)
                except InvalidEnvelope:  # not a request: no inbox of an agent goes with it
                    continue
                self._broker.inboxes.pop((request.session, request.agent), None)
                self._forget_ledgers(request.session, request.agent)
        return withdrawn

    async def spawn_states(self, receipts: Sequence[str]) -> dict[str, SpawnState]:
        self._check_open()
        states: dict[str, SpawnState] = {}
        for name, ids in spawn_receipts_by_stream(receipts).items():
            stream = self._broker.spawn.get(name)
            for entry_id in ids:
                number = int(entry_id)
                state: SpawnState = "gone"
                if stream is not None and number in stream.entries:
                    state = "claimed" if number in stream.pending else "queued"
                states[spawn_receipt(name, entry_id)] = state
        return states

    async def announce_worker(
        self, pool: str, worker: str, profiles: Collection[str], ttl_s: float
    ) -> None:
        self._check_open()
        announced = self._broker.workers.setdefault(pool, {})
        if ttl_s > 0:
            announced[worker] = (frozenset(profiles), anyio.current_time() + ttl_s)
        else:
            announced.pop(worker, None)

    async def pool_workers(self, pool: str) -> dict[str, frozenset[str]]:
        self._check_open()
        now = anyio.current_time()
        announced = self._broker.workers.get(pool, {})
        for worker in [w for w, (_, until) in announced.items() if until <= now]:
            del announced[worker]
        return {worker: profiles for worker, (profiles, _) in announced.items()}

    async def drop_spawn_queue(self, session: str) -> int:
        self._check_open()
        stream = self._broker.spawn.pop(_KEYS.spawn_local(session), None)
        return 0 if stream is None else len(stream.entries)

    # -- the session's budget (no await between a check and its update: atomic) -----------

    async def set_spend_limits(self, session: str, limits: SpendLimits) -> None:
        self._check_open()
        totals = self._broker.spend.get(session, SpendTotals())
        self._broker.spend[session] = totals.model_copy(update={"limits": limits})

    async def reserve_spend(self, session: str) -> SpendTotals:
        self._check_open()
        totals = self._broker.spend.get(session, SpendTotals())
        cap = totals.spent()
        if cap is not None:
            raise SpendRefused(session, totals, cap)
        totals = self._broker.spend[session] = totals.model_copy(update={"calls": totals.calls + 1})
        return totals

    async def record_spend(self, session: str, tokens: int) -> SpendTotals:
        self._check_open()
        totals = self._broker.spend.get(session, SpendTotals())
        if tokens > 0:
            update = {"tokens": totals.tokens + tokens}
            totals = self._broker.spend[session] = totals.model_copy(update=update)
        return totals

    async def spend(self, session: str) -> SpendTotals:
        self._check_open()
        return self._broker.spend.get(session, SpendTotals())

    # -- the session's lead ----------------------------------------------------------------

    async def hold_lead(
        self, session: str, holder: str, lease_s: float, fields: Mapping[str, str] | None = None
    ) -> LeadLease:
        self._check_open()
        now = anyio.current_time()
        current = self._broker.lead_leases.get(session)
        if current is not None and current[0] != holder and current[1] > now:
            return LeadLease(held=False, holder=current[0], ttl_s=current[1] - now)
        if fields:
            self._broker.leads.setdefault(session, {}).update(fields)
        if lease_s > 0:
            self._broker.lead_leases[session] = (holder, now + lease_s)
        else:
            self._broker.lead_leases.pop(session, None)
        return LeadLease(held=True)

    async def lead_record(self, session: str) -> dict[str, str]:
        self._check_open()
        return dict(self._broker.leads.get(session, {}))

    async def lead_lease(self, session: str) -> LeadLease | None:
        self._check_open()
        now = anyio.current_time()
        current = self._broker.lead_leases.get(session)
        if current is None or current[1] <= now:
            return None
        return LeadLease(held=True, holder=current[0], ttl_s=current[1] - now)

    # -- agent state, dead letters, health -------------------------------------------------

    async def set_agent_state(self, session: str, agent: str, fields: Mapping[str, str]) -> None:
        self._check_open()
        self._broker.agents.setdefault((session, agent), {}).update(fields)

    async def get_agent_state(self, session: str, agent: str) -> dict[str, str]:
        self._check_open()
        return dict(self._broker.agents.get((session, agent), {}))

    async def save_token_scopes(self, session: str, scopes: Mapping[str, str]) -> None:
        self._check_open()
        self._broker.tokens.setdefault(session, {}).update(scopes)

    async def token_scope(self, session: str, digest: str) -> str | None:
        self._check_open()
        return self._broker.tokens.get(session, {}).get(digest)

    async def dead_letters(self, count: int = 100) -> list[DeadLetter]:
        return list(self._broker.dead)[-count:]

    async def _store_dead_letter(self, letter: DeadLetter) -> None:
        self._broker.dead.append(letter)

    async def ping(self) -> None:
        self._check_open()
