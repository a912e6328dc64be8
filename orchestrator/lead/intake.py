"""The lead's inbox side: what arrived, screened, noted in the roster and rendered as context.

:class:`Intake` reads the lead's inbox the way every agent reads its own (through bus blips too).
Reports update the roster the moment they are read (:meth:`Intake.note`) — also when a send reads
the inbox early to know who has finished — and say which of the lead's messages a departed agent
left unseen (its caller hands them over); what was read goes into the context at the next gather,
sub-agents' reports first, then people's requests (:meth:`Intake.render`), and is acked after the
lead's checkpoint has it (:meth:`Intake.ack`), so a lead that dies in between gets it again.

Nothing is noted before it is screened: a report that is not its agent's own word (lead/trust.py)
is dead-lettered with the reason and acked, and ``file://`` media outside the media root are
dropped from a report, each with an ``error`` event (lead/media.py).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from baton.bus.errors import BusUnreachable
from baton.bus.events import ErrorEvent
from baton.bus.inbox import InboxReader
from baton.bus.messages import Envelope
from baton.engine import EventSink
from baton.lead import prompt
from baton.lead.media import confine, media_root
from baton.lead.prompt import LEAD_NAME
from baton.lead.roster import Sent
from baton.lead.state import LeadState
from baton.lead.trust import ReportCheck
from baton.llm.types import Message

log = logging.getLogger(__name__)


def _never() -> bool:
    return False


MAX_WAIT_S = 60.0
"""One inbox wait; the wait is repeated until the session deadline."""


@dataclass(slots=True)
class Noted:
    """What one read of the inbox left for the lead once the roster had taken it in."""

    envelopes: list[Envelope] = field(default_factory=list)
    """What goes into the context (reports and requests that passed the screening)."""
    handovers: list[tuple[str, list[Sent]]] = field(default_factory=list)
    """Agents that left before reading some of the lead's messages, and those messages."""
    shutdown: bool = False
    """Someone outside the session (not a sub-agent) asked it to stop."""


class Intake:
    """Reads, screens and notes the lead's inbox, renders it as context, acks it; see the module
    docstring. Its caller (lead/team.py) serialises the noting with the sends."""

    def __init__(
        self,
        inbox: InboxReader,
        state: LeadState,
        *,
        check: ReportCheck,
        cancelled: Callable[[], bool],
        events: EventSink | None = None,
        media_dir: Path | None = None,
    ) -> None:
        self.inbox = inbox
        self.state = state
        self.roster = state.roster
        self.session = inbox.session
        self._cancelled = cancelled
        self.check = check
        """Who may report (lead/trust.py): what fails it is refused before it is noted."""
        self._events = events
        self._media_root = None if media_dir is None else media_root(media_dir)
        """Where reported ``file://`` media must lie (lead/media.py); None: not checked."""

    async def read_now(self) -> list[Envelope]:
        """The inbox as it is, without waiting (an outage only once cancelled: nothing then)."""
        try:
            return await self.inbox.read(give_up=self._cancelled)
        except BusUnreachable as exc:  # only once cancelled: the send meets the same bus
            log.warning("session %s: could not refresh the roster: %s", self.session, exc)
            return []

    async def wait(
        self,
        take: Callable[[list[Envelope]], Awaitable[bool]],
        until: float,
        *,
        stoppable: bool = True,
    ) -> None:
        """Read the inbox, handing each batch to ``take``, until it says enough or ``until``
        (one read at least, even when ``until`` has passed); a cancelled lead stops waiting,
        unless not ``stoppable`` (the wait for the results of the agents it stops)."""
        stop = self._cancelled if stoppable else _never
        await self.inbox.collect(take, deadline=until, slice_s=MAX_WAIT_S, stop=stop)

    async def note(self, fresh: list[Envelope]) -> Noted:
        """Reports update the roster as they are read; a shutdown from outside is flagged. What
        may not report is refused first, and reported media outside the media root dropped."""
        noted = Noted(await self.screen(fresh))
        for envelope in noted.envelopes:
            if envelope.type == "shutdown" and not self.roster.is_agent(envelope.sender):
                log.info("session %s: shutdown requested by %s", self.session, envelope.sender)
                noted.shutdown = True
            elif self.roster.is_agent(envelope.sender):
                unseen = self.roster.on_report(envelope)
                if unseen:
                    log.info("session %s: %s left %d message(s) unread; handing them over",
                             self.session, envelope.sender, len(unseen))  # fmt: skip
                    noted.handovers.append((envelope.sender, unseen))
        return noted

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

    def render(self, arrived: Sequence[Envelope]) -> tuple[list[Message], str | None]:
        """What arrived as context (reports first, then people's requests), and the new request
        they make (None: none)."""
        reports = [e for e in arrived if self.roster.is_agent(e.sender)]
        requests = [e for e in arrived if self.is_request(e)]
        request = "\n\n".join(e.content for e in requests) if requests else None
        return prompt.inbox_messages(reports, requests), request

    async def ack(self, arrived: Sequence[Envelope]) -> None:
        """Ack what went into the context (after the checkpoint has it: a crash before
        re-delivers it)."""
        try:
            await self.inbox.ack([e.id for e in arrived], give_up=self._cancelled)
        except BusUnreachable as exc:  # cancelled during an outage: the reader's done set holds
            log.warning("session %s: left %d message(s) un-acked: %s",
                        self.session, len(arrived), exc)  # fmt: skip
