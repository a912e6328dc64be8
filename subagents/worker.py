"""The worker service: claims spawn requests and hosts their sub-agents as anyio tasks.

Embed it in your own anyio application::

    async with open_bus("redis://localhost:6379/0") as bus, EnvModels.from_environ() as models:
        async with Worker(bus, builtin_profiles(), models, limits=WorkerLimits(500)) as worker:
            ...                      # or: await task_group.start(worker.run)
            worker.drain()           # stop claiming, let rounds finish, give back the rest

Without a model factory a worker uses the built-in offline model: a library class never reads the
environment by itself, so ``OPENAI_API_KEY`` reaches the agents only through a factory you pass
(``baton worker`` passes a :class:`~baton.subagents.models.ProfileModels` built from its settings;
each profile may override them, down to another endpoint). Each agent asks its profile's
``tool_choice`` and, when the session has a budget on the bus, counts every model call against it.

What it claims (:attr:`Worker.queue`): with ``session=`` only that session's own requests (the
worker a session starts for itself), else the requests routed to its ``pool`` (default
``default``) for the profiles it knows: a request for a profile it lacks stays queued for a worker
that has it (``docs/protocol.md``, *Spawn requests and worker pools*).

What it guarantees:

- each hosted agent holds a lease on its spawn request, renewed every ``lease_s / 3``; a worker
  that dies (kill -9) stops renewing, the lease lapses and another worker's claim resumes the agent
  from its checkpoint (see :mod:`baton.subagents.bookkeeping`);
- at most ``concurrency`` agents are hosted at once (a :class:`anyio.CapacityLimiter`); it claims
  no more until one leaves;
- an agent waiting for its inbox is parked (:mod:`baton.subagents.parking`): held as a callback
  on its inbox's wake-up and a timer, not as a task, and resumed in a new task when woken, at its
  next look at the inbox or its idle deadline, or when the worker stops; a parked agent keeps its
  lease and its place under ``concurrency``;
- :meth:`Worker.drain`: stop claiming, let running rounds finish, give the rest back
  (``release_spawn``) so another worker resumes them at once, and be stopped within
  ``shutdown_timeout_s`` (the last :data:`GIVE_BACK_GRACE_S` of it, at most half, is for giving
  back); :meth:`Worker.give_back_now` (also after a drain began) gives everything back
  immediately and stops within :data:`GIVE_BACK_GRACE_S`. Cancelling :meth:`run` from outside is
  ``give_back_now()``: agents are given back, never reported as finished;
- a profile's MCP servers (:mod:`baton.subagents.mcp`) start on its first agent, one connection
  per server shared by every agent here, restarted after they die, closed with the worker; one
  that cannot start refuses the agent with an error result naming the profile and the server;
- a remote A2A agent's profile (``kind = "a2a"``) runs its agents' rounds as a relay to the
  remote (:mod:`baton.subagents.a2a_remote`), one client per profile, closed with the worker;
  without the ``a2a`` extra its agents are refused with an error result saying what to install;
- bus faults are ridden out with backoff (:func:`~baton.bus.retry.persist`); a failed
  heartbeat keeps every agent and renews at the next beat (a lease spans several beats);
- stopping ends on time whatever the bus does: giving back cuts an agent's start short, every
  shielded step after it (a turn's last events, a final report, acking or giving back a request)
  has a time bound, and at the stop's deadline the worker cuts whatever is still open
  (:mod:`baton.subagents.stopping`); a request left un-acked is claimed again once its lease
  lapses, and its next owner only finishes what is recorded.

The worker is the service and its stop; each of its other jobs is a module of its own:
:mod:`~baton.subagents.claiming` (a place under ``concurrency``, then a claim),
:mod:`~baton.subagents.admission` (whether a claim is hosted here, and as what agent),
:mod:`~baton.subagents.hosting` (the agents hosted, each to its end),
:mod:`~baton.subagents.heartbeat` (the pool's announcement and the leases) and
:mod:`~baton.subagents.settling` (its own bookkeeping on the bus).
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import anyio
from anyio.abc import TaskGroup, TaskStatus

from baton.bus.base import Bus, SpawnClaim, SpawnQueue
from baton.bus.lifecycle import Service
from baton.bus.messages import DEFAULT_POOL
from baton.engine import Telemetry
from baton.subagents.a2a_worker import WorkerA2A
from baton.subagents.admission import Admission
from baton.subagents.claiming import Claiming
from baton.subagents.heartbeat import Heartbeat
from baton.subagents.hosting import HostedAgents, Hosting, Ticket, named_agents
from baton.subagents.loop import NO_PARTS, AgentParts, SubAgent
from baton.subagents.mcp_worker import WorkerMcp
from baton.subagents.models import EnvModels, ModelFactory, offline_models
from baton.subagents.parking import Parking
from baton.subagents.profiles import Profile, builtin_profiles
from baton.subagents.settling import GIVE_BACK_S as GIVE_BACK_S
from baton.subagents.settling import ClaimSettler, why
from baton.subagents.stopping import GIVE_BACK_GRACE_S as GIVE_BACK_GRACE_S
from baton.subagents.stopping import Shields, StopClock

log = logging.getLogger(__name__)

RENEW_SLICE = 2000
"""Receipts renewed per call at a beat, one call after the other. A call looks at each of its
receipts before its first round trip, and the event loop serves nothing meanwhile: 50,000 at
once held it for 55-85 ms when each receipt was renewed on its own (a task sent to any of the
worker's agents waited for it: the dispatch p99 at 100,000 agents). On Redis a call now costs a
round trip for its leases (one a pool), not one per receipt (bus/redis/leases.py): a slice of
2,000 takes about 1.2 ms, its round trip included, some 0.6 ms of it holding the loop."""

UNWIND_S = 1.0
"""How long a cut stop waits for its agents' tasks to unwind before cancelling them."""


class Serving(enum.Enum):
    """Where a worker stands; it only moves forward."""

    CLAIMING = "claiming"
    """Claims spawn requests and hosts their agents."""
    DRAINING = "draining"
    """Claims no more; running rounds may finish, the rest is given back in time to be stopped
    within ``shutdown_timeout_s``."""
    GIVING_BACK = "giving back"
    """Claims no more and gives every agent back at once, including one it is just starting."""


@dataclass(frozen=True, slots=True)
class WorkerLimits:
    """How much a worker hosts and how long it waits: at most ``concurrency`` agents at once; a
    stop gives them ``shutdown_timeout_s`` to finish their rounds; one claim blocks at most
    ``claim_timeout_s`` (a stop is noticed by then); it renews its leases and says it serves its
    pool every ``heartbeat_s`` (None: a third of the bus's lease), ``renew_slice`` leases a call
    (:data:`RENEW_SLICE`)."""

    concurrency: int = 100
    shutdown_timeout_s: float = 30.0
    claim_timeout_s: float = 5.0
    heartbeat_s: float | None = None
    renew_slice: int = RENEW_SLICE

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, not {self.concurrency}")
        if self.renew_slice < 1:
            raise ValueError(f"renew_slice must be at least 1, not {self.renew_slice}")


DEFAULT_LIMITS = WorkerLimits()


class Worker(Service):
    """Hosts sub-agents for spawn requests on ``bus``; see the module docstring.

    ``parts`` are what every agent it hosts works with (media, images, telemetry, the
    ``on_round`` hook, and for a session's own worker its budget: a pool's agents each find their
    session's on the bus); each agent's tools and remote runner are its profile's, so ``parts``
    names none. ``limits``: :class:`WorkerLimits`.

    Use it once, as ``async with`` (a :class:`~baton.bus.lifecycle.Service`), or run :meth:`run`
    in a task group of your own.
    """

    def __init__(
        self,
        bus: Bus,
        profiles: Mapping[str, Profile] | None = None,
        model_factory: ModelFactory | None = None,
        *,
        pool: str = DEFAULT_POOL,
        session: str | None = None,
        name: str | None = None,
        parts: AgentParts = NO_PARTS,
        limits: WorkerLimits = DEFAULT_LIMITS,
    ) -> None:
        if parts.tools is not None or parts.remote is not None:
            raise ValueError("a worker's agents take their tools and remote runner from profiles")
        if parts.spend is not None and session is None:
            raise ValueError("a pool's worker hosts many sessions' agents: each spends its own")
        self.bus = bus
        self.profiles = dict(profiles) if profiles is not None else builtin_profiles()
        self.queue = (
            SpawnQueue.of_session(session)
            if session is not None
            else SpawnQueue.of_pool(pool, self.profiles)
        )
        """What it claims: ``session``'s own requests (the worker inside a session), else those
        routed to ``pool`` for its profiles (a ``ValueError`` for a malformed pool name)."""
        super().__init__()
        self._owned_models: EnvModels | None = None
        if model_factory is None:  # the offline model, closed with the worker
            model_factory = self._owned_models = offline_models()
        self.models: ModelFactory = model_factory
        self.concurrency = limits.concurrency
        self.media_dir = parts.media_dir or Path("media")
        self.media = parts.media
        """Where the agents' tools put media (docs/media.md); None: a folder at ``media_dir``."""
        self.images = parts.images
        """What draws ``generate_image``'s pictures; None: the offline demo painter."""
        self.spend = parts.spend
        self.name = name or bus.consumer
        self.shutdown_timeout_s = limits.shutdown_timeout_s
        self.claim_timeout_s = limits.claim_timeout_s
        self.heartbeat_s = limits.heartbeat_s or bus.options.lease_s / 3
        self.renew_slice = limits.renew_slice
        self.on_round = parts.on_round
        self.telemetry = parts.telemetry or Telemetry()
        self.telemetry.watch_agents(self)
        self._mcp = WorkerMcp(self.profiles, self.name)  # its MCP servers, opened by run()
        self._a2a = WorkerA2A()  # its remote A2A agents' clients, opened by run()
        self._serving = Serving.CLAIMING
        self._agents: TaskGroup | None = None
        self._parking: Parking[Ticket] = Parking(bus)
        """Its idle agents, parked (subagents/parking.py)."""
        self._all_done = anyio.Event()
        self._shields = Shields()
        self._clock = StopClock()
        self._settler = ClaimSettler(bus, self._shields, self.name, self.profiles)
        self._claiming = Claiming(bus, self.queue, self.name, concurrency=limits.concurrency,
                                  timeout_s=self.claim_timeout_s)  # fmt: skip
        self._admission = Admission(bus, self.name, self.profiles, self.models, self._mcp,
                                    self._a2a, self._settler)  # fmt: skip
        self._beat = Heartbeat(
            bus, self.queue, self.name, every_s=self.heartbeat_s, renew_slice=self.renew_slice
        )
        self._hosted = HostedAgents(
            self._settler,
            self._parking,
            release=self._claiming.release,
            unpark=self._unpark,
            stopping=lambda: self.stopping,
        )
        self._changed = self._hosted.changed
        self.claimed = 0

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
    def finished(self) -> int:
        """How many agents exited here with their final report."""
        return self._hosted.finished

    @property
    def hosted(self) -> int:
        """How many agents this worker hosts right now."""
        return len(self._hosted)

    @property
    def parked(self) -> int:
        """How many of its agents are parked (idle, held without a task)."""
        return len(self._parking)

    def agent_counts(self) -> tuple[int, int]:
        """(running a round, idle) agents now; read from the metrics exporter's thread, so it
        copies the agents in one step (no Python code runs while a tuple takes a dict's values)."""
        return self._hosted.counts()

    # -- lifecycle ------------------------------------------------------------------------------

    async def _open(self, stack: AsyncExitStack) -> None:
        """``async with worker``: :meth:`run` in a task group of its own; leaving drains it."""
        if self._owned_models is not None:
            stack.push_async_callback(self._owned_models.aclose)
        group = await stack.enter_async_context(anyio.create_task_group())
        stack.callback(self.drain)  # unwound first: the group then waits for the drain to end
        await group.start(self.run)

    def drain(self) -> None:
        """Stop claiming; running rounds may finish, then the rest is given back, all within
        ``shutdown_timeout_s``. Does nothing once stopping: :meth:`give_back_now` hurries a
        drain."""
        if self._serving is Serving.CLAIMING:
            self._serving = Serving.DRAINING
            self._claiming.stop()
            total = self.shutdown_timeout_s
            self._clock.set(give_back_in=total - min(GIVE_BACK_GRACE_S, total / 2), cut_in=total)

    def give_back_now(self) -> None:
        """Stop claiming and give every agent back at once, unfinished (a drain in progress
        too); another worker resumes each from its checkpoint. Stopped within
        :data:`GIVE_BACK_GRACE_S` whatever the bus does."""
        self._serving = Serving.GIVING_BACK
        for agent in list(self._hosted.values()):
            agent.give_back_now()
        self._give_back_parked()
        self._claiming.stop()
        self._clock.set(give_back_in=0.0, cut_in=GIVE_BACK_GRACE_S)

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Claim and host until :meth:`drain` or :meth:`give_back_now` (or cancellation), then
        drain."""
        shields = self._shields.enter()  # every agent started from here on finds them
        try:
            async with self._mcp.open(), self._a2a, anyio.create_task_group() as outer:
                await outer.start(self._host_agents)
                try:
                    await self._beat.announce()
                    log.info("worker %s serving %s (concurrency %d)",
                             self.name, self.queue, self.concurrency)  # fmt: skip
                    task_status.started()
                    await self._claim_loop()
                finally:
                    with anyio.CancelScope(shield=True):
                        await self._drain()
        finally:
            self._shields.leave(shields)

    async def _host_agents(self, *, task_status: TaskStatus[None]) -> None:
        """Own the agents' task group, shielded: only the worker decides how agents stop."""
        with anyio.CancelScope(shield=True):
            async with anyio.create_task_group() as agents:
                self._agents = agents
                beat = partial(self._beat.run, self._hosted.by_receipt,
                               claiming=lambda: not self.stopping,
                               release_parked=self._parking.release)  # fmt: skip
                agents.start_soon(beat)
                agents.start_soon(self._parking.run, self._unpark)
                agents.start_soon(self._clock.run, self.give_back_now, self._cut)
                task_status.started()
                await self._all_done.wait()
                agents.cancel_scope.cancel()  # the heartbeat; every agent is gone by now

    async def _drain(self) -> None:
        if not self.stopping:  # cancelled from outside: give everything back now
            self.give_back_now()
        for agent in list(self._hosted.values()):
            agent.drain()
        self._give_back_parked()
        # The stop clock gives back what still runs, then cuts what is left (see drain()).
        while self._hosted and not self._shields.is_cut:
            await self._changed().wait()
        if self._hosted:  # cut: every shield is cancelled, so their tasks unwind at once
            with anyio.move_on_after(UNWIND_S):
                while self._hosted:
                    await self._changed().wait()
            if self._hosted:
                log.error("worker %s: %d agents did not unwind within %.0f s; cancelling them",
                          self.name, len(self._hosted), UNWIND_S)  # fmt: skip
        self._all_done.set()  # the agents' task group is cancelled next
        log.info("worker %s stopped (%d agents finished here)", self.name, self.finished)

    def _cut(self) -> None:
        """The stop's deadline: cancel every shielded step still open (a turn's last events, a
        report, a give-back waiting on the bus). What the bus did not confirm stays recorded,
        and another worker resumes each agent once its lease lapses."""
        left = self._hosted.names()
        if left:
            named = named_agents(left)
            log.warning(
                "worker %s: stop deadline reached; left for another worker, which resumes them "
                "once their leases lapse (within %.0f s): %s",
                self.name, self.bus.options.lease_s, named,
            )  # fmt: skip
        self._shields.cut()
        self._hosted.notify()

    # -- claiming -------------------------------------------------------------------------------

    async def _claim_loop(self) -> None:
        try:
            await self._claiming.run(self._start_hosting, self._settler.give_back)
        finally:
            with self._shields.shield(GIVE_BACK_S):  # cut at a stop's deadline
                await self._beat.announce(stopping=True)  # it serves the pool no more
                await self._claiming.leave()

    def _start_hosting(self, claim: SpawnClaim, token: object) -> None:
        self.claimed += 1
        assert self._agents is not None
        self._agents.start_soon(self._host, claim, token)

    # -- hosting --------------------------------------------------------------------------------

    async def _host(self, claim: SpawnClaim, token: object) -> None:
        """Admit one agent and tend it (:meth:`HostedAgents.tend`); a claim it cannot host is
        settled here.

        Past admitting, the task keeps a :class:`Hosting` of the claim, not the claim: the request
        (its task text and all) is parsed again by nobody, and an idle agent's host should hold
        no more than it needs (issue 24: memory per idle agent)."""
        hosting = Hosting.of(claim)
        agent: SubAgent | None = None
        try:
            agent = await self._admission.admit(claim, self._parts(), self._hosted.by_agent)
        except Exception as exc:
            # Before the agent ran (even its refusal failed): the same on every claim, so the
            # request is set aside rather than coming back every lease for ever.
            log.exception("cannot host %s/%s; setting its request aside",
                          hosting.session, hosting.agent)  # fmt: skip
            await self._settler.set_aside(claim, f"it could not be hosted: {why(exc)}")
        finally:
            if agent is None:
                self._hosted.remove(hosting, token)
        del claim  # see the docstring
        if agent is None:
            return
        self._hosted.add(hosting, agent)
        # A drain that began while this task was queued did not see the agent: stop it now.
        if self._serving is Serving.GIVING_BACK:
            agent.give_back_now()
        elif self._serving is Serving.DRAINING:
            agent.drain()
        log.info("hosting %s/%s (%s)", hosting.session, hosting.agent, hosting.profile)
        run = agent.run(announce=hosting.claimed_by(self.name), park=True)
        await self._hosted.tend(Ticket(hosting, agent, token), run)

    async def _resume(self, ticket: Ticket) -> None:
        """Go on with a parked agent, in a task of its own."""
        await self._hosted.tend(ticket, ticket.agent.resume())

    def _give_back_parked(self) -> None:
        """Give every parked agent back at once (:meth:`HostedAgents.give_back_parked`)."""
        together = self._hosted.give_back_parked()
        if together:
            assert self._agents is not None
            self._agents.start_soon(self._hosted.hand_back, together)

    def _unpark(self, ticket: Ticket) -> None:
        """A parked agent was woken (or its time came, or it must stop): resume it in a task of
        the agents' group."""
        assert self._agents is not None
        self._agents.start_soon(self._resume, ticket)

    def _parts(self) -> AgentParts:
        """What every agent it hosts works with, as the worker has it now."""
        return AgentParts(
            media_dir=self.media_dir,
            media=self.media,
            images=self.images,
            telemetry=self.telemetry,
            spend=self.spend,
            on_round=self.on_round,
        )
