"""The two structures the in-process bus keeps its data in: a stream with one consumer group
(inboxes, spawn queues), and a capped event log."""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import anyio

from baton.bus.signing import KID_FIELD, SIG_FIELD


@dataclass(slots=True)
class Stream:
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
            for entry_id, (_, since) in self.pending.items():
                if now - since >= lease_s:
                    chosen[entry_id] = None
            # Found more than this take returns (a worker released many): the next take looks
            # again at once, or the rest would wait a quarter lease (Redis's XAUTOCLAIM goes on
            # from its cursor).
            self.expiry_checked_at = now if len(chosen) <= count else float("-inf")
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

    def release(self, entry_ids: Iterable[int], *, owner: str) -> None:
        """Make those of the entries still pending for ``owner`` claimable by anyone right now,
        held meanwhile by ``<owner>:released`` (as on Redis: a name nobody reads with, so no
        renewal of their old owner takes them back, and none is taken from a new owner)."""
        for entry_id in entry_ids:
            held = self.pending.get(entry_id)
            if held is not None and held[0] == owner:
                self.pending[entry_id] = (f"{owner}:released", float("-inf"))
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
class EventStream:
    """One session's event log: its newest entries (sequence number, wire text, the event's
    ``type``), and an event that is set, and replaced, on every append (what a tail waits on)."""

    entries: deque[tuple[int, str, str]]
    changed: anyio.Event = field(default_factory=anyio.Event)

    def append(self, seq: int, raw: str, kind: str) -> None:
        self.entries.append((seq, raw, kind))
        changed, self.changed = self.changed, anyio.Event()
        changed.set()
