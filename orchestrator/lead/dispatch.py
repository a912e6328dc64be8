"""The lead's sends: ``send_message`` routed through the roster, capped per turn, on the bus.

:class:`Dispatcher` is the half of the lead that writes: it routes each message (a task to a
profile starts a new agent, anything to an agent reaches it or its one successor — see
:mod:`baton.lead.roster`), refuses sends past the turn's caps (:mod:`baton.lead.delegation`),
refuses a task already sent for the same request (still running, or done: its result is in the
context) or a sub-agent's result passed on as a task (a message that starts an agent is its task,
whatever its ``type``), refuses a ``shutdown`` of an agent the same turn gave work (nothing came
back to decide it on), starts agents, and hands a departed agent's unseen messages over.

Its caller, the lead's delegation unit (lead/team.py), reads the inbox without waiting before each
send, so a send never goes to an agent whose final result already sits in the inbox unread, and
holds one lock over every send and those reads, so "sent after" is well defined for the hand-over
rule. What a send changes is written into the lead's state (lead/state.py): the roster, the
tasks of the request, the sends the caps refused, the running turn's sends.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Literal, TypeVar

from baton.bus.base import Bus
from baton.bus.errors import BusError, BusUnreachable, InvalidEnvelope
from baton.bus.events import AgentExited, AgentSpawned, GuardFired
from baton.bus.messages import (
    DEFAULT_POOL,
    ApproveMode,
    Envelope,
    SpawnRequest,
    make_envelope,
)
from baton.bus.retry import persist
from baton.engine import EventSink, Telemetry, ToolResult
from baton.engine.telemetry import current_trace
from baton.engine.turn import normalise_text
from baton.lead.checkpoint import TurnSend
from baton.lead.delegation import DelegationLimits, TurnSends
from baton.lead.prompt import LEAD_NAME
from baton.lead.quotes import quoted, runtime_words
from baton.lead.roster import Route, Sent
from baton.lead.state import LeadState
from baton.lead.tools import SEND_MESSAGE, SendKind, unknown_agent_hint

log = logging.getLogger(__name__)

T = TypeVar("T")

WAIT_HINT = (
    "Its result will arrive in your inbox: do not wait or poll, answer the user now; "
    "you will be called again."
)


@dataclass(frozen=True, slots=True)
class Delegating:
    """How one lead delegates: its caps, where its spawn requests go, and the approval policy
    every spawn request carries."""

    limits: DelegationLimits = field(default_factory=DelegationLimits)
    pool: str = DEFAULT_POOL
    """Where its spawn requests go: ``local`` (the session's own worker) or a worker pool."""
    approve: ApproveMode = "ask"
    """The session's approval policy, carried by every spawn request (its ``approve`` field) to the
    worker that hosts the agent, wherever it runs (docs/protocol.md, *Approvals*)."""


@dataclass(frozen=True, slots=True)
class Delivered:
    """What one send did: the text the model gets back, and the agent it started (to announce
    once the checkpoint has it)."""

    reply: str | ToolResult
    started: tuple[Route, ...] = ()
    sent: bool = False
    """Something went out (the state changed: checkpoint it before announcing anything)."""


class Dispatcher:
    """Routes, caps and performs one lead's sends; see the module docstring. It holds no lock:
    its caller (lead/team.py) serialises every send and the reads of the inbox between them."""

    def __init__(
        self,
        bus: Bus,
        state: LeadState,
        delegating: Delegating,
        *,
        events: EventSink | None,
        telemetry: Telemetry,
        give_up: Callable[[], bool],
    ) -> None:
        self.bus = bus
        self.state = state
        self.telemetry = telemetry
        """Each send to a sub-agent is an ``invoke_agent`` CLIENT span whose context the envelope
        and the spawn request carry, so the agent's turns join the session's trace."""
        self.session = state.session
        self.delegating = delegating
        self.roster = state.roster
        self.sends = TurnSends(delegating.limits)
        self._emit = events
        self._give_up = give_up

    # -- send_message ---------------------------------------------------------------------------

    async def deliver(
        self, to: str, content: str, kind: SendKind, *, once: bool = True
    ) -> Delivered:
        """``send_message``: route, cap, send; start the target first when the route says so.
        ``once``: a task already sent for this request is refused (the model repeating itself);
        the runtime's own routing of one request to several profiles it names is not."""
        if kind == "shutdown":
            return await self._shut_down(to)
        route = self.roster.route(to, kind)
        if route is None:
            return Delivered(unknown_agent_hint(to, self.roster.profiles))
        starts_work = kind == "task" or route.start  # a new agent's first message is its task
        relay = kind == "message"
        quote = self._quotes_the_runtime(content) if starts_work else None
        if quote is not None:
            await self._guard("quoted")
            return Delivered(ToolResult(quote, blocked=True))
        duplicate = self._duplicate(content, relay=relay) if starts_work and once else None
        if duplicate is not None:
            await self._guard("repeated")
            return Delivered(ToolResult(duplicate, blocked=True))
        refusal = self.sends.refusal(route.name, route.profile, route.start)
        if refusal is not None:
            self.state.refused.append(refusal)
            await self._guard("send-cap")
            return Delivered(ToolResult(refusal, blocked=True))
        with self.telemetry.delegate_span(route.name, self.session, kind) as span:
            try:
                envelope = await self.send(route.name, kind, content)
            except InvalidEnvelope as exc:
                span.fail(type(exc).__qualname__)
                return Delivered(
                    f"Did not send to {to!r}: {exc.reason}. Fix the name or content and retry."
                )
            if route.start:
                await self.start(route)
        self.roster.sent(route.name, Sent(envelope.id, kind, content))
        self.sends.count(route.name, route.profile, route.start)
        if starts_work:
            self.state.tasks[normalise_text(content)] = route.name
        reply = f"{_what(to, route)}. {WAIT_HINT}"
        self.state.turn_sends.append(TurnSend(to=to, content=content, type=kind, reply=reply))
        return Delivered(reply, (route,) if route.start else (), sent=True)

    def quotes_the_runtime(self, text: str) -> str | None:
        """The passage of ``text`` that repeats what the runtime told the lead, or None
        (lead/quotes.py)."""
        delegation = {SEND_MESSAGE, *self.roster.profiles}
        return quoted(text, runtime_words(self.state.history, delegation))

    def _quotes_the_runtime(self, content: str) -> str | None:
        """Why a task that repeats what the runtime told the lead is no task (the text for the
        model), or None: a 1.5B lead sent "Did not send: helper is already working on this
        task..." to a new helper. Nothing is sent and no agent starts."""
        passage = self.quotes_the_runtime(content)
        if passage is None:
            return None
        return (
            f'Did not send: the task repeats what baton told you ("{passage[:80]}..."), which is '
            "no work for a sub-agent. Send the user's request, or answer the user now."
        )

    def _duplicate(self, content: str, *, relay: bool) -> str | None:
        """Why the same task must not go out again for the same request (the text for the model),
        or None. A small model re-delegates what it already has, turn after turn; a task whose
        agent ended without doing it may be sent again. ``relay`` (a ``message`` that starts an
        agent): a result of this request's work passed on unchanged is refused too, as it says
        nothing to do (a 1.5B lead relayed a painter's one-line result to helper, writer and
        helper again, one new agent each). A ``task`` may be a result as it stands: text a
        publisher is to save."""
        key = normalise_text(content)
        reporter = self.roster.reporter_of(key, among=self.state.tasks.values()) if relay else None
        if reporter is not None:
            return (
                f"Did not send: that is {reporter}'s result, already in your context, not a "
                "task. Answer the user with it, or send a task that says what to do with it."
            )
        earlier = self.state.tasks.get(key)
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

    async def _shut_down(self, to: str) -> Delivered:
        if to not in self.roster.agents and self.roster.resolve(to) is None:
            return Delivered(unknown_agent_hint(to, self.roster.profiles))
        name = self.roster.current(to) if to in self.roster.agents else to
        if not self.roster.is_running(name):
            return Delivered(f"{to} is not running; nothing to shut down.")
        if self.sends.to_agent[name]:
            # The same turn gave it work: nothing came back since that the model could have
            # acted on, so the shutdown contradicts the send (a 1.5B lead sent "paint a moon, a
            # star, a comet and a planet" and "Finish." to one painter in one reply, and the
            # painter left without painting). The work stands; the model is told why.
            return Delivered(
                ToolResult(
                    f"Did not shut down {name}: you sent it work in this same turn, and it has "
                    "not reported yet. Its result will arrive in your inbox; do not stop it now.",
                    blocked=True,
                )
            )
        why = "the lead asked you to stop"
        await self.send(name, "shutdown", why)
        self.roster.stopping(name)
        reply = f"Asked {name} to shut down; its final result will still arrive."
        self.state.turn_sends.append(TurnSend(to=to, content=why, type="shutdown", reply=reply))
        return Delivered(reply, sent=True)

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

    async def _withdraw_unclaimed(self) -> bool:
        """Take back the spawn requests of running agents that no worker has claimed yet: left
        queued, a worker would start them after the session ended, to log events after its end
        and send results nobody reads (and a session's own queue would keep them for ever).
        Each withdrawn agent's inbox goes with it, and its exit is logged (``shutdown``) for
        the views. False when the bus stayed away (the session is being cancelled)."""
        agents = self.roster.agents
        receipts = {
            agents[name].spawn_receipt: name
            for name in self.roster.running
            if agents[name].spawn_receipt
        }
        if not receipts:
            return True
        try:
            withdrawn = await self.persist(
                partial(self.bus.spawns.withdraw, list(receipts)), "withdraw unclaimed spawns"
            )
            for receipt in withdrawn:
                name = receipts[receipt]
                self.roster.withdrawn(name)
                log.info("session %s: withdrew %s before any worker claimed it", self.session, name)
                exited = AgentExited(session=self.session, agent=name, reason="shutdown")
                await self.persist(partial(self.bus.log.emit, exited), f"log {name}'s exit")
        except BusUnreachable as exc:  # cancelled during an outage: left for a worker to end
            log.warning("session %s: could not withdraw the unclaimed spawn requests: %s",
                        self.session, exc)  # fmt: skip
            return False
        except BusError as exc:  # refused: they get their shutdown like the others
            log.warning("session %s: withdrawing the unclaimed spawn requests failed: %s",
                        self.session, exc)  # fmt: skip
        return True

    async def _guard(self, outcome: Literal["send-cap", "repeated", "quoted"]) -> None:
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
        await self.persist(partial(self.bus.inboxes.send, envelope), f"send {to}")
        return envelope

    async def start(self, route: Route) -> None:
        name, profile = route.name, route.profile
        record = self.roster.started(name, profile, succeeds=route.succeeds)
        request = SpawnRequest(
            session=self.session,
            agent=name,
            profile=profile,
            pool=self.delegating.pool,
            approve=self.delegating.approve,
            trace=current_trace(),
        )
        record.spawn_id = request.id  # the lead knows a worker's refusal of it by its id
        receipt = await self.persist(partial(self.bus.spawns.submit, request), f"spawn {name}")
        record.spawn_receipt = receipt
        log.info("session %s: spawning %s from profile %s", self.session, name, profile)

    async def announce(self, route: Route) -> None:
        """Log a started agent's ``agent.spawned`` (once the lead's checkpoint has it)."""
        if self._emit is not None:
            event = AgentSpawned(session=self.session, agent=route.name, profile=route.profile)
            await self._emit(event)

    async def hand_over(self, name: str, unseen: Sequence[Sent]) -> Route | None:
        """``name`` left before reading ``unseen``: its successor gets them (started once; the
        route that started it is returned, to announce once the checkpoint has it).

        The caller serialises it with the sends (and has logged the hand-over).
        """
        route = self.roster.route(name, "message")
        if route is None:  # cannot happen: name is a known agent
            return None
        started: Route | None = None
        try:
            for message in unseen:
                envelope = await self.send(route.name, message.type, message.content)
                if route.start:
                    await self.start(route)
                    started, route = route, Route(route.name, route.profile, start=False)
                self.roster.sent(route.name, Sent(envelope.id, message.type, message.content))
        except BusUnreachable as exc:  # only once cancelled: the session is ending anyway
            log.warning("session %s: hand-over to %s abandoned: %s", self.session, route.name, exc)
        return started

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
