"""How a session ends in this process: its result, its last event, and what it leaves on the bus.

The end is written in an order a reader can rely on: the lead's inboxes are unsubscribed first
(whoever sees the end sees them released), the outcome is recorded for a resume, a person's posts
left unread go to the dead letters, ``SessionFinished`` is logged once the tail has caught up (so it
is the last event), then the session's own spawn queue goes and its keys get their lifetime.
Everything here is bounded and best effort: the bus may be gone, and the viewers still get the end
of the story.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial

import anyio

from baton.bus.base import Bus
from baton.bus.errors import BusError, InvalidEnvelope
from baton.bus.events import SessionFinished
from baton.bus.parts.dead import set_aside
from baton.bus.parts.retention import Leftovers
from baton.bus.user_post import USER
from baton.engine.bus_channel import approvals_inbox
from baton.lead.agent import LeadOutcome
from baton.lead.prompt import LEAD_NAME
from baton.lead.stream import EventFanout
from baton.session.build import Built
from baton.session.config import SessionResult

log = logging.getLogger("baton.session.lifecycle")
"""The session's log: this is its lifecycle's doing, and operators filter on that name."""

DROP_QUEUE_S = 1.0
"""Bound on deleting the session's own spawn queue as it ends."""
RETIRE_S = 2.0
"""Bound on giving the session's keys their lifetime as it ends."""
RELEASE_INBOXES_S = 1.0
"""Bound on unsubscribing the lead's inboxes as the session ends here."""


class SessionEnd:
    """The end of session ``session`` on ``bus``, told to its viewers through ``fanout``."""

    __slots__ = ("_bus", "_fanout", "_inboxes_released", "_session")

    def __init__(self, bus: Bus, session: str, fanout: EventFanout) -> None:
        self._bus = bus
        self._session = session
        self._fanout = fanout
        self._inboxes_released = False

    async def wind_down(self, built: Built, *, within_s: float) -> None:
        """The lead is done: its spawn requests are watched no more (nothing is logged after
        the session's end), and the in-process worker stops (within ``within_s``) before the
        last event, so ``SessionFinished`` is last.

        Its agents have all reported by now, unless the session was cancelled or timed out: those
        are given back unfinished (their ``shutdown`` is already in their inboxes).
        """
        built.watch.stop()
        worker = built.worker
        if worker is None:
            return
        worker.give_back_now()
        with anyio.move_on_after(within_s):
            await worker.stopped.wait()

    def result(self, built: Built, outcome: LeadOutcome) -> SessionResult:
        """What the session ended with."""
        return SessionResult(
            session=self._session,
            status=outcome.status,
            answer=outcome.answer,
            media_urls=outcome.media_urls,
            error=_why(built, outcome),
            invented_urls=outcome.invented_urls,
        )

    async def record(
        self,
        built: Built,
        outcome: LeadOutcome,
        result: SessionResult,
        *,
        tail: anyio.Event,
        within_s: float,
        bus_lost: Callable[[], bool],
    ) -> None:
        """Log ``SessionFinished`` last: the outcome recorded, the unread posts set aside, the
        event written, then ``tail`` (set once the viewers' tail caught up) waited for, all
        within ``within_s``; then the spawn queue dropped (not once ``bus_lost()``), the keys
        retired (only once the end is logged) and the viewers' streams ended."""
        finished = SessionFinished(
            session=self._session,
            agent=LEAD_NAME,
            status=result.status,
            answer=result.answer,
            media_urls=result.media_urls,
            invented_urls=result.invented_urls,
        )
        keeper, router = built.keeper, built.router
        logged = False
        try:
            with anyio.fail_after(within_s):
                await keeper.decided(outcome)  # a resume after this logs this same end
                await self._set_aside_unread(built, outcome)  # posts are refused from here on
                await router.emit(finished, publish=False)
                await keeper.ended()
                logged = True
                await tail.wait()
        except Exception as exc:  # the bus is gone: viewers still get the end of the story
            log.warning("session %s: could not log its end: %s", self._session, exc)
        if built.worker is not None and not bus_lost():
            await self._drop_spawn_queue()
        if logged:
            await self._retire(built)
        await self._fanout.publish(finished)
        self._fanout.close()

    async def _set_aside_unread(self, built: Built, outcome: LeadOutcome) -> None:
        """A person's posts that reached the lead's inbox after its last read go to the dead
        letters, each with why, rather than sit unread while their sender was told they were
        sent. A lead that answered closed first (lead/keeper.py: nothing lands unread then); one
        cancelled, failed or timed out stopped reading without that step. Best effort: the end
        of the session is logged whatever happens here."""
        if built.keeper.closed:
            return
        bus, session = self._bus, self._session
        taken = set(built.lead.state.taken)  # in its context, though not acked
        why = f"the session ended ({outcome.status}) before its lead read this post"
        try:
            try:
                while unread := await bus.inboxes.read(session, LEAD_NAME):
                    for envelope in unread:
                        if envelope.sender == USER and envelope.id not in taken:
                            await set_aside(
                                bus.letters,
                                InvalidEnvelope(why),
                                source=f"inbox of {LEAD_NAME}",
                                session=session,
                                raw=envelope.model_dump_json(),
                            )
                    await bus.inboxes.ack(session, LEAD_NAME, [e.id for e in unread])
            finally:  # the inbox was released already, and a read watches it again
                await bus.inboxes.forget(session, LEAD_NAME)
        except BusError as exc:
            log.warning("session %s: posts left unread not set aside: %s", session, exc)

    async def _drop_spawn_queue(self) -> None:
        """The session's own spawn queue ends with it (once its end is recorded): what is left
        there, agents given back unfinished that nobody resumes now, would stay on the bus for
        ever. Never for a session taken over by another lead: that one goes on with it."""
        with anyio.move_on_after(DROP_QUEUE_S):
            try:
                left = await self._bus.spawns.drop_queue(self._session)
            except BusError as exc:
                log.warning("session %s: could not delete its spawn queue: %s", self._session, exc)
                return
            if left:
                log.info("session %s: deleted %d spawn request(s) left in its queue",
                         self._session, left)  # fmt: skip

    async def release_inboxes(self) -> None:
        """Stop watching the lead's inboxes (its own and its approvals'): the session ended in
        this process (finished, cancelled, taken over). A process hosting session after session
        (an embedding application, ``baton serve``) would otherwise stay subscribed to the wake-up
        channel of every session it ever ran. Idempotent, bounded and best effort: the bus may be
        gone, and a message sent later still lands in the stream, only unwatched."""
        if self._inboxes_released:
            return
        self._inboxes_released = True
        with anyio.CancelScope(shield=True), anyio.move_on_after(RELEASE_INBOXES_S):
            for inbox in (LEAD_NAME, approvals_inbox(LEAD_NAME)):
                try:
                    await self._bus.inboxes.forget(self._session, inbox)
                except BusError as exc:
                    log.debug("session %s: %s inbox not released: %s", self._session, inbox, exc)

    async def _retire(self, built: Built) -> None:
        """The session's end is logged: its keys expire after ``retention_s``, and the inboxes
        nobody reads any more are emptied now (``docs/bus.md``, *Retention*): the lead's (a
        cancelled session's late results), and with the session's own worker, stopped and its
        spawn queue gone, its agents' too (the shutdowns of agents given back unfinished). A
        pool's agent may still have its shutdown to read: its inbox only expires. Bounded and
        best effort: keys left without a lifetime are still removed by ``baton clean``."""
        agents = list(built.lead.roster.agents)
        inboxes = [
            name for agent in (LEAD_NAME, *agents) for name in (agent, approvals_inbox(agent))
        ]
        done = (LEAD_NAME, *agents) if built.worker is not None else (LEAD_NAME,)
        unread = [approvals_inbox(agent) for agent in done] + list(done)
        retire = partial(self._bus.retention.retire, self._session, built.config.retention_s)
        with anyio.move_on_after(RETIRE_S) as bounded:
            try:
                retired = await retire(Leftovers(agents, inboxes, unread))
            except BusError as exc:
                log.warning("session %s: its keys got no expiry: %s", self._session, exc)
                return
            log.debug("session %s: %s", self._session, retired)
        if bounded.cancelled_caught:
            log.warning("session %s: its keys got no expiry within %.1f s", self._session, RETIRE_S)


def _why(built: Built, outcome: LeadOutcome) -> str:
    """The result's error: the lead's, unless work was left undone because an agent could not
    start (no worker serves it, or a worker refused it): that reason names the cause."""
    ended = built.watch.ended
    if outcome.status == "incomplete" and ended:
        return ended[0]
    return outcome.error
