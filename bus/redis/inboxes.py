"""Agent inboxes on Redis: one stream per inbox with a consumer group, woken over pub/sub.

``send`` appends and publishes in one script. A read first takes back expired leases
(``XAUTOCLAIM``) and then new entries, and after a fault also re-reads this consumer's own
pending entries (see :mod:`baton.bus.redis.core`). An ack is ``XACK`` + ``XDEL`` in one script, so
a done entry leaves the stream at once and an un-acked one never does: inboxes need no trimming.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from baton.bus.errors import InvalidEnvelope, SessionNotRunning
from baton.bus.messages import Envelope, encode_envelope
from baton.bus.parts.dead import Quarantine
from baton.bus.parts.inboxes import DEFAULT_WAIT_S, Inboxes, InboxLedger
from baton.bus.redis.adapter import NoGroup
from baton.bus.redis.batch import Command
from baton.bus.redis.core import Entry, RedisCore, read_entries, stream_entries
from baton.bus.redis.keys import INBOX_GROUP
from baton.bus.redis.scripts import SEND_IF_RUNNING
from baton.bus.signing import KID_FIELD, SIG_FIELD
from baton.bus.wake import RELEASED, wake_soon

# "Idle for years": whoever looks for expired leases next takes an entry claimed with this now.
RELEASED_IDLE_MS = 10 * 365 * 24 * 3600 * 1000
HAND_BACK_BATCH = 1000
"""At most this many inboxes per step of ``hand_back_all`` (one operation's commands, replies)."""


class RedisInboxes(Inboxes):
    """Agent inboxes on Redis. The ledgers (what was handed out, what was acked) and the
    screening of raw entries (validation, duplicates, dead letters) are the backend-neutral part
    of an inbox, kept in :class:`baton.bus.parts.inboxes.Inboxes`."""

    def __init__(self, core: RedisCore, quarantine: Quarantine) -> None:
        super().__init__(core.options, quarantine)
        self._core = core

    async def send(self, envelope: Envelope) -> str:
        raw = encode_envelope(envelope, max_bytes=self._core.options.max_message_bytes)
        s, r, keys = envelope.session, envelope.recipient, self._core.keys
        signed = self.signed_fields(raw)
        await self._core.append(
            keys.inbox(s, r), "msg", raw, keys.wake(s, r), envelope.id, more=signed
        )
        return envelope.id

    async def send_if_running(self, envelope: Envelope) -> str:
        """``send`` and the look at the lead record in one script (send_if_running.lua)."""
        raw = encode_envelope(envelope, max_bytes=self._core.options.max_message_bytes)
        s, r, keys = envelope.session, envelope.recipient, self._core.keys
        signed = self.signed_fields(raw)  # as send: the signature and the key id
        script = SEND_IF_RUNNING.call_keys(
            (keys.lead(s), keys.inbox(s, r)), "msg", raw, keys.wake(s, r), envelope.id, *signed
        )
        status, entry = await self._core.one(*script)
        if not entry:
            raise SessionNotRunning(s, str(status or ""))
        return envelope.id

    async def send_raw(self, session: str, recipient: str, raw: str | bytes) -> None:
        text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
        keys = self._core.keys
        await self._core.append(
            keys.inbox(session, recipient), "msg", text, keys.wake(session, recipient)
        )

    async def holding(self, inboxes: Sequence[tuple[str, str]]) -> list[bool]:
        """``XLEN`` of each (an ack deletes its entry, so an idle inbox is empty), one operation:
        on a cluster each command goes to its slot's master, one pipeline per master."""
        if not inboxes:
            return []
        keys = self._core.keys
        lengths = await self._core.call(*(("XLEN", keys.inbox(s, a)) for s, a in inboxes))
        return [int(length) > 0 for length in lengths]

    async def read(
        self, session: str, agent: str, *, count: int = 100, consumer: str | None = None
    ) -> list[Envelope]:
        core = self._core
        core.check_open()
        key = core.keys.inbox(session, agent)
        watch = await core.watch(core.keys.wake(session, agent))
        watch.mark_read()
        if not core.groups.ready(key):
            await core.groups.ensure(key, INBOX_GROUP)
        ledger = self.ledger(session, agent, consumer)
        if watch.releases != ledger.releases_seen:  # someone handed messages back: look now
            ledger.releases_seen = watch.releases
            ledger.claims_checked_at = float("-inf")
        me = consumer or core.consumer
        try:
            entries: list[Entry] = []
            if ledger.pending_epoch != core.epoch:
                ledger.pending_epoch = core.epoch
                entries.extend(await core.own_pending(key, INBOX_GROUP, me))
            entries.extend(await self._claim_and_read(key, me, count, ledger))
        except NoGroup:
            ledger.pending_epoch = -1
            # The stream was deleted (or a server came back empty): start it again, once.
            core.groups.forget(key)
            await core.groups.ensure(key, INBOX_GROUP)
            entries = await self._claim_and_read(key, me, count, ledger)
        except BaseException:
            ledger.pending_epoch = -1  # the reply may be lost: look at our own pending next time
            raise
        return await self._hand_out(session, agent, key, ledger, entries)

    async def _claim_and_read(
        self, key: str, consumer: str, count: int, ledger: InboxLedger
    ) -> list[Entry]:
        """Expired leases (XAUTOCLAIM, looped to the cursor's end) and then new entries.

        Expired leases are looked for at most every quarter lease per inbox: a dead consumer's
        entries are picked up a little later, and the hot send → read → ack loop saves a command.
        """
        core = self._core
        lease_s = core.options.lease_s
        lease_ms = int(lease_s * 1000)
        now = time.monotonic()
        check_claims = now - ledger.claims_checked_at >= lease_s / 4
        group = INBOX_GROUP
        read: Command = (
            "XREADGROUP",
            "GROUP",
            group,
            consumer,
            "COUNT",
            count,
            "STREAMS",
            key,
            ">",
        )
        if check_claims:
            claim: Command = ("XAUTOCLAIM", key, group, consumer, lease_ms, "0-0", "COUNT", count)
            replies = await core.call(claim, read)
        else:
            replies = await core.call(read)
        fresh = read_entries(replies[-1])
        if not check_claims:
            return fresh
        ledger.claims_checked_at = now
        cursor, claimed, gone = replies[0][0], stream_entries(replies[0][1]), list(replies[0][2])
        while cursor != "0-0" and len(claimed) < count:
            reply = await core.one(
                "XAUTOCLAIM", key, group, consumer, lease_ms, cursor, "COUNT", count
            )
            cursor = reply[0]
            claimed.extend(stream_entries(reply[1]))
            gone.extend(reply[2])
        if gone:  # pending but deleted from the stream: nothing left to deliver
            await core.ack(key, group, gone)
        return claimed + fresh

    async def _hand_out(
        self, session: str, agent: str, key: str, ledger: InboxLedger, entries: list[Entry]
    ) -> list[Envelope]:
        usable: list[tuple[str, str, str | None, str | None]] = []
        drop: list[str] = []
        for entry_id, fields in entries:
            if fields is None:  # delivered, then deleted from the stream: nothing to hand out
                drop.append(entry_id)
            elif "msg" not in fields:
                reason = f"stream entry has no 'msg' field (fields: {sorted(fields)[:5]})"
                await self._quarantine(
                    InvalidEnvelope(reason), source=key, session=session, raw=str(fields)
                )
                drop.append(entry_id)
            else:
                signed = fields.get(SIG_FIELD), fields.get(KID_FIELD)
                usable.append((entry_id, fields["msg"], *signed))
        envelopes, rejected = await self.screen(session, agent, ledger, usable, source=key)
        drop.extend(rejected)
        if drop:
            await self._core.ack(key, INBOX_GROUP, drop)
        return envelopes

    async def wait(self, session: str, agent: str, timeout: float = DEFAULT_WAIT_S) -> bool:
        watch = await self._core.watch(self._core.keys.wake(session, agent))
        woken: bool = await watch.wait(timeout)
        self._core.check_open()
        return woken

    def park(self, session: str, agent: str, wake: Callable[[], None]) -> Callable[[], None]:
        watch = self._core.hub.get(self._core.keys.wake(session, agent))
        if watch is None or watch.confirmed is None or not watch.confirmed.is_set():
            # Not subscribed (not read yet, or forgotten): nothing could wake it, so it reads
            # again now, which subscribes.
            return wake_soon(wake)
        return watch.park(wake)

    async def ack(
        self, session: str, agent: str, ids: Sequence[str], *, consumer: str | None = None
    ) -> None:
        ledger = self.ledger(session, agent, consumer)
        receipts = ledger.receipts(ids)
        if receipts:
            await self._core.ack(self._core.keys.inbox(session, agent), INBOX_GROUP, receipts)
        ledger.take(ids)  # only now: a failed XACK leaves the receipts for the retry

    async def hand_back(self, session: str, agent: str, *, consumer: str | None = None) -> None:
        core = self._core
        key, me = core.keys.inbox(session, agent), consumer or core.consumer
        try:
            await self._hand_back_pending(key, me)
        except NoGroup:
            # No group (the agent was given back before its first read) or no stream (deleted,
            # or a server that came back empty): nothing was delivered to us, nothing to hand
            # back. The next read creates the group again.
            core.groups.forget(key)
        self.forget_ledgers(session, agent)
        await core.one("PUBLISH", core.keys.wake(session, agent), RELEASED)

    async def _hand_back_pending(self, key: str, me: str) -> None:
        """Claim every entry pending for ``me`` to a consumer name nobody reads with, "idle for
        years": the next reader's XAUTOCLAIM takes them at once."""
        core = self._core
        while True:
            pending = await core.one("XPENDING", key, INBOX_GROUP, "-", "+", 500, me)
            ids = [row[0] for row in pending or ()]
            if not ids:
                return
            idle = ("IDLE", RELEASED_IDLE_MS, "JUSTID")
            await core.one("XCLAIM", key, INBOX_GROUP, f"{me}:released", 0, *ids, *idle)

    async def hand_back_all(self, inboxes: Sequence[tuple[str, str]]) -> None:
        """Each step one operation for a batch of inboxes (a pipeline per node): which hold
        entries pending for us (an idle agent's hold none), then the wake-ups. Only an inbox
        that holds some is handed back on its own, as :meth:`hand_back` does. A batch meeting an
        inbox without a group (deleted meanwhile) goes one inbox at a time: :meth:`hand_back`
        knows what to do with one."""
        core = self._core
        for start in range(0, len(inboxes), HAND_BACK_BATCH):
            batch = inboxes[start : start + HAND_BACK_BATCH]
            keys = [core.keys.inbox(s, a) for s, a in batch]
            try:
                asked = (("XPENDING", key, INBOX_GROUP, "-", "+", 1, core.consumer) for key in keys)
                pending = await core.call(*asked)
                for key, rows in zip(keys, pending, strict=True):
                    if rows:
                        await self._hand_back_pending(key, core.consumer)
            except NoGroup:
                for session, agent in batch:
                    await self.hand_back(session, agent)
                continue
            for session, agent in batch:
                self.forget_ledgers(session, agent)
            await core.call(*(("PUBLISH", core.keys.wake(s, a), RELEASED) for s, a in batch))

    async def forget(self, session: str, agent: str) -> None:
        self.forget_ledgers(session, agent)
        await self._core.unwatch(self._core.keys.wake(session, agent))

    async def forget_all(self, inboxes: Sequence[tuple[str, str]]) -> None:
        """One unwatch of every inbox's channel: their ``UNSUBSCRIBE`` goes as one command."""
        for session, agent in inboxes:
            self.forget_ledgers(session, agent)
        await self._core.unwatch(*(self._core.keys.wake(s, a) for s, a in inboxes))
