"""The lead's sends: ``send_message`` routed through the roster, capped per turn, on the bus.

:class:`Dispatcher` is the half of the lead that writes: it routes each message (a task to a
profile starts a new agent, anything to an agent reaches it or its one successor — see
:mod:`baton.lead.roster`), refuses sends past the turn's caps (:mod:`baton.lead.delegation`),
refuses a task already sent for the same request (still running, or done: its result is in the
context), starts agents, hands a departed agent's unseen messages over, and keeps the
``send_message`` tool's ``to`` enum equal to the profiles plus the running agents.

Before each send it asks the lead to *refresh* the roster (read the inbox without waiting), so a
send never goes to an agent whose final result already sits in the inbox unread. All sends (and
that refresh) hold one lock, so "sent after" is well defined for the hand-over rule.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import Literal, TypeVar

import anyio

from baton.bus.base import Bus
from baton.bus.errors import BusError, BusUnreachable, InvalidEnvelope
from baton.bus.events import AgentExited, AgentSpawned, GuardFired
from baton.bus.messages import (
    APPROVE_KEY,
    DEFAULT_POOL,
    ApprovePolicy,
    Envelope,
    SpawnRequest,
    make_envelope,
)
from baton.bus.retry import persist
from baton.engine import EventSink, Telemetry, Tool, ToolRegistry, ToolResult
from baton.engine.telemetry import current_trace
from baton.engine.turn import normalise_text
from baton.lead.checkpoint import TurnSend
from baton.lead.delegation import DelegationLimits, TurnSends
from baton.lead.prompt import LEAD_NAME
from baton.lead.roster import Roster, Route, Sent
from baton.lead.tools import (
    SEND_MESSAGE,
    SendKind,
    not_a_subagent_hint,
    send_message_tool,
    unknown_agent_hint,
)

log = logging.getLogger(__name__)

T = TypeVar("T")

WAIT_HINT = (
    "Its result will arrive in your inbox: do not wait or poll, answer the user now; "
    "you will be called again."
)


class Dispatcher:
    """Routes, caps and performs one lead's sends; see the module docstring."""

    def __init__(
        self,
        bus: Bus,
        session: str,
        roster: Roster,
        *,
        limits: DelegationLimits,
        events: EventSink | None,
        give_up: Callable[[], bool],
        refresh: Callable[[], Awaitable[None]],
        pool: str = DEFAULT_POOL,
        approve: ApprovePolicy = "ask",
        on_send: Callable[[], Awaitable[None]] | None = None,
        telemetry: Telemetry | None = None,
    ) -> None:
        self.bus = bus
        self.telemetry = telemetry or Telemetry()
        """Each send to a sub-agent is an ``invoke_agent`` CLIENT span whose context the envelope
        and the spawn request carry, so the agent's turns join the session's trace."""
        self.session = session
        self.pool = pool
        """Where its spawn requests go: ``local`` (the session's own worker) or a worker pool."""
        self.approve: ApprovePolicy = approve
        """The session's approval policy, carried by every spawn request (``meta.approve``) to
        the worker that hosts the agent, wherever it runs (docs/protocol.md, *Approvals*)."""
        self.roster = roster
        self.sends = TurnSends(limits)
        self.lock = anyio.Lock()
        self.tools: ToolRegistry | None = None
        """The lead's tools, once built: ``send_message`` is swapped in it as the roster changes."""
        self._emit = events
        self._give_up = give_up
        self._refresh = refresh
        self._offered: tuple[str, ...] = ()
        self._tasks: dict[str, str] = {}
        """The tasks sent for the current request (normalised content -> the agent that got it)."""
        self.turn_sends: list[TurnSend] = []
        """What the running turn sent (the lead clears it at each turn), for its checkpoint."""
        self._on_send = on_send
        self._spawned: dict[str, str] = {}
        """Agent -> its spawn request's receipt, to withdraw it unclaimed at the session's end."""

    # -- the tool -------------------------------------------------------------------------------

    def targets(self) -> list[str]:
        """What ``to`` offers: every profile, then every running agent not named like one."""
        profiles = self.roster.profiles
        return [*profiles, *(n for n in self.roster.running if n not in profiles)]

    def send_tool(self) -> Tool:
        self._offered = tuple(self.targets())
        return send_message_tool(self.deliver, self._offered)

    def roster_changed(self) -> None:
        """Offer the running agents as they start and stop (schemas are read per request)."""
        if self.tools is not None and tuple(self.targets()) != self._offered:
            self.tools.replace(self.send_tool())

    # -- send_message ---------------------------------------------------------------------------

    async def deliver(self, to: str, content: str, kind: SendKind) -> str | ToolResult:
        """``send_message``: route, cap, send; start the target first when the route says so."""
        if to in (LEAD_NAME, "user"):
            return not_a_subagent_hint(to)
        async with self.lock:
            await self._refresh()
            if kind == "shutdown":
                return await self._shut_down(to)
            route = self.roster.route(to, kind)
            if route is None:
                return unknown_agent_hint(to, self.roster.profiles)
            duplicate = self._duplicate(content) if kind == "task" else None
            if duplicate is not None:
                await self._guard("repeated")
                return ToolResult(duplicate, blocked=True)
            refusal = self.sends.refusal(route.name, route.profile, route.start)
            if refusal is not None:
                await self._guard("send-cap")
                return ToolResult(refusal, blocked=True)
            with self.telemetry.delegate_span(route.name, self.session, kind) as span:
                try:
                    envelope = await self.send(route.name, kind, content)
                except InvalidEnvelope as exc:
                    span.fail(type(exc).__qualname__)
                    return (
                        f"Did not send to {to!r}: {exc.reason}. Fix the name or content and retry."
                    )
                if route.start:
                    await self.start(route)
            self.roster.sent(route.name, Sent(envelope.id, kind, content))
            self.sends.count(route.name, route.profile, route.start)
            if kind == "task":
                self._tasks[normalise_text(content)] = route.name
            reply = f"{_what(to, route)}. {WAIT_HINT}"
            await self._sent(TurnSend(to=to, content=content, type=kind, reply=reply), route)
        return reply

    @property
    def tasks(self) -> dict[str, str]:
        """The tasks sent for the current request: normalised content -> the agent."""
        return dict(self._tasks)

    def restore(self, tasks: dict[str, str]) -> None:
        """The tasks of the current request, from the lead's checkpoint."""
        self._tasks = dict(tasks)

    async def _sent(self, send: TurnSend | None, route: Route | None = None) -> None:
        """A send went out: note it for the turn, let the lead checkpoint, and only then log the
        start of a new agent (a viewer that saw it start can count on a resumed lead knowing it)."""
        if send is not None:
            self.turn_sends.append(send)
        if self._on_send is not None:
            await self._on_send()
        if route is not None and route.start:
            await self._announce(route)

    def new_request(self) -> None:
        """A new request from a person reached the lead: a task sent before may be wanted again."""
        self._tasks.clear()

    def _duplicate(self, content: str) -> str | None:
        """Why the same task must not go out again for the same request (the text for the model),
        or None. A small model re-delegates what it already has, turn after turn; a task whose
        agent ended without doing it may be sent again."""
        earlier = self._tasks.get(normalise_text(content))
        if earlier is None:
            return None
        holder = self.roster.agents[self.roster.current(earlier)]
        if holder.state != "done":
            return (
                f"Did not send: {holder.name} is already working on this task. Do not send it "
                "again: its result will arrive in your inbox; answer the user now."
            )
        if holder.exit_reason == "finished":
            return (
                f"Did not send: {holder.name} already did this task and its result is in your "
                "context. Do not delegate it again: answer the user with that result."
            )
        return None

    async def _shut_down(self, to: str) -> str:
        if to not in self.roster.agents and self.roster.resolve(to) is None:
            return unknown_agent_hint(to, self.roster.profiles)
        name = self.roster.current(to) if to in self.roster.agents else to
        if not self.roster.is_running(name):
            return f"{to} is not running; nothing to shut down."
        why = "the lead asked you to stop"
        await self.send(name, "shutdown", why)
        self.roster.stopping(name)
        self.roster_changed()
        reply = f"Asked {name} to shut down; its final result will still arrive."
        await self._sent(TurnSend(to=to, content=why, type="shutdown", reply=reply))
        return reply

    async def shut_down_running(self, why: str) -> None:
        """``shutdown`` to every running sub-agent (the session is ending); one whose spawn
        request no worker has claimed yet is withdrawn instead, so it never starts. Once one
        send met a bus that stays away, the rest are not tried: each would wait out the same
        outage."""
        reachable = await self._withdraw_unclaimed()
        for name in self.roster.running:
            if reachable:
                try:
                    await self.send(name, "shutdown", why)
                except BusUnreachable as exc:  # cancelled during an outage: idle timeouts end them
                    log.warning("session %s: could not tell %s (nor the agents after it) to "
                                "shut down: %s", self.session, name, exc)  # fmt: skip
                    reachable = False
            self.roster.stopping(name)
        self.roster_changed()

    async def _withdraw_unclaimed(self) -> bool:
        """Take back the spawn requests of running agents that no worker has claimed yet: left
        queued, a worker would start them after the session ended, to log events after its end
        and send results nobody reads (and a session's own queue would keep them for ever).
        Each withdrawn agent's inbox goes with it, and its exit is logged (``shutdown``) for
        the views. False when the bus stayed away (the session is being cancelled)."""
        receipts = {self._spawned[n]: n for n in self.roster.running if n in self._spawned}
        if not receipts:
            return True
        try:
            withdrawn = await self.persist(
                partial(self.bus.withdraw_spawn, list(receipts)), "withdraw unclaimed spawns"
            )
            for receipt in withdrawn:
                name = receipts[receipt]
                self.roster.withdrawn(name)
                del self._spawned[name]
                log.info("session %s: withdrew %s before any worker claimed it", self.session, name)
                exited = AgentExited(session=self.session, agent=name, reason="shutdown")
                await self.persist(partial(self.bus.emit, exited), f"log {name}'s exit")
        except BusUnreachable as exc:  # cancelled during an outage: left for a worker to end
            log.warning("session %s: could not withdraw the unclaimed spawn requests: %s",
                        self.session, exc)  # fmt: skip
            return False
        except BusError as exc:  # refused: they get their shutdown like the others
            log.warning("session %s: withdrawing the unclaimed spawn requests failed: %s",
                        self.session, exc)  # fmt: skip
        return True

    async def _guard(self, outcome: Literal["send-cap", "repeated"]) -> None:
        if self._emit is not None:
            await self._emit(
                GuardFired(
                    session=self.session, agent=LEAD_NAME, outcome=outcome, tool=SEND_MESSAGE
                )
            )

    # -- the bus --------------------------------------------------------------------------------

    async def send(self, to: str, kind: SendKind, content: str) -> Envelope:
        envelope = make_envelope(
            session=self.session,
            sender=LEAD_NAME,
            recipient=to,
            type=kind,
            content=content,
            trace=current_trace(),
        )
        await self.persist(partial(self.bus.send, envelope), f"send {to}")
        return envelope

    async def start(self, route: Route) -> None:
        name, profile = route.name, route.profile
        record = self.roster.started(name, profile, succeeds=route.succeeds)
        self.roster_changed()
        request = SpawnRequest(
            session=self.session,
            agent=name,
            profile=profile,
            pool=self.pool,
            meta={APPROVE_KEY: self.approve},
            trace=current_trace(),
        )
        record.spawn_id = request.id  # the lead knows a worker's refusal of it by its id
        receipt = await self.persist(partial(self.bus.submit_spawn, request), f"spawn {name}")
        self._spawned[name] = receipt
        log.info("session %s: spawning %s from profile %s", self.session, name, profile)

    async def _announce(self, route: Route) -> None:
        """Log a started agent's ``agent.spawned`` (once the lead's checkpoint has it)."""
        if self._emit is not None:
            event = AgentSpawned(session=self.session, agent=route.name, profile=route.profile)
            await self._emit(event)

    async def hand_over(self, name: str, unseen: Sequence[Sent]) -> None:
        """``name`` left before reading ``unseen``: its successor gets them (started once).

        The caller holds :attr:`lock` (and has logged the hand-over).
        """
        route = self.roster.route(name, "message")
        if route is None:  # cannot happen: name is a known agent
            return
        try:
            for message in unseen:
                envelope = await self.send(route.name, message.type, message.content)
                started = route
                if route.start:
                    await self.start(route)
                    route = Route(route.name, route.profile, start=False)
                self.roster.sent(route.name, Sent(envelope.id, message.type, message.content))
                await self._sent(None, started)
        except BusUnreachable as exc:  # only once cancelled: the session is ending anyway
            log.warning("session %s: hand-over to %s abandoned: %s", self.session, route.name, exc)

    async def persist(self, operation: Callable[[], Awaitable[T]], what: str) -> T:
        """A bus write of the lead, through the one retry policy: a Redis blip stalls the lead
        (as it stalls its sub-agents) instead of failing it, until it is cancelled."""
        return await persist(operation, f"{self.session}: {what}", give_up=self._give_up)


def _what(to: str, route: Route) -> str:
    """What the model is told happened to its send."""
    if route.succeeds is not None:
        return (
            f"{to} had already finished, so {route.name} (profile {route.profile}) was started "
            "to take its work over"
        )
    if route.name != to and not route.start:
        return f"{to} had finished; sent to {route.name}, which took its work over"
    if route.start:
        return f"Started {route.name}, a new {route.profile} agent, on this task"
    return f"Sent to {route.name} (profile {route.profile})"
