"""The bus's calls as one flat list: ``bus.send(...)`` for ``bus.inboxes.send(...)``.

A compatibility surface, and nothing else: each method hands the call to the part that keeps it
(returning that part's coroutine itself, so a call through here costs no extra frame). It is
kept while the lead and the engine, which are being rewritten, and the older tests still call the
bus this way; new code takes the part it needs (``bus.inboxes``, ``bus.log``, ``bus.spawns``...),
and the part's docstrings are the contract.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Collection, Coroutine, Mapping, Sequence
from typing import Any

from baton.bus.events import Event
from baton.bus.messages import DeadLetter, Envelope, SpawnRequest
from baton.bus.parts.budget import Budget
from baton.bus.parts.claims import Claims, SpawnClaim, SpawnQueue
from baton.bus.parts.dead import DeadLetters, Quarantine
from baton.bus.parts.inboxes import DEFAULT_WAIT_S, Inboxes
from baton.bus.parts.log import EventLog, LoggedEvent
from baton.bus.parts.records import LeadLease, Records
from baton.bus.parts.retention import Leftovers, Retention, Retired
from baton.bus.parts.spawns import SpawnListener, Spawns, SpawnState
from baton.bus.parts.store import SessionStore
from baton.bus.parts.workers import Workers
from baton.bus.spend import SpendLimits, SpendTotals


class FlatCalls:
    """Every part's calls under the names the bus had before it was split into parts."""

    inboxes: Inboxes
    log: EventLog
    spawns: Spawns
    claims: Claims
    workers: Workers
    records: Records
    budget: Budget
    retention: Retention
    store: SessionStore
    letters: DeadLetters
    quarantine: Quarantine

    # -- inboxes ---------------------------------------------------------------------------

    def send(self, envelope: Envelope) -> Coroutine[Any, Any, str]:
        return self.inboxes.send(envelope)

    def send_if_running(self, envelope: Envelope) -> Coroutine[Any, Any, str]:
        return self.inboxes.send_if_running(envelope)

    def send_raw(self, session: str, recipient: str, raw: str | bytes) -> Coroutine[Any, Any, None]:
        return self.inboxes.send_raw(session, recipient, raw)

    def read_inbox(
        self, session: str, agent: str, *, count: int = 100, consumer: str | None = None
    ) -> Coroutine[Any, Any, list[Envelope]]:
        return self.inboxes.read(session, agent, count=count, consumer=consumer)

    def wait(
        self, session: str, agent: str, timeout: float = DEFAULT_WAIT_S
    ) -> Coroutine[Any, Any, bool]:
        return self.inboxes.wait(session, agent, timeout)

    def ack(
        self, session: str, agent: str, ids: Sequence[str], *, consumer: str | None = None
    ) -> Coroutine[Any, Any, None]:
        return self.inboxes.ack(session, agent, ids, consumer=consumer)

    def release_inbox(
        self, session: str, agent: str, *, consumer: str | None = None
    ) -> Coroutine[Any, Any, None]:
        return self.inboxes.hand_back(session, agent, consumer=consumer)

    def release(self, session: str, agent: str) -> Coroutine[Any, Any, None]:
        return self.inboxes.forget(session, agent)

    # -- event log -------------------------------------------------------------------------

    def emit(self, event: Event) -> Coroutine[Any, Any, str]:
        return self.log.emit(event)

    def emit_once(
        self, session: str, agent: str, events: Sequence[Event], *, mark: str
    ) -> Coroutine[Any, Any, bool]:
        return self.log.emit_once(session, agent, events, mark=mark)

    def events(
        self, session: str, *, after: str | None = None, follow: bool = True
    ) -> AsyncIterator[LoggedEvent]:
        return self.log.tail(session, after=after, follow=follow)

    def sessions(self) -> Coroutine[Any, Any, list[str]]:
        return self.log.sessions()

    # -- spawn requests, claims, workers ---------------------------------------------------

    def submit_spawn(self, request: SpawnRequest) -> Coroutine[Any, Any, str]:
        return self.spawns.submit(request)

    def watch_spawns(self, session: str, listener: SpawnListener) -> Callable[[], None]:
        return self.spawns.watch(session, listener)

    def spawn_states(self, receipts: Sequence[str]) -> Coroutine[Any, Any, dict[str, SpawnState]]:
        return self.spawns.states(receipts)

    def withdraw_spawn(self, receipts: Sequence[str]) -> Coroutine[Any, Any, list[str]]:
        return self.spawns.withdraw(receipts)

    def drop_spawn_queue(self, session: str) -> Coroutine[Any, Any, int]:
        return self.spawns.drop_queue(session)

    def claim_spawn(
        self, queue: SpawnQueue, *, timeout: float = 0.0
    ) -> Coroutine[Any, Any, SpawnClaim | None]:
        return self.claims.claim(queue, timeout=timeout)

    def renew_spawn(self, receipts: Sequence[str]) -> Coroutine[Any, Any, list[str]]:
        return self.claims.renew(receipts)

    def ack_spawn(self, receipts: Sequence[str]) -> Coroutine[Any, Any, None]:
        return self.claims.ack(receipts)

    def release_spawn(self, receipts: Sequence[str]) -> Coroutine[Any, Any, None]:
        return self.claims.release(receipts)

    def leave_spawn(self, queue: SpawnQueue) -> Coroutine[Any, Any, None]:
        return self.claims.leave(queue)

    def announce_worker(
        self, pool: str, worker: str, profiles: Collection[str], ttl_s: float
    ) -> Coroutine[Any, Any, None]:
        return self.workers.announce(pool, worker, profiles, ttl_s)

    def pool_workers(self, pool: str) -> Coroutine[Any, Any, dict[str, frozenset[str]]]:
        return self.workers.live(pool)

    # -- records ---------------------------------------------------------------------------

    def set_agent_state(
        self, session: str, agent: str, fields: Mapping[str, str]
    ) -> Coroutine[Any, Any, None]:
        return self.records.set_agent(session, agent, fields)

    def get_agent_state(self, session: str, agent: str) -> Coroutine[Any, Any, dict[str, str]]:
        return self.records.agent(session, agent)

    def hold_lead(
        self, session: str, holder: str, lease_s: float, fields: Mapping[str, str] | None = None
    ) -> Coroutine[Any, Any, LeadLease]:
        return self.records.hold_lead(session, holder, lease_s, fields)

    def lead_record(self, session: str) -> Coroutine[Any, Any, dict[str, str]]:
        return self.records.lead(session)

    def lead_lease(self, session: str) -> Coroutine[Any, Any, LeadLease | None]:
        return self.records.lead_lease(session)

    # -- budget, retention, the session's store, dead letters ------------------------------

    def set_spend_limits(self, session: str, limits: SpendLimits) -> Coroutine[Any, Any, None]:
        return self.budget.set_limits(session, limits)

    def reserve_spend(self, session: str) -> Coroutine[Any, Any, SpendTotals]:
        return self.budget.reserve(session)

    def record_spend(self, session: str, tokens: int) -> Coroutine[Any, Any, SpendTotals]:
        return self.budget.record(session, tokens)

    def spend(self, session: str) -> Coroutine[Any, Any, SpendTotals]:
        return self.budget.totals(session)

    def retire_session(
        self,
        session: str,
        retention_s: float,
        *,
        agents: Collection[str] = (),
        inboxes: Collection[str] = (),
        unread: Collection[str] = (),
    ) -> Coroutine[Any, Any, Retired]:
        return self.retention.retire(session, retention_s, Leftovers(agents, inboxes, unread))

    def session_expiry(self, session: str) -> Coroutine[Any, Any, float | None]:
        return self.retention.expiry(session)

    def save_token_scopes(
        self, session: str, scopes: Mapping[str, str]
    ) -> Coroutine[Any, Any, None]:
        return self.store.put(session, "tokens", scopes)

    def token_scope(self, session: str, digest: str) -> Coroutine[Any, Any, str | None]:
        return self.store.get(session, "tokens", digest)

    def dead_letters(self, count: int = 100) -> Coroutine[Any, Any, list[DeadLetter]]:
        return self.letters.recent(count)
