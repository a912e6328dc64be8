"""A session's watch over its own spawn requests: none waits in silence for a worker that never
comes, and none is refused where its lead cannot hear it.

The lead starts a sub-agent by queueing a spawn request and then waits for the agent's result;
nothing in that wait could tell "no worker has got to it yet" from "no worker ever will" (no
worker serves the pool, or none that serves it knows the profile), so such a session used to wait
out its whole timeout. This watch, run by the session beside its lead, follows every request the
session's bus submits (``bus.spawns.watch``) until a worker hosts its agent:

- a request still unclaimed after ``unclaimed_s`` is logged once (``agent.unclaimed``, which every
  view shows as one warning line naming the pool and the profile), with how many live workers of
  the pool serve the profile (workers announce themselves: ``Bus.announce_worker``);
- when none does, now or later, the request is withdrawn (in one step with the check that no
  worker claimed it meanwhile) and the agent ended as a worker ends one it refuses: its
  ``agent.result`` and ``agent.exited`` (``error``) are logged, and the lead gets the refusal
  ``result`` (``baton.bus.refusals``), which it takes from an agent no worker hosts because its id
  answers the lead's own request. The lead then goes on without it, at once;
- a worker that refused a request and could not tell the lead (its signing key differs from the
  session's: its result would be dead-lettered unread) records the refusal in the agent's hash;
  the watch delivers it, signed with the session's key.

No lead code is involved: the watch only sees the bus, and speaks to the lead as a worker would.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import TypeVar

import anyio
from anyio.abc import TaskStatus

from baton.bus.base import Bus
from baton.bus.errors import BusError
from baton.bus.events import AgentExited, AgentResult, AgentUnclaimed
from baton.bus.messages import LOCAL_POOL, SpawnRequest
from baton.bus.refusals import SpawnRefusal, read_refusal, refusal_result
from baton.bus.retry import persist

log = logging.getLogger(__name__)

T = TypeVar("T")

UNCLAIMED_S = 15.0
"""How long a spawn request may wait for a worker before the session says so (and, with no live
worker that serves it, ends its agent): ``SessionConfig.unclaimed_s``."""
TICK_S = 1.0
"""How often the watch looks at its requests (more often with a shorter bound)."""


@dataclass(slots=True)
class _Watched:
    request: SpawnRequest
    receipt: str
    since: float
    warned: bool = False


class SpawnWatch:
    """Watches one session's spawn requests on ``bus``; see the module docstring.

    :meth:`submitted` is the bus's listener; :meth:`run` (in the session's task group) looks at
    the requests every tick until :meth:`stop`. ``ended`` says why each agent it ended ended.
    """

    def __init__(
        self,
        bus: Bus,
        session: str,
        *,
        unclaimed_s: float = UNCLAIMED_S,
        give_up: Callable[[], bool] = lambda: False,
    ) -> None:
        self.bus = bus
        self.session = session
        self.unclaimed_s = unclaimed_s
        self.ended: list[str] = []
        """Why each agent ended here ended (what its refusal result says), in order."""
        self._give_up = give_up
        self._tick = max(0.05, min(TICK_S, unclaimed_s / 4))
        self._watched: dict[str, _Watched] = {}
        self._added = anyio.Event()
        self._scope = anyio.CancelScope()

    def submitted(self, request: SpawnRequest, receipt: str) -> None:
        """The session's bus queued ``request``: watch it until a worker hosts its agent."""
        self._watched[receipt] = _Watched(request, receipt, anyio.current_time())
        self._added.set()

    def stop(self) -> None:
        """The session is ending: look no more (nothing is logged after its end)."""
        self._scope.cancel()

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        with self._scope:
            task_status.started()
            while True:
                if not self._watched:
                    self._added = anyio.Event()
                    await self._added.wait()
                await anyio.sleep(self._tick)
                try:
                    await self._check()
                except BusError as exc:  # looked at again next tick
                    log.info("session %s: watching its spawn requests: %s", self.session, exc)

    async def _check(self) -> None:
        watched = list(self._watched.values())
        states = await self.bus.spawns.states([w.receipt for w in watched])
        now = anyio.current_time()
        pools: dict[str, dict[str, frozenset[str]]] = {}  # each pool's live workers, read once
        for item in watched:
            state = states.get(item.receipt, "gone")
            if state == "queued":
                if now - item.since >= self.unclaimed_s:
                    await self._overdue(item, now - item.since, pools)
                continue
            fields = await self.bus.records.agent(self.session, item.request.agent)
            if "owner" in fields and fields.get("spawn") == item.request.id:
                self._watched.pop(item.receipt, None)  # a worker hosts it: nothing to watch
            elif state == "gone":  # done already, withdrawn, or refused
                refusal = read_refusal(fields)
                if refusal is not None and refusal.spawn == item.request.id:
                    await self._relay(item, refusal)
                self._watched.pop(item.receipt, None)

    async def _overdue(
        self, item: _Watched, waited: float, pools: dict[str, dict[str, frozenset[str]]]
    ) -> None:
        """No worker has claimed the request in time: say so once; end the agent when no live
        worker serves its pool and profile (the session's own worker always does)."""
        request = item.request
        if request.pool == LOCAL_POOL:
            full = "the session's own worker hosts as many agents as it may (worker_concurrency)"
            await self._warn(item, waited, None, f"{full}; it waits for one to finish")
            return
        live = pools.get(request.pool)
        if live is None:
            live = pools[request.pool] = await self.bus.workers.live(request.pool)
        serving = sorted(name for name, profiles in live.items() if request.profile in profiles)
        if serving:
            busy = f"{len(serving)} live worker(s) of the pool serve it, all busy: it waits"
            await self._warn(item, waited, len(serving), busy)
            return
        withdrawn = await self.bus.spawns.withdraw([item.receipt])
        if item.receipt not in withdrawn:
            return  # a worker claimed it just now: the next look sees it hosted
        others = "; ".join(f"{name} serves {', '.join(sorted(p)) or 'nothing'}"
                           for name, p in sorted(live.items()))  # fmt: skip
        none = "no live worker of the pool serves it" + (f" ({others})" if others else "")
        await self._warn(item, waited, 0, f"{none}: it is ended")
        content = (
            f"Cannot start {request.agent}: no worker of pool {request.pool!r} serves profile "
            f"{request.profile!r}: none claimed it in {waited:.0f} s, and {none}. Start one that "
            f"does (`baton worker --pool {request.pool}` with a profile {request.profile!r})."
        )
        s, a = self.session, request.agent
        await self._persist(partial(self.bus.log.emit, AgentResult(session=s, agent=a,
                                                               content=content)))  # fmt: skip
        await self._persist(partial(self.bus.log.emit, AgentExited(session=s, agent=a,
                                                               reason="error")))  # fmt: skip
        await self._deliver(item, content)

    async def _warn(self, item: _Watched, waited: float, workers: int | None, why: str) -> None:
        if item.warned:
            return
        item.warned = True
        request = item.request
        log.warning("session %s: %s (profile %s) has waited %.0f s for a worker of pool %s: %s",
                    self.session, request.agent, request.profile, waited, request.pool,
                    why)  # fmt: skip
        event = AgentUnclaimed(
            session=self.session,
            agent=request.agent,
            profile=request.profile,
            pool=request.pool,
            waited_s=round(waited, 1),
            workers=workers,
        )
        await self._persist(partial(self.bus.log.emit, event))

    async def _relay(self, item: _Watched, refusal: SpawnRefusal) -> None:
        """A worker refused the request and could not tell the lead: the lead hears it from
        here (the worker logged the agent's exit itself)."""
        log.warning("session %s: worker %s refused %s: %s", self.session, refusal.worker,
                    item.request.agent, refusal.content)  # fmt: skip
        await self._deliver(item, refusal.content)

    async def _deliver(self, item: _Watched, content: str) -> None:
        request = item.request
        envelope = refusal_result(request_id=request.id, session=self.session,
                                  agent=request.agent, parent=request.parent,
                                  content=content)  # fmt: skip
        await self._persist(partial(self.bus.inboxes.send, envelope))
        self.ended.append(content)
        self._watched.pop(item.receipt, None)

    async def _persist(self, operation: Callable[[], Awaitable[T]]) -> T:
        """A write the lead must not miss (its request is withdrawn already), through the one
        retry policy: a blip delays it; only the session's end stops it."""
        return await persist(operation, f"{self.session}: spawn watch", give_up=self._give_up)
