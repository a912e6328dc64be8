"""Agent inboxes in process: a stream of wire text per inbox, read back through the same
screening as on Redis (the text is parsed and checked again on every read)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from baton.bus.errors import SessionNotRunning
from baton.bus.memory.core import MemoryCore, inbox_channel
from baton.bus.messages import Envelope, encode_envelope
from baton.bus.parts.dead import Quarantine
from baton.bus.parts.inboxes import DEFAULT_WAIT_S, Inboxes


class MemoryInboxes(Inboxes):
    """Inboxes of one handle on the broker (its consumer, its ledgers)."""

    def __init__(self, core: MemoryCore, quarantine: Quarantine) -> None:
        super().__init__(core.options, quarantine)
        self._core = core
        self._broker = core.broker
        self._broker.readers.add(self)

    async def send(self, envelope: Envelope) -> str:
        self._core.check_open()
        raw = encode_envelope(envelope, max_bytes=self.options.max_message_bytes)
        self._append(envelope.session, envelope.recipient, raw, self.signed_fields(raw))
        return envelope.id

    async def send_if_running(self, envelope: Envelope) -> str:
        self._core.check_open()
        raw = encode_envelope(envelope, max_bytes=self.options.max_message_bytes)
        status = self._broker.leads.get(envelope.session, {}).get("status", "")
        if status != "running":  # no await between the look and the write: one step
            raise SessionNotRunning(envelope.session, status)
        self._append(envelope.session, envelope.recipient, raw, self.signed_fields(raw))
        return envelope.id

    async def send_raw(self, session: str, recipient: str, raw: str | bytes) -> None:
        self._core.check_open()
        text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
        self._append(session, recipient, text)

    def _append(self, session: str, recipient: str, raw: str, signed: Sequence[str] = ()) -> None:
        self._broker.inbox(session, recipient).add(next(self._broker.seq), raw, signed)
        self._broker.hub.wake(inbox_channel(session, recipient))

    async def read(
        self, session: str, agent: str, *, count: int = 100, consumer: str | None = None
    ) -> list[Envelope]:
        self._core.check_open()
        self._broker.hub.add(inbox_channel(session, agent)).mark_read()
        stream = self._broker.inbox(session, agent)
        taken = stream.take(consumer or self.consumer, count, self.options.lease_s)
        envelopes, drop = await self.screen(
            session,
            agent,
            self.ledger(session, agent, consumer),
            [(str(entry_id), raw, *stream.signature(entry_id)) for entry_id, raw in taken],
            source=f"inbox:{session}/{agent}",
        )
        stream.done([int(r) for r in drop])
        return envelopes

    async def wait(self, session: str, agent: str, timeout: float = DEFAULT_WAIT_S) -> bool:
        self._core.check_open()
        woken = await self._broker.hub.add(inbox_channel(session, agent)).wait(timeout)
        self._core.check_open()
        return woken

    def park(self, session: str, agent: str, wake: Callable[[], None]) -> Callable[[], None]:
        return self._broker.hub.add(inbox_channel(session, agent)).park(wake)

    async def holding(self, inboxes: Sequence[tuple[str, str]]) -> list[bool]:
        self._core.check_open()
        streams = self._broker.inboxes
        return [bool((stream := streams.get(inbox)) and stream.entries) for inbox in inboxes]

    async def ack(
        self, session: str, agent: str, ids: Sequence[str], *, consumer: str | None = None
    ) -> None:
        self._core.check_open()
        receipts = self.ledger(session, agent, consumer).take(ids)
        self._broker.inbox(session, agent).done([int(r) for r in receipts])

    async def hand_back(self, session: str, agent: str, *, consumer: str | None = None) -> None:
        self._core.check_open()
        me = consumer or self.consumer
        stream = self._broker.inboxes.get((session, agent))
        if stream is not None:  # an inbox never written nor read has nothing to hand back
            stream.release(list(stream.pending), owner=me)
        self.forget_ledgers(session, agent)
        self._broker.hub.wake(inbox_channel(session, agent))

    async def forget(self, session: str, agent: str) -> None:
        self._broker.hub.remove(inbox_channel(session, agent))
        self.forget_ledgers(session, agent)
