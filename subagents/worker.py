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
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import anyio
from anyio.abc import TaskGroup, TaskStatus

from baton.bus.base import Bus, SpawnClaim, SpawnQueue
from baton.bus.errors import BusClosed, BusError, BusUnreachable, InvalidEnvelope
from baton.bus.events import AgentClaimed, AgentExited, AgentResult
from baton.bus.lifecycle import Service
from baton.bus.messages import DEFAULT_POOL, SpawnRequest
from baton.bus.refusals import SpawnRefusal, refusal_result
from baton.bus.retry import persist
from baton.bus.signing import key_mismatch
from baton.engine import Telemetry, ToolRegistry
from baton.subagents.a2a_worker import WorkerA2A
from baton.subagents.bookkeeping import watched_inboxes
from baton.subagents.loop import NO_PARTS, PARKED, AgentParts, Parked, Seat, SubAgent, TurnMaker
from baton.subagents.mcp_worker import WorkerMcp
from baton.subagents.models import EnvModels, ModelFactory, offline_models
from baton.subagents.parking import Parking
from baton.subagents.profiles import Profile, builtin_profiles
from baton.subagents.state import ExitKind
from baton.subagents.stopping import Shields, StopClock

log = logging.getLogger(__name__)

RENEW_SLICE = 2000
"""Receipts renewed per call at a beat, one call after the other. A call looks at each of its
receipts before its first round trip, and the event loop serves nothing meanwhile: 50,000 at
once held it for 55-85 ms when each receipt was renewed on its own (a task sent to any of the
worker's agents waited for it: the dispatch p99 at 100,000 agents). On Redis a call now costs a
round trip for its leases (one a pool), not one per receipt (bus/redis/claims.py): a slice of
2,000 takes about 1.2 ms, its round trip included, some 0.6 ms of it holding the loop."""

GIVE_BACK_S = 10.0
"""Bound on each piece of a worker's own bookkeeping (giving a spawn request back, acking it,
refusing it): the bus may be down, and a request left un-acked is simply claimed again later."""

CLAIM_REFUSED_S = 1.0
"""How long a worker waits before claiming again after the bus refused a claim."""

GIVE_BACK_GRACE_S = 2.0
"""How long giving back may take before a stopping worker cuts what is still open: on a healthy
bus a give-back takes milliseconds; on a bus that is down nothing would come of waiting longer,
and what was not handed back is recovered from its lease."""

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
class Hosting:
    """What a worker keeps of a claim while its agent runs."""

    receipt: str
    session: str
    agent: str
    profile: str

    @classmethod
    def of(cls, claim: SpawnClaim) -> Hosting:
        request = claim.request
        return cls(claim.receipt, request.session, request.agent, request.profile)


@dataclass(frozen=True, slots=True)
class _Ticket:
    """What resumes a parked agent: its hosting, itself, and its slot in the limiter."""

    hosting: Hosting
    agent: SubAgent
    token: object


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
        self._tools = {name: ToolRegistry(p.tools) for name, p in self.profiles.items()}
        self._mcp = WorkerMcp(self.profiles, self.name)  # its MCP servers, opened by run()
        self._a2a = WorkerA2A()  # its remote A2A agents' clients, opened by run()
        self._limiter = anyio.CapacityLimiter(limits.concurrency)
        self._hosted: dict[str, SubAgent] = {}
        self._by_agent: dict[tuple[str, str], str] = {}
        self._serving = Serving.CLAIMING
        self._claim_scope: anyio.CancelScope | None = None
        self._agents: TaskGroup | None = None
        self._parking: Parking[_Ticket] = Parking(bus)
        """Its idle agents, parked (subagents/parking.py)."""
        self._all_done = anyio.Event()
        self._change: anyio.Event | None = None
        self._shields = Shields()
        self._clock = StopClock()
        self.claimed = 0
        self.finished = 0
        self._announced = True
        """Whether the last announcement that it serves its pool went out (``_announce``)."""

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

    @property
    def parked(self) -> int:
        """How many of its agents are parked (idle, held without a task)."""
        return len(self._parking)

    def agent_counts(self) -> tuple[int, int]:
        """(running a round, idle) agents now; read from the metrics exporter's thread, so it
        copies the agents in one step (no Python code runs while a tuple takes a dict's values)."""
        agents = tuple(self._hosted.values())
        running = sum(1 for agent in agents if agent.busy)
        return running, len(agents) - running

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
            self._stop_claiming()
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
        self._stop_claiming()
        self._clock.set(give_back_in=0.0, cut_in=GIVE_BACK_GRACE_S)

    def _stop_claiming(self) -> None:
        if self._claim_scope is not None:
            self._claim_scope.cancel()

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Claim and host until :meth:`drain` or :meth:`give_back_now` (or cancellation), then
        drain."""
        shields = self._shields.enter()  # every agent started from here on finds them
        try:
            async with self._mcp.open(), self._a2a, anyio.create_task_group() as outer:
                await outer.start(self._host_agents)
                try:
                    await self._announce()
                    log.info("worker %s serving %s (concurrency %d)",
                             self.name, self.queue, self.concurrency)  # fmt: skip
                    task_status.started()
                    await self._claim_loop()
                finally:
                    with anyio.CancelScope(shield=True):
                        await self._drain()
        finally:
            self._shields.leave(shields)

    async def _announce(self, *, stopping: bool = False) -> None:
        """Tell the pool's sessions that this worker serves the pool for its profiles (renewed
        at every heartbeat), or, ``stopping``, that it no longer does: a session whose request
        nobody claims asks this before it gives up on it (``Bus.pool_workers``). Bounded and
        best effort: a worker never stops serving for it. A session's own worker announces
        nothing (its session knows it)."""
        if self.queue.local:
            return
        ttl = 0.0 if stopping else self.heartbeat_s * 3  # three beats: one missed is no death
        announce = partial(self.bus.workers.announce, self.queue.pool, self.name,
                           self.queue.profiles, ttl)  # fmt: skip
        problem: object = None
        bound_s = GIVE_BACK_GRACE_S if stopping else min(GIVE_BACK_S, self.heartbeat_s)
        with anyio.move_on_after(bound_s) as bound:
            try:
                await announce()
            except BusError as exc:
                problem = exc
        if bound.cancelled_caught:
            problem = "the bus did not answer in time"
        if problem is not None and self._announced and not stopping:  # once per run of failures
            log.warning("worker %s: could not announce that it serves pool %s (a session that "
                        "finds no live worker ends the agents it waits for): %s",
                        self.name, self.queue.pool, problem)  # fmt: skip
        self._announced = problem is None

    async def _host_agents(self, *, task_status: TaskStatus[None]) -> None:
        """Own the agents' task group, shielded: only the worker decides how agents stop."""
        with anyio.CancelScope(shield=True):
            async with anyio.create_task_group() as agents:
                self._agents = agents
                agents.start_soon(self._heartbeat)
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
        left = [f"{agent.session}/{agent.name}" for agent in self._hosted.values()]
        if left:
            named = _named(left)
            log.warning(
                "worker %s: stop deadline reached; left for another worker, which resumes them "
                "once their leases lapse (within %.0f s): %s",
                self.name, self.bus.options.lease_s, named,
            )  # fmt: skip
        self._shields.cut()
        self._notify()

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
        try:
            await self._claim_requests()
        finally:
            with self._shields.shield(GIVE_BACK_S):  # cut at a stop's deadline
                await self._announce(stopping=True)  # it serves the pool no more
                try:
                    await self.bus.claims.leave(self.queue)
                except BusError as exc:  # only wake-ups are at stake
                    log.debug("worker %s: leaving %s: %s", self.name, self.queue, exc)

    async def _claim_requests(self) -> None:
        while not self.stopping:
            token = object()
            claim: SpawnClaim | None = None
            with anyio.CancelScope() as self._claim_scope:
                if self.stopping:
                    break
                await self._limiter.acquire_on_behalf_of(token)
                try:
                    claim = await persist(
                        partial(self.bus.claims.claim, self.queue, timeout=self.claim_timeout_s),
                        "claim",
                    )
                except (BusClosed, BusUnreachable):
                    raise
                except BusError as exc:
                    # A refusal (LOADING while a restarted Redis reads its data back, READONLY
                    # during a failover) passes: the worker asks again, it never dies of one.
                    log.warning("worker %s: claim refused: %s; asking again in %.0f s",
                                self.name, exc, CLAIM_REFUSED_S)  # fmt: skip
                    await anyio.sleep(CLAIM_REFUSED_S)
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
            if self._serving is Serving.CLAIMING:
                await self._announce()
            receipts = list(self._hosted)
            try:
                for first in range(0, len(receipts), self.renew_slice):
                    await self._renew(receipts[first : first + self.renew_slice])
            except BusClosed:
                return
            except BusError as exc:
                # No answer (or a refusal, such as READONLY from a replica during a failover) is
                # not "not yours": every agent stays, and the next beat renews the leases (a lease
                # spans several beats). Only the bus's answer can say a lease was lost, and only
                # for the receipts that answer was about.
                log.warning("heartbeat of %d leases failed: %s; retrying", len(receipts), exc)

    async def _renew(self, receipts: list[str]) -> None:
        """Renew the leases of ``receipts``; stop the agents whose lease the bus says we lost."""
        held = set(await self.bus.claims.renew(receipts))
        for receipt in receipts:
            agent = self._hosted.get(receipt)
            if receipt not in held and agent is not None:
                # Our lease lapsed (a stall) and another worker took the agent over: stop this
                # copy without a report; the new owner resumes from the checkpoint.
                log.warning("lost the lease of %s/%s; stopping here", agent.session, agent.name)
                agent.lose_lease()
                self._parking.release(receipt)  # a parked one stops once resumed

    # -- hosting --------------------------------------------------------------------------------

    async def _host(self, claim: SpawnClaim, token: object) -> None:
        """Admit one agent and tend it (:meth:`_tend`); a claim it cannot host is settled here.

        Past admitting, the task keeps a :class:`Hosting` of the claim, not the claim: the request
        (its task text and all) is parsed again by nobody, and an idle agent's host should hold
        no more than it needs (issue 24: memory per idle agent)."""
        hosting = Hosting.of(claim)
        agent: SubAgent | None = None
        try:
            agent = await self._admit(claim)
        except Exception as exc:
            # Before the agent ran (even its refusal failed): the same on every claim, so the
            # request is set aside rather than coming back every lease for ever.
            log.exception("cannot host %s/%s; setting its request aside",
                          hosting.session, hosting.agent)  # fmt: skip
            await self._set_aside(claim, f"it could not be hosted: {_why(exc)}")
        finally:
            if agent is None:
                self._unhost(hosting, token)
        del claim  # see the docstring
        if agent is None:
            return
        self._hosted[hosting.receipt] = agent
        self._by_agent[(hosting.session, hosting.agent)] = hosting.receipt
        # A drain that began while this task was queued did not see the agent: stop it now.
        if self._serving is Serving.GIVING_BACK:
            agent.give_back_now()
        elif self._serving is Serving.DRAINING:
            agent.drain()
        log.info("hosting %s/%s (%s)", hosting.session, hosting.agent, hosting.profile)
        run = agent.run(announce=self._claimed(hosting), park=True)
        await self._tend(_Ticket(hosting, agent, token), run)

    async def _resume(self, ticket: _Ticket) -> None:
        """Go on with a parked agent, in a task of its own."""
        await self._tend(ticket, ticket.agent.resume())

    async def _tend(self, ticket: _Ticket, step: Awaitable[ExitKind | Parked | None]) -> None:
        """Run the agent (``step``: its run, or a resume) until it parks or ends, then ack (done
        for good) or give back (unfinished); a parked agent stays hosted."""
        parked = False
        try:
            parked = await self._run_agent(ticket, step)
        except Exception:
            # One agent's failure stays that agent's: its host (a server with other sessions)
            # and the other agents carry on, and its request is claimed again once its lease
            # lapses (its next owner finishes only what is recorded).
            log.exception("hosting %s/%s failed; it will be claimed again",
                          ticket.hosting.session, ticket.hosting.agent)  # fmt: skip
        finally:
            if not parked:
                self._unhost(ticket.hosting, ticket.token)

    def _unhost(self, hosting: Hosting, token: object) -> None:
        key = (hosting.session, hosting.agent)
        self._hosted.pop(hosting.receipt, None)
        if self._by_agent.get(key) == hosting.receipt:
            del self._by_agent[key]
        self._limiter.release_on_behalf_of(token)
        self._notify()

    def _give_back_parked(self) -> None:
        """A stop gives every parked (idle) agent back without resuming it: nothing is in
        flight, so all that is left is on the bus, done for all of them together
        (:meth:`_hand_back_parked`). One the agent says must be resumed to stop is resumed."""
        together: list[_Ticket] = []
        for ticket in self._parking.take_all():
            if ticket.agent.give_back_parked():
                together.append(ticket)
            else:
                self._unpark(ticket)
        if together:
            assert self._agents is not None
            self._agents.start_soon(self._hand_back_parked, together)

    async def _hand_back_parked(self, tickets: list[_Ticket]) -> None:
        """What each given-back agent and its host would do, as a few operations for all: stop
        watching their inboxes, hand back what they hold for us, release their requests (so
        another worker resumes each at once, not a lease later)."""
        inboxes = [(ticket.hosting.session, ticket.hosting.agent) for ticket in tickets]
        watched = [inbox for s, a in inboxes for inbox in watched_inboxes(s, a)]
        try:
            done = await self._settle(
                None,
                f"give back of {len(tickets)} idle agents",
                partial(self.bus.inboxes.forget_all, watched),
                partial(self.bus.inboxes.hand_back_all, inboxes),
                partial(self.bus.claims.release, [ticket.hosting.receipt for ticket in tickets]),
            )
        finally:
            for ticket in tickets:
                self._unhost(ticket.hosting, ticket.token)
        if done:
            named = _named([f"{s}/{a}" for s, a in inboxes])
            log.info("%s given back unfinished (idle: %d at once)", named, len(inboxes))

    def _unpark(self, ticket: _Ticket) -> None:
        """A parked agent was woken (or its time came, or it must stop): resume it in a task of
        the agents' group."""
        assert self._agents is not None
        self._agents.start_soon(self._resume, ticket)

    async def _admit(self, claim: SpawnClaim) -> SubAgent | None:
        """The agent to host for ``claim``, or None once the request is settled here instead:
        refused with an error result (a profile this worker lacks, an agent it cannot set up)
        or acked (a duplicate of one it hosts)."""
        request = claim.request
        key = (request.session, request.agent)
        mismatch = self._key_mismatch(request)
        if mismatch is not None:
            await self._refuse_unreadable(claim, mismatch)
            return None
        profile = self.profiles.get(request.profile)
        if profile is None:
            await self._refuse(claim, f"unknown profile {request.profile!r}")
            return None
        if key in self._by_agent:  # already running here: it reads the same inbox
            log.info("duplicate spawn of %s/%s; already hosted", *key)
            await self._settle(key, "ack duplicate", partial(self.bus.claims.ack, [claim.receipt]))
            return None
        try:
            # A profile's MCP tools join its own on its first agent (its servers start then).
            tools = self._tools[profile.name]
            self._tools[profile.name] = await self._mcp.registry(profile, tools)
            return self._agent(claim, profile, self._a2a.turns(profile))
        except Exception as exc:
            # Its model or its tools cannot be set up here (a profile's endpoint settings, a
            # bug): the same on every claim, so the lead gets an error result at once instead
            # of waiting to its timeout while the request comes back every lease.
            log.exception("cannot start %s/%s", *key)
            await self._refuse(claim, f"it could not be set up here: {_why(exc)}")
            return None

    def _agent(self, claim: SpawnClaim, profile: Profile, remote: TurnMaker | None) -> SubAgent:
        parts = AgentParts(
            tools=self._tools[profile.name],
            media_dir=self.media_dir,
            media=self.media,
            images=self.images,
            telemetry=self.telemetry,
            spend=self.spend,
            on_round=self.on_round,
            remote=remote,  # a remote A2A agent: its rounds are relayed there
        )
        seat = Seat.of(claim.request, owner=f"{self.name}/{claim.receipt}")
        return SubAgent(self.bus, profile, self.models(profile), seat, parts)

    async def _run_agent(self, ticket: _Ticket, step: Awaitable[ExitKind | Parked | None]) -> bool:
        """Await the agent's run (or resume) and settle how it ended; whether it parked."""
        hosting, agent = ticket.hosting, ticket.agent
        whose = (hosting.session, hosting.agent)
        try:
            reason = await step
        except Exception:
            log.exception("hosting %s/%s failed", *whose)
            await self._give_back([hosting.receipt])
            return False
        if reason is PARKED:
            if self.stopping or agent.phase.stopping_unfinished:
                self._unpark(ticket)  # resumed at once: it stops as a waiting agent would
            else:
                self._parking.park(hosting.receipt, agent, ticket)
            self._notify()
            return True
        if reason is not None:
            self.finished += 1
            log.info("%s/%s exited: %s", *whose, reason)
            # If this times out, the next owner finds the agent exited and only acks it.
            await self._settle(whose, "ack spawn", partial(self.bus.claims.ack, [hosting.receipt]))
        elif agent.lost:
            log.info("%s/%s was taken over by another worker", *whose)
        else:
            log.info("%s/%s given back unfinished", *whose)
            # Its un-acked messages go back too, so the next owner need not wait a lease.
            release = partial(self.bus.inboxes.hand_back, *whose)
            await self._settle(whose, "release inbox", release)
            await self._give_back([hosting.receipt])
        return False

    def _claimed(self, hosting: Hosting) -> AgentClaimed:
        return AgentClaimed(
            session=hosting.session, agent=hosting.agent, profile=hosting.profile, worker=self.name
        )

    async def _give_back(self, receipts: list[str]) -> None:
        release = partial(self.bus.claims.release, receipts)
        await self._settle(None, "release spawn", release)

    async def _settle(
        self, whose: tuple[str, str] | None, what: str, *steps: Callable[[], Awaitable[object]]
    ) -> bool:
        """The worker's own bookkeeping on the bus: each step retried through blips, all of them
        shielded (a stopping worker still does it) and together bounded by ``GIVE_BACK_S`` and by
        the stop's deadline (the bus may be down; a request left as it is is claimed again later).
        False once logged that a bound was hit."""
        of = f" of {whose[0]}/{whose[1]}" if whose is not None else ""
        with self._shields.shield(GIVE_BACK_S) as bound:
            try:
                for step in steps:
                    await persist(step, what)
            except BusError as exc:
                # A refusal (NOGROUP from a Redis that came back empty, READONLY, a closed bus)
                # is this agent's problem, never its host's: its lease lapses and another worker
                # claims it again, as after a timeout.
                log.warning("%s%s failed: %s; it will be claimed again", what, of, exc)
                return False
        if not bound.cancelled_caught:
            return True
        within = f"within {GIVE_BACK_S:.0f} s"
        if self._shields.is_cut:
            within = "before the stop's deadline"
        log.warning("%s%s not done %s; it will be claimed again", what, of, within)
        return False

    async def _refuse(self, claim: SpawnClaim, problem: str) -> None:
        """A request this worker cannot serve still gets one final result (an error), then is
        acked; if no result can be made of it, it is dead-lettered and acked instead."""
        request = claim.request
        known = ", ".join(sorted(self.profiles)) or "none"
        content = f"Cannot start {request.agent}: {problem} (this worker knows: {known})."
        log.error("%s", content)
        s, a = request.session, request.agent
        try:
            envelope = refusal_result(
                request_id=request.id, session=s, agent=a, parent=request.parent, content=content
            )
        except ValueError as exc:  # a pydantic ValidationError: nothing to send the lead
            await self._set_aside(claim, f"{content} No result could be sent: {_why(exc)}")
            return
        # If this times out, the same refusal (same id) goes out again on the next claim.
        await self._settle(
            (request.session, request.agent),
            "refusal",
            partial(self.bus.inboxes.send, envelope),
            partial(self.bus.log.emit, AgentResult(session=s, agent=a, content=content)),
            partial(self.bus.log.emit, AgentExited(session=s, agent=a, reason="error")),
            partial(self.bus.claims.ack, [claim.receipt]),
        )

    def _key_mismatch(self, request: SpawnRequest) -> str | None:
        """Why this worker cannot serve a request whose session signs with another key (or
        signs where it does not, or the other way round): it could read none of the agent's
        messages, and the lead none of its reports. None when the keys agree, or the request
        does not say (a producer that predates the key id)."""
        theirs = request.key_id
        if theirs is None:
            return None
        we = f"this worker ({self.name})"
        return key_mismatch(theirs, self.bus.key_id, they=f"session {request.session}", we=we)

    async def _refuse_unreadable(self, claim: SpawnClaim, problem: str) -> None:
        """Refuse a request whose lead cannot read this worker's envelopes (a signing-key
        mismatch): named here at once, logged in the session's events (which are not signed),
        and recorded in the agent's hash for the session, which delivers the refusal result to
        its lead with its own key (:mod:`baton.bus.refusals`); then acked."""
        request = claim.request
        s, a = request.session, request.agent
        content = f"Cannot start {a}: {problem}."
        log.error("worker %s: %s", self.name, content)
        refusal = SpawnRefusal(spawn=request.id, worker=self.name, content=content)
        await self._settle(
            (request.session, request.agent),
            "refusal",
            partial(self.bus.records.set_agent, s, a, refusal.to_field()),
            partial(self.bus.log.emit, AgentResult(session=s, agent=a, content=content)),
            partial(self.bus.log.emit, AgentExited(session=s, agent=a, reason="error")),
            partial(self.bus.claims.ack, [claim.receipt]),
        )

    async def _set_aside(self, claim: SpawnClaim, reason: str) -> None:
        """Set a request aside for good: it is never run, and the dead letters say why. Never
        raises: it is the last thing a failed claim does."""
        request = claim.request
        raw = request.model_dump_json()
        _, _, stream = claim.receipt.partition("@")
        dead = partial(self.bus.quarantine, InvalidEnvelope(reason, raw),
                       source=stream or "spawn", session=request.session, raw=raw)  # fmt: skip
        try:
            whose = (request.session, request.agent)
            ack = partial(self.bus.claims.ack, [claim.receipt])
            await self._settle(whose, "dead letter", dead, ack)
        except Exception:
            log.exception("could not set %s/%s aside", request.session, request.agent)


def _named(agents: list[str]) -> str:
    """Agents named in a log line: the first ten, then how many more."""
    return ", ".join(agents[:10]) + (f" and {len(agents) - 10} more" if agents[10:] else "")


def _why(exc: BaseException) -> str:
    """An exception in one line, short enough for a result's content."""
    text = " ".join(f"{type(exc).__name__}: {exc}".split())
    return text if len(text) <= 500 else f"{text[:497]}..."
