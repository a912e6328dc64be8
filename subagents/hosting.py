"""The agents a worker hosts, each from its admission to its end.

Each hosted agent is known by its receipt (what the heartbeat renews, what a stop tells to leave)
and by its session and name (a second claim of one hosted here is a duplicate). It runs in a task
of the worker's until it parks or ends; an agent that ends is settled on the bus by how it ended
(acked when done for good, given back when stopped unfinished, left alone when another worker took
it over), and only then does it leave, freeing its place under the worker's concurrency. A stop
gives the parked (idle) ones back together, without resuming them.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterator, Mapping, ValuesView
from dataclasses import dataclass

import anyio

from baton.bus.base import SpawnClaim
from baton.bus.events import AgentClaimed
from baton.subagents.intake import PARKED, Parked
from baton.subagents.loop import SubAgent
from baton.subagents.parking import Parking
from baton.subagents.settling import ClaimSettler
from baton.subagents.state import ExitKind

log = logging.getLogger("baton.subagents.worker")
"""The worker's log: this is the worker's doing, and operators filter on that name."""


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

    def claimed_by(self, worker: str) -> AgentClaimed:
        """The event that says ``worker`` hosts the agent now."""
        return AgentClaimed(
            session=self.session, agent=self.agent, profile=self.profile, worker=worker
        )


@dataclass(frozen=True, slots=True)
class Ticket:
    """What resumes a parked agent: its hosting, itself, and its slot in the limiter."""

    hosting: Hosting
    agent: SubAgent
    token: object


class HostedAgents(Mapping[str, SubAgent]):
    """The agents hosted now, by receipt. ``settler`` settles how each ended, ``parking`` holds
    the idle ones, ``release`` frees an agent's place (by its token) once it has left, and
    ``unpark`` resumes a parked one in a task of the worker's; ``stopping()`` says whether the
    worker stops (an agent that parks then is resumed at once, to stop)."""

    __slots__ = (
        "_by_agent",
        "_by_receipt",
        "_change",
        "_parking",
        "_release",
        "_settler",
        "_stopping",
        "_unpark",
        "finished",
    )

    def __init__(
        self,
        settler: ClaimSettler,
        parking: Parking[Ticket],
        *,
        release: Callable[[object], None],
        unpark: Callable[[Ticket], None],
        stopping: Callable[[], bool],
    ) -> None:
        self._settler = settler
        self._parking = parking
        self._release = release
        self._unpark = unpark
        self._stopping = stopping
        self._by_receipt: dict[str, SubAgent] = {}
        self._by_agent: dict[tuple[str, str], str] = {}
        self._change: anyio.Event | None = None
        self.finished = 0
        """How many agents exited here with their final report."""

    # -- what is hosted -------------------------------------------------------------------------

    def __getitem__(self, receipt: str) -> SubAgent:
        return self._by_receipt[receipt]

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_receipt)

    def __len__(self) -> int:
        return len(self._by_receipt)

    def values(self) -> ValuesView[SubAgent]:
        return self._by_receipt.values()

    @property
    def by_receipt(self) -> Mapping[str, SubAgent]:
        """The agents by receipt as a plain dict: what the heartbeat looks up, slice by slice,
        runs no Python code per lookup (this mapping's own ``get`` does)."""
        return self._by_receipt

    @property
    def by_agent(self) -> Mapping[tuple[str, str], str]:
        """Receipts by session and agent: a claim of one of these is a duplicate."""
        return self._by_agent

    def counts(self) -> tuple[int, int]:
        """(running a round, idle) agents now; read from the metrics exporter's thread, so it
        copies the agents in one step (no Python code runs while a tuple takes a dict's values)."""
        agents = tuple(self._by_receipt.values())
        running = sum(1 for agent in agents if agent.busy)
        return running, len(agents) - running

    def add(self, hosting: Hosting, agent: SubAgent) -> None:
        self._by_receipt[hosting.receipt] = agent
        self._by_agent[(hosting.session, hosting.agent)] = hosting.receipt

    def remove(self, hosting: Hosting, token: object) -> None:
        """The agent has left (or was never admitted): its place is free."""
        key = (hosting.session, hosting.agent)
        self._by_receipt.pop(hosting.receipt, None)
        if self._by_agent.get(key) == hosting.receipt:
            del self._by_agent[key]
        self._release(token)
        self.notify()

    def changed(self) -> anyio.Event:
        """Set at the next change: an agent left or parked, or the stop cut what is left."""
        if self._change is None:
            self._change = anyio.Event()
        return self._change

    def notify(self) -> None:
        change, self._change = self._change, None
        if change is not None:
            change.set()

    # -- their runs -----------------------------------------------------------------------------

    async def tend(self, ticket: Ticket, step: Awaitable[ExitKind | Parked | None]) -> None:
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
                self.remove(ticket.hosting, ticket.token)

    async def _run_agent(self, ticket: Ticket, step: Awaitable[ExitKind | Parked | None]) -> bool:
        """Await the agent's run (or resume) and settle how it ended; whether it parked."""
        hosting, agent = ticket.hosting, ticket.agent
        whose = (hosting.session, hosting.agent)
        try:
            reason = await step
        except Exception:
            log.exception("hosting %s/%s failed", *whose)
            await self._settler.give_back([hosting.receipt])
            return False
        if reason is PARKED:
            if self._stopping() or agent.phase.stopping_unfinished:
                self._unpark(ticket)  # resumed at once: it stops as a waiting agent would
            else:
                self._parking.park(hosting.receipt, agent, ticket)
            self.notify()
            return True
        if reason is not None:
            self.finished += 1
            log.info("%s/%s exited: %s", *whose, reason)
            # If this times out, the next owner finds the agent exited and only acks it.
            await self._settler.ack(whose, "ack spawn", hosting.receipt)
        elif agent.lost:
            log.info("%s/%s was taken over by another worker", *whose)
        else:
            log.info("%s/%s given back unfinished", *whose)
            await self._settler.give_back_unfinished(whose, hosting.receipt)
        return False

    # -- a stop ---------------------------------------------------------------------------------

    def give_back_parked(self) -> list[Ticket]:
        """A stop gives every parked (idle) agent back without resuming it: nothing is in
        flight, so all that is left is on the bus, done for all of them together (the tickets
        returned, for :meth:`hand_back`). One the agent says must be resumed to stop is
        resumed."""
        together: list[Ticket] = []
        for ticket in self._parking.take_all():
            if ticket.agent.give_back_parked():
                together.append(ticket)
            else:
                self._unpark(ticket)
        return together

    async def hand_back(self, tickets: list[Ticket]) -> None:
        """Give back idle agents together (:meth:`ClaimSettler.give_back_idle`), then let them
        go here whatever the bus did."""
        inboxes = [(ticket.hosting.session, ticket.hosting.agent) for ticket in tickets]
        receipts = [ticket.hosting.receipt for ticket in tickets]
        try:
            done = await self._settler.give_back_idle(inboxes, receipts)
        finally:
            for ticket in tickets:
                self.remove(ticket.hosting, ticket.token)
        if done:
            named = named_agents([f"{s}/{a}" for s, a in inboxes])
            log.info("%s given back unfinished (idle: %d at once)", named, len(inboxes))

    def names(self) -> list[str]:
        """Every agent hosted, as ``session/name``."""
        return [f"{agent.session}/{agent.name}" for agent in self._by_receipt.values()]


def named_agents(agents: list[str]) -> str:
    """Agents named in a log line: the first ten, then how many more."""
    return ", ".join(agents[:10]) + (f" and {len(agents) - 10} more" if agents[10:] else "")
