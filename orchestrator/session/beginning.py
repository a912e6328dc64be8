"""How a session begins on the bus, before its lead's first step.

A new session's lead record is begun (its setup stored for a resume); a resumed one takes over the
dead lead's inbox instead: what was delivered to it and not acked is handed back, claimable at once
rather than a lease later, and the record then names our consumer. A new session's budget is on
the bus before its first spawn, so no sub-agent spends past it. ``SessionStarted`` is logged last:
its cursor is where the viewers' tail starts.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from baton.bus.base import Bus
from baton.bus.events import SessionStarted
from baton.bus.retry import persist
from baton.lead.keeper import LeadRecord
from baton.lead.prompt import LEAD_NAME
from baton.llm.offline import OFFLINE_MODEL_NAME
from baton.session.build import Built


async def begin(bus: Bus, built: Built, *, give_up: Callable[[], bool]) -> str | None:
    """Begin the session ``built`` on ``bus`` (its bus calls stop retrying once ``give_up()``:
    the lead was cancelled); returns the cursor of its ``SessionStarted``."""
    config, resumed = built.config, built.record
    session = config.session_id
    started = SessionStarted(
        session=session,
        agent=LEAD_NAME,
        task=config.task,
        model=built.model_name,
        offline=built.model_name == OFFLINE_MODEL_NAME,
        resumed=resumed is not None,
    )
    if resumed is not None:
        await _take_inbox(bus, built, resumed, give_up)
    else:
        await built.keeper.begin(built.setup)
    if config.budget is not None and resumed is None:  # before the first spawn
        write = partial(bus.budget.set_limits, session, config.budget)
        await persist(write, "the session's budget", give_up=give_up, outage_s=config.bus_outage_s)
    return await built.router.emit(started)


async def _take_inbox(
    bus: Bus, built: Built, resumed: LeadRecord, give_up: Callable[[], bool]
) -> None:
    """A resumed lead reads the dead one's inbox: what was delivered to it and not acked is
    handed back (claimable at once, not a lease later), then the record names our consumer."""
    if resumed.consumer:
        session = built.config.session_id
        release = partial(bus.inboxes.hand_back, session, LEAD_NAME, consumer=resumed.consumer)
        await persist(
            release,
            "hand back the dead lead's inbox",
            give_up=give_up,
            outage_s=built.config.bus_outage_s,
        )
    await built.keeper.adopt_inbox(resumed)
