"""The lead's inbox side: what arrived, put into its context in order, and the roster kept current.

:class:`Intake` reads the lead's inbox the way every agent reads its own (through bus blips too).
Reports update the roster the moment they are read — also when a send reads the inbox early to
know who has finished (:meth:`Intake.refresh`) — and a departed agent's unseen messages are handed
over; what was read goes into the context at the next gather, sub-agents' reports first, then
people's requests (a new request is announced through ``on_request``), and is acked after the
lead's checkpoint has it (``before_ack``), so a lead that dies in between gets it again.

Nothing is noted before it is screened: a report that is not its agent's own word (lead/trust.py)
is dead-lettered with the reason and acked, and ``file://`` media outside the media root are
dropped from a report, each with an ``error`` event (lead/media.py).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

import anyio

from baton.bus.errors import BusUnreachable
from baton.bus.events import ErrorEvent
from baton.bus.inbox import InboxReader
from baton.bus.messages import Envelope
from baton.engine import EventSink
from baton.lead import prompt
from baton.lead.dispatch import Dispatcher
from baton.lead.media import confine, media_root
from baton.lead.prompt import LEAD_NAME
from baton.lead.roster import Roster
from baton.lead.trust import ReportCheck
from baton.llm.types import Message

log = logging.getLogger(__name__)

MAX_WAIT_S = 60.0
"""One inbox wait; the wait is repeated until the session deadline."""


class Intake:
    """Reads, notes, puts into ``history`` and acks the lead's inbox; see the module docstring."""

    def __init__(
        self,
        inbox: InboxReader,
        roster: Roster,
        dispatch: Dispatcher,
        history: list[Message],
        *,
        cancel: Callable[[], None],
        cancelled: Callable[[], bool],
        on_request: Callable[[str], None],
        before_ack: Callable[[list[str]], Awaitable[None]] | None = None,
        events: EventSink | None = None,
        media_dir: Path | None = None,
    ) -> None:
        self.inbox = inbox
        self.roster = roster
        self.dispatch = dispatch
        self.history = history
        self.session = dispatch.session
        self._cancel = cancel
        self._cancelled = cancelled
        self._on_request = on_request
        self._before_ack = before_ack
        self._early: list[Envelope] = []
        """Read before a send (to keep the roster current), not yet in the context."""
        self.check = ReportCheck(dispatch.bus, self.session, roster, cancelled)
        """Who may report (lead/trust.py): what fails it is refused before it is noted."""
        self._events = events
        self._media_root = None if media_dir is None else media_root(media_dir)
        """Where reported ``file://`` media must lie (lead/media.py); None: not checked."""

    async def gather(self, deadline: float) -> tuple[list[Envelope], bool]:
        """What arrived, waiting while sub-agents work and nobody asked anything new.

        Returns the envelopes and whether the session deadline passed first.
        """

        def enough(arrived: list[Envelope]) -> bool:
            return not self.roster.outstanding or any(self.is_request(e) for e in arrived)

        arrived = await self.collect(deadline, enough)
        return arrived, not enough(arrived) and anyio.current_time() >= deadline

    async def gather_news(self, deadline: float, backoff: float) -> tuple[list[Envelope], bool]:
        """After a failed turn: what is there now; while sub-agents work, whatever arrives
        first or nothing within ``backoff`` (it grows with each failure in a row; bounded by the
        deadline). With nothing outstanding there is no news to wait for: the model client has
        already backed off between its own retries."""
        until = min(deadline, anyio.current_time() + backoff)
        arrived = await self.collect(until, bool)
        return arrived, not arrived and anyio.current_time() >= deadline

    async def collect(
        self, until: float, enough: Callable[[list[Envelope]], bool]
    ) -> list[Envelope]:
        """Read the inbox (and what a send read early) until ``enough(arrived)`` or ``until``
        (one read at least, even when ``until`` has passed)."""
        arrived, self._early = self._early, []

        async def take(fresh: list[Envelope]) -> bool:
            arrived.extend(await self.note(fresh))
            return enough(arrived)

        await self.inbox.collect(take, deadline=until, slice_s=MAX_WAIT_S, stop=self._cancelled)
        return arrived

    async def refresh(self) -> None:
        """Before a send (the dispatcher's lock held): read the inbox without waiting, so the
        roster knows who has finished; what was read waits for the next gather."""
        try:
            fresh = await self.inbox.read(give_up=self._cancelled)
        except BusUnreachable as exc:  # only once cancelled: the send meets the same bus
            log.warning("session %s: could not refresh the roster: %s", self.session, exc)
            return
        self._early.extend(await self.note(fresh, locked=True))

    async def note(self, fresh: list[Envelope], *, locked: bool = False) -> list[Envelope]:
        """Reports update the roster as they are read; a shutdown from outside cancels. What
        may not report is refused first, and reported media outside the media root dropped;
        returns what is left, to go into the context."""
        fresh = await self.screen(fresh)
        for envelope in fresh:
            if envelope.type == "shutdown" and not self.roster.is_agent(envelope.sender):
                log.info("session %s: shutdown requested by %s", self.session, envelope.sender)
                self._cancel()
            elif self.roster.is_agent(envelope.sender):
                unseen = self.roster.on_report(envelope)
                self.dispatch.roster_changed()
                if unseen:
                    log.info("session %s: %s left %d message(s) unread; handing them over",
                             self.session, envelope.sender, len(unseen))  # fmt: skip
                    if locked:
                        await self.dispatch.hand_over(envelope.sender, unseen)
                    else:
                        async with self.dispatch.lock:
                            await self.dispatch.hand_over(envelope.sender, unseen)
        return fresh

    async def screen(self, fresh: list[Envelope]) -> list[Envelope]:
        """The envelopes the lead may read: each report checked (lead/trust.py) and, if taken,
        its ``file://`` media confined to the media root (lead/media.py)."""
        taken: list[Envelope] = []
        for envelope in fresh:
            try:
                reason = await self.check.refusal(envelope)
            except BusUnreachable as exc:  # only once cancelled: left unread, never guessed
                log.warning("session %s: %s from %s left unchecked and unread: %s",
                            self.session, envelope.type, envelope.sender, exc)  # fmt: skip
                continue
            if reason is not None:
                log.warning("session %s: refused %s: %s", self.session, envelope.id, reason)
                await self.inbox.refuse(envelope, reason, give_up=self._cancelled)
                continue
            taken.append(await self._confined(envelope))
        return taken

    async def _confined(self, envelope: Envelope) -> Envelope:
        """A report without the ``file://`` media outside the media root, each one dropped said
        in an ``error`` event (the views show it)."""
        root = self._media_root
        if root is None or not envelope.media_urls or not self.check.concerns(envelope):
            return envelope
        kept, dropped = confine(envelope.media_urls, root)
        for url, why in dropped:
            message = f"dropped media URL {url!r} from {envelope.sender}'s {envelope.type}: {why}"
            log.warning("session %s: %s", self.session, message)
            if self._events is not None:
                detail = {"media_url": url, "from": envelope.sender, "media_root": str(root)}
                event = ErrorEvent(session=self.session, agent=LEAD_NAME, message=message,
                                   detail=detail)  # fmt: skip
                await self._events(event)
        return envelope if not dropped else envelope.model_copy(update={"media_urls": kept})

    def is_request(self, envelope: Envelope) -> bool:
        return not self.roster.is_agent(envelope.sender) and envelope.type != "shutdown"

    async def take(self, arrived: Sequence[Envelope]) -> None:
        """Put what arrived into the context (reports first, then requests), then ack it."""
        if not arrived:
            return
        reports = [e for e in arrived if self.roster.is_agent(e.sender)]
        requests = [e for e in arrived if self.is_request(e)]
        if requests:
            self._on_request("\n\n".join(envelope.content for envelope in requests))
        self.history.extend(prompt.inbox_messages(reports, requests))
        ids = [envelope.id for envelope in arrived]
        if self._before_ack is not None:  # the lead's checkpoint: a crash now re-delivers them
            await self._before_ack(ids)
        try:
            await self.inbox.ack(ids, give_up=self._cancelled)
        except BusUnreachable as exc:  # cancelled during an outage: the reader's done set holds
            log.warning("session %s: left %d message(s) un-acked: %s",
                        self.session, len(arrived), exc)  # fmt: skip

    async def stop_agents(self, grace: float) -> None:
        """``shutdown`` to every outstanding sub-agent, then wait (``grace``) for their results."""
        early, self._early = self._early, []
        await self.take(early)
        await self.dispatch.shut_down_running("the session is ending")
        if not self.roster.outstanding:
            return

        async def take(fresh: list[Envelope]) -> bool:
            await self.take(await self.note(fresh))
            return not self.roster.outstanding

        with anyio.move_on_after(grace):
            await self.inbox.collect(take, deadline=anyio.current_time() + grace, slice_s=grace)
