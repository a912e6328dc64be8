"""The worker service: claims spawn requests and hosts their sub-agents as anyio tasks.

Embed it in your own anyio application::

    async with open_bus("redis://localhost:6379/0") as bus, EnvModels.from_environ() as models:
        async with Worker(bus, builtin_profiles(), models, concurrency=500) as worker:
            ...                      # or: await task_group.start(worker.run)
            worker.drain()           # stop claiming, let rounds finish, give back the rest

Without a model factory a worker uses the built-in offline model: a library class never reads the
environment by itself, so ``OPENAI_API_KEY`` reaches the agents only through a factory you pass
(``baton worker`` passes a :class:`~baton.subagents.models.ProfileModels` built from its settings;
each profile may override them, down to another endpoint). Each agent asks its profile's
``tool_choice`` and, when the session has a budget on the bus, counts every model call against it.

What it guarantees:

- each hosted agent holds a lease on its spawn request, renewed every ``lease_s / 3``; a worker
  that dies (kill -9) stops renewing, the lease lapses and another worker's claim resumes the agent
  from its checkpoint (see :mod:`baton.subagents.bookkeeping`);
- at most ``concurrency`` agents are hosted at once (a :class:`anyio.CapacityLimiter`); it claims
  no more until one leaves;
- :meth:`Worker.drain`: stop claiming, let running rounds finish within ``shutdown_timeout_s``,
  then give the rest back (``release_spawn``) so another worker resumes them at once;
  :meth:`Worker.give_back_now` (also after a drain began) gives everything back immediately.
  Cancelling :meth:`run` from outside is ``give_back_now()``: agents are given back, never
  reported as finished;
- bus faults are ridden out with backoff (:func:`~baton.bus.retry.persist`); a failed
  heartbeat keeps every agent and renews at the next beat (a lease spans several beats);
- stopping ends even while the bus is out: giving back cuts an agent's start short, and every
  shielded step after it (a final report, acking or giving back a request) has a time bound; a
  request left un-acked is claimed again later, and its next owner only finishes what is recorded.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AsyncExitStack
from functools import partial
from pathlib import Path

import anyio
from anyio.abc import TaskGroup, TaskStatus

from baton.bus.base import Bus, SpawnClaim
from baton.bus.errors import BusClosed, BusError
from baton.bus.events import AgentExited, AgentResult, AgentSpawned
from baton.bus.lifecycle import Service
from baton.bus.messages import Envelope, SpawnRequest
from baton.bus.payloads import ResultReport
from baton.bus.retry import persist
from baton.engine import Telemetry, ToolRegistry
from baton.subagents.bookkeeping import FINAL_BOOKKEEPING_S
from baton.subagents.loop import RoundHook, SubAgent
from baton.subagents.models import EnvModels, ModelFactory, offline_models
from baton.subagents.profiles import Profile, builtin_profiles

log = logging.getLogger(__name__)

GIVE_BACK_S = 10.0
"""Bound on each piece of a worker's own bookkeeping (giving a spawn request back, acking it,
refusing it): the bus may be down, and a request left un-acked is simply claimed again later."""

LEAVE_S = 2 * FINAL_BOOKKEEPING_S + 2 * GIVE_BACK_S
"""How long a stopping worker waits for given-back agents to leave: the longest their bounded
bookkeeping can take (an agent's final report, recorded then delivered, or its inbox released;
then the worker's own)."""


class Serving(enum.Enum):
    """Where a worker stands; it only moves forward."""

    CLAIMING = "claiming"
    """Claims spawn requests and hosts their agents."""
    DRAINING = "draining"
    """Claims no more; running rounds get ``shutdown_timeout_s``, then the rest is given back."""
    GIVING_BACK = "giving back"
    """Claims no more and gives every agent back at once, including one it is just starting."""


class Worker(Service):
    """Hosts sub-agents for spawn requests on ``bus``; see the module docstring.

    Use it once, as ``async with`` (a :class:`~baton.bus.lifecycle.Service`), or run :meth:`run`
    in a task group of your own.
    """

    def __init__(
        self,
        bus: Bus,
        profiles: Mapping[str, Profile] | None = None,
        model_factory: ModelFactory | None = None,
        *,
        concurrency: int = 100,
        media_dir: Path | None = None,
        name: str | None = None,
        shutdown_timeout_s: float = 30.0,
        claim_timeout_s: float = 5.0,
        heartbeat_s: float | None = None,
        on_round: RoundHook | None = None,
    ) -> None:
        if concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, not {concurrency}")
        self.bus = bus
        self.profiles = dict(profiles) if profiles is not None else builtin_profiles()
        super().__init__()
        self._owned_models: EnvModels | None = None
        if model_factory is None:  # the offline model, closed with the worker
            model_factory = self._owned_models = offline_models()
        self.models: ModelFactory = model_factory
        self.concurrency = concurrency
        self.media_dir = media_dir or Path("media")
        self.name = name or bus.consumer
        self.shutdown_timeout_s = shutdown_timeout_s
        self.claim_timeout_s = claim_timeout_s
        self.heartbeat_s = heartbeat_s or bus.options.lease_s / 3
        self.on_round = on_round
        self.telemetry = Telemetry()
        self._tools = {name: ToolRegistry(p.tools) for name, p in self.profiles.items()}
        self._limiter = anyio.CapacityLimiter(concurrency)
        self._hosted: dict[str, SubAgent] = {}
        self._by_agent: dict[tuple[str, str], str] = {}
        self._serving = Serving.CLAIMING
        self._claim_scope: anyio.CancelScope | None = None
        self._agents: TaskGroup | None = None
        self._all_done = anyio.Event()
        self._change: anyio.Event | None = None
        self.claimed = 0
        self.finished = 0

    @property
    def serving(self) -> Serving:
        return self._serving

    @property
    def stopping(self) -> bool:
        """True once :meth:`drain` or :meth:`give_back_now` was called."""
        return self._serving is not Serving.CLAIMING

    @property
    def stopped(self) -> anyio.Event:
        """Set once the worker has drained: every agent left or was given back."""
        return self._all_done

    @property
    def hosted(self) -> int:
        """How many agents this worker hosts right now."""
        return len(self._hosted)

    # -- lifecycle ------------------------------------------------------------------------------

    async def _open(self, stack: AsyncExitStack) -> None:
        """``async with worker``: :meth:`run` in a task group of its own; leaving drains it."""
        if self._owned_models is not None:
            stack.push_async_callback(self._owned_models.aclose)
        group = await stack.enter_async_context(anyio.create_task_group())
        stack.callback(self.drain)  # unwound first: the group then waits for the drain to end
        await group.start(self.run)

    def drain(self) -> None:
        """Stop claiming; running rounds may finish within ``shutdown_timeout_s``, then the rest
        is given back. Does nothing once stopping: :meth:`give_back_now` hurries a drain."""
        if self._serving is Serving.CLAIMING:
            self._serving = Serving.DRAINING
            self._stop_claiming()

    def give_back_now(self) -> None:
        """Stop claiming and give every agent back at once, unfinished (a drain in progress
        too); another worker resumes each from its checkpoint."""
        self._serving = Serving.GIVING_BACK
        for agent in list(self._hosted.values()):
            agent.give_back_now()
        self._stop_claiming()

    def _stop_claiming(self) -> None:
        if self._claim_scope is not None:
            self._claim_scope.cancel()

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Claim and host until :meth:`drain` or :meth:`give_back_now` (or cancellation), then
        drain."""
        async with anyio.create_task_group() as outer:
            await outer.start(self._host_agents)
            try:
                log.info("worker %s serving (concurrency %d)", self.name, self.concurrency)
                task_status.started()
                await self._claim_loop()
            finally:
                with anyio.CancelScope(shield=True):
                    await self._drain()

    async def _host_agents(self, *, task_status: TaskStatus[None]) -> None:
        """Own the agents' task group, shielded: only the worker decides how agents stop."""
        with anyio.CancelScope(shield=True):
            async with anyio.create_task_group() as agents:
                self._agents = agents
                agents.start_soon(self._heartbeat)
                task_status.started()
                await self._all_done.wait()
                agents.cancel_scope.cancel()  # the heartbeat; every agent is gone by now

    async def _drain(self) -> None:
        if not self.stopping:  # cancelled from outside: give everything back now
            self.give_back_now()
        for agent in list(self._hosted.values()):
            agent.drain()
        if not await self._until_empty(self.shutdown_timeout_s):
            self.give_back_now()  # the rest, and any agent whose hosting is still starting
            if not await self._until_empty(LEAVE_S):
                # Every bus call they wait on is bounded or cancellable: the agents' task group,
                # cancelled once the worker is stopped, ends what is left.
                log.error(
                    "worker %s: %d agents still leaving after %.0f s; cancelling them",
                    self.name,
                    len(self._hosted),
                    LEAVE_S,
                )
        self._all_done.set()
        log.info("worker %s stopped (%d agents finished here)", self.name, self.finished)

    async def _until_empty(self, timeout_s: float) -> bool:
        """Wait until no agent is hosted, at most ``timeout_s``; whether none is."""
        with anyio.move_on_after(timeout_s):
            while self._hosted:
                await self._changed().wait()
        return not self._hosted

    def _changed(self) -> anyio.Event:
        if self._change is None:
            self._change = anyio.Event()
        return self._change

    def _notify(self) -> None:
        change, self._change = self._change, None
        if change is not None:
            change.set()

    # -- claiming -------------------------------------------------------------------------------

    async def _claim_loop(self) -> None:
        while not self.stopping:
            token = object()
            claim: SpawnClaim | None = None
            with anyio.CancelScope() as self._claim_scope:
                if self.stopping:
                    break
                await self._limiter.acquire_on_behalf_of(token)
                try:
                    claim = await persist(
                        partial(self.bus.claim_spawn, timeout=self.claim_timeout_s), "claim"
                    )
                finally:
                    if claim is None:
                        self._limiter.release_on_behalf_of(token)
            self._claim_scope = None
            if claim is None:
                continue
            if self.stopping:
                self._limiter.release_on_behalf_of(token)
                await self._give_back([claim.receipt])
                break
            self.claimed += 1
            assert self._agents is not None
            self._agents.start_soon(self._host, claim, token)

    async def _heartbeat(self) -> None:
        while True:
            await anyio.sleep(self.heartbeat_s)
            receipts = list(self._hosted)
            if not receipts:
                continue
            try:
                held = set(await self.bus.renew_spawn(receipts))
            except BusClosed:
                return
            except BusError as exc:
                # No answer (or a refusal, such as READONLY from a replica during a failover) is
                # not "not yours": every agent stays, and the next beat renews the leases (a lease
                # spans several beats). Only the bus's answer can say a lease was lost, and only
                # for the receipts that answer was about.
                log.warning("heartbeat of %d leases failed: %s; retrying", len(receipts), exc)
                continue
            for receipt in receipts:
                agent = self._hosted.get(receipt)
                if receipt not in held and agent is not None:
                    # Our lease lapsed (a stall) and another worker took the agent over: stop
                    # this copy without a report; the new owner resumes from the checkpoint.
                    log.warning("lost the lease of %s/%s; stopping here", agent.session, agent.name)
                    agent.lose_lease()

    # -- hosting --------------------------------------------------------------------------------

    async def _host(self, claim: SpawnClaim, token: object) -> None:
        """Run one agent to its end, then ack (done for good) or give back (unfinished)."""
        request = claim.request
        key = (request.session, request.agent)
        try:
            profile = self.profiles.get(request.profile)
            if profile is None:
                await self._refuse(claim, f"unknown profile {request.profile!r}")
                return
            if key in self._by_agent:  # already running here: it reads the same inbox
                log.info("duplicate spawn of %s/%s; already hosted", *key)
                await persist(partial(self.bus.ack_spawn, [claim.receipt]), "ack duplicate")
                return
            agent = SubAgent(
                self.bus,
                profile,
                self.models(profile),
                session=request.session,
                name=request.agent,
                lead=request.parent,
                media_dir=self.media_dir,
                spawn_id=request.id,
                owner=f"{self.name}/{claim.receipt}",
                tools=self._tools[profile.name],
                telemetry=self.telemetry,
                on_round=self.on_round,
            )
            self._hosted[claim.receipt] = agent
            self._by_agent[key] = claim.receipt
            # A drain that began while this task was queued did not see the agent: stop it now.
            if self._serving is Serving.GIVING_BACK:
                agent.give_back_now()
            elif self._serving is Serving.DRAINING:
                agent.drain()
            await self._run_agent(claim, agent)
        finally:
            self._hosted.pop(claim.receipt, None)
            if self._by_agent.get(key) == claim.receipt:
                del self._by_agent[key]
            self._limiter.release_on_behalf_of(token)
            self._notify()

    async def _run_agent(self, claim: SpawnClaim, agent: SubAgent) -> None:
        request = claim.request
        spawned = AgentSpawned(
            session=request.session, agent=request.agent, profile=request.profile, worker=self.name
        )
        log.info("hosting %s/%s (%s)", request.session, request.agent, request.profile)
        try:
            reason = await agent.run(announce=spawned)
        except Exception:
            log.exception("hosting %s/%s failed", request.session, request.agent)
            await self._give_back([claim.receipt])
            return
        if reason is not None:
            self.finished += 1
            log.info("%s/%s exited: %s", request.session, request.agent, reason)
            # If this times out, the next owner finds the agent exited and only acks it.
            await self._settle(request, "ack spawn", partial(self.bus.ack_spawn, [claim.receipt]))
        elif agent.lost:
            log.info("%s/%s was taken over by another worker", request.session, request.agent)
        else:
            log.info("%s/%s given back unfinished", request.session, request.agent)
            # Its un-acked messages go back too, so the next owner need not wait a lease.
            release = partial(self.bus.release_inbox, request.session, request.agent)
            await self._settle(request, "release inbox", release)
            await self._give_back([claim.receipt])

    async def _give_back(self, receipts: list[str]) -> None:
        release = partial(self.bus.release_spawn, receipts)
        await self._settle(None, "release spawn", release)

    async def _settle(
        self, request: SpawnRequest | None, what: str, *steps: Callable[[], Awaitable[object]]
    ) -> bool:
        """The worker's own bookkeeping on the bus: each step retried through blips, all of them
        shielded (a stopping worker still does it) and together bounded by ``GIVE_BACK_S`` (the
        bus may be down; a request left as it is is claimed again later). False once logged that
        the bound was hit."""
        with anyio.CancelScope(shield=True), anyio.move_on_after(GIVE_BACK_S) as bound:
            for step in steps:
                await persist(step, what)
        if not bound.cancelled_caught:
            return True
        whose = f" of {request.session}/{request.agent}" if request is not None else ""
        log.warning("%s%s not done within %.0f s; it will be claimed again",
                    what, whose, GIVE_BACK_S)  # fmt: skip
        return False

    async def _refuse(self, claim: SpawnClaim, problem: str) -> None:
        """A request no profile here can serve still gets one final result (an error)."""
        request = claim.request
        known = ", ".join(sorted(self.profiles)) or "none"
        content = f"Cannot start {request.agent}: {problem} (this worker knows: {known})."
        log.error("%s", content)
        envelope = Envelope(
            id=f"refused-{request.id}",
            session=request.session,
            sender=request.agent,
            recipient=request.parent,
            type="result",
            content=content,
            meta=ResultReport(reason="error", steps=0).to_meta(),
        )
        s, a = request.session, request.agent
        # If this times out, the same refusal (same id) goes out again on the next claim.
        await self._settle(
            request,
            "refusal",
            partial(self.bus.send, envelope),
            partial(self.bus.emit, AgentResult(session=s, agent=a, content=content)),
            partial(self.bus.emit, AgentExited(session=s, agent=a, reason="error")),
            partial(self.bus.ack_spawn, [claim.receipt]),
        )
