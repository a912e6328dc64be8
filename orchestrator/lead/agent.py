"""The lead agent: a short loop of typed steps over one state.

The engine's :class:`~baton.engine.AgentLoop` runs the micro-loop of one lead turn (model →
``send_message``, ``answer`` and the lead's own tools → model … until it answers).
:class:`Lead` runs the loop around it, over one :class:`~baton.lead.state.LeadState` whose
``progress.phase`` says which step comes next::

    turn:    run one engine turn under the session deadline (tokens stream out as events);
             without tools once this request's delegation waves are spent or the final answer
             is due. Then, by structure:
               cut by the deadline        -> one short late turn without tools -> timed_out
               model error, budget spent  -> failed: wait (bounded) for the sub-agents, answer
                                             with their results
               answered                   -> the policy decides (lead/policy.py): accept, send
                                             back once with a note, route the request, or ask
                                             again; accepted -> gather
               a send found results unread -> gather (they go into the context first)
    gather:  wait (bounded) while sub-agents are outstanding and nobody asked anything new;
             news -> into the context -> turn; nothing new and nothing outstanding -> the last
             turn's answer (a cut, blocked or silent one is asked for once more, without tools:
             lead/ending.py), judged by the policy (lead/outcome.py) -> completed or incomplete
    failed:  as above

Two collaborators hold the rest: :class:`~baton.lead.turns.LeadTurns` runs the turns (the engine
turn under the deadline with the inbox watched, the session's notes, what arrived taken into the
context) and :class:`~baton.lead.verdict.Verdict` says how the work ends (the facts the policy
judges by, the final answer checked, the late turn, the failed model's answer); this module only
decides which step comes next.

Every step reads and changes the state only, and the state is checkpointed after each step (and
after each send, by the delegation unit: lead/team.py), so a resumed lead picks up at the step
its checkpoint says. Nothing here imports ``subagents``: profiles arrive as plain ``name ->
description``. What the model's words mean is never decided here: the answer is a typed call
(lead/answer.py), and what to do with it is the policy's.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from functools import partial

import anyio

from baton.bus.base import Bus
from baton.bus.errors import BusError
from baton.bus.events import RETRACTED_SENT_BACK
from baton.bus.inbox import InboxReader
from baton.engine import AgentLoop, LoopLimits, StopReason, ToolRegistry, TurnResult
from baton.engine.loop_options import LoopOptions, LoopParts
from baton.lead import delegation as delegating
from baton.lead import prompt
from baton.lead.answer import Answer, answer_tool
from baton.lead.checkpoint import LastTurn, LeadCheckpoint
from baton.lead.delegation import Waves
from baton.lead.dispatch import Delegating
from baton.lead.ending import final_outcome, last_turn
from baton.lead.keeper import LeadTakenOver
from baton.lead.options import LeadOptions, LeadParts
from baton.lead.outcome import LeadOutcome as LeadOutcome
from baton.lead.outcome import LeadStatus as LeadStatus
from baton.lead.policy import Accept, AskAgain, Route, SendBack
from baton.lead.prompt import LEAD_NAME
from baton.lead.roster import Roster
from baton.lead.routing import Router
from baton.lead.state import LeadCheckpoints, LeadState
from baton.lead.team import Team, TeamHooks
from baton.lead.turns import LeadTurns
from baton.lead.verdict import Verdict
from baton.llm.types import ChatModel, Message

log = logging.getLogger(__name__)


class Lead:
    """The lead of one session; build it, then ``await lead.run(task)`` once.

    ``cancel()`` (from any task of the same event loop) ends the current turn and any inbox wait at
    once; ``run`` then shuts the sub-agents down and returns ``cancelled``. ``checkpoint()`` and
    :meth:`restore` carry a lead over to another process. Reports reach it only from its own
    agents' owners (lead/trust.py).
    """

    def __init__(
        self,
        bus: Bus,
        model: ChatModel,
        *,
        session: str,
        profiles: Mapping[str, str],
        options: LeadOptions | None = None,
        parts: LeadParts | None = None,
    ) -> None:
        options = self.options = options or LeadOptions()
        parts = parts or LeadParts()
        self.session = session
        self.policy = parts.policy
        self._cancelled = False
        self._abandoned: LeadTakenOver | None = None
        self.state = LeadState(session, [], Roster(profiles), Waves(options.delegation.max_waves))
        self._checkpoints = LeadCheckpoints(parts.checkpoints, self.state, self.abandon)
        self.team = Team(
            bus,
            self.state,
            Delegating(options.delegation, options.spawn_pool, options.spawn_approve),
            events=parts.events,
            telemetry=parts.telemetry,
            hooks=TeamHooks(lambda: self._cancelled, self.cancel, self._checkpoints.mid_turn),
            media_dir=options.media_dir,
        )
        registry = ToolRegistry([self.team.send_tool(), *parts.tools])
        answer = answer_tool(registry.names) if options.tool_choice != "none" else None
        if answer is not None:
            registry.add(answer)
        if options.profile_tools:
            delegate = partial(self.team.delegate, news_first=True)
            for made in delegating.profile_tools(profiles, delegate, registry.names):
                registry.add(made)
        self.team.attach(registry)
        hooks = TeamHooks(lambda: self._cancelled, self.cancel, self._save)
        self._turns = LeadTurns(
            model, registry, self.state, self.team, options=options, parts=parts, hooks=hooks
        )
        self._verdict = Verdict(
            self.state, self.team, self._turns, profiles, options=options, parts=parts
        )
        routing_loop = partial(
            AgentLoop,
            model,
            session=session,
            agent=LEAD_NAME,
            options=LoopOptions(
                limits=LoopLimits(soft_max_rounds=1, hard_max_rounds=1), tool_choice="required"
            ),
            parts=LoopParts(events=self._turns.shown, telemetry=parts.telemetry, spend=parts.spend),
        )
        self._router = Router(routing_loop, self.team, self.state)
        system = prompt.system_prompt(
            profiles,
            options.instructions,
            answer_tool=answer is not None,
            must_call=options.tool_choice == "required",
        )
        self.state.history.append({"role": "system", "content": system})

    # -- what the lead is -----------------------------------------------------------------------

    @property
    def history(self) -> list[Message]:
        return self.state.history

    @property
    def roster(self) -> Roster:
        return self.state.roster

    @property
    def inbox(self) -> InboxReader:
        """The lead's inbox, read the way every agent reads its own (through bus blips too)."""
        return self.team.inbox

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    def cancel(self) -> None:
        """End the current turn and any wait now; ``run`` then stops the sub-agents."""
        self._cancelled = True
        self._turns.engine.cancel()
        self.inbox.interrupt()

    def abandon(self, taken_over: LeadTakenOver) -> None:
        """Another lead took the session over: stop now, leave the sub-agents alone (they are
        its successor's), and let ``run`` raise ``taken_over``."""
        self._abandoned = taken_over
        self.cancel()

    # -- the loop -------------------------------------------------------------------------------

    async def run(
        self, task: str | None, *, context: str = "", time_left: float | None = None
    ) -> LeadOutcome:
        """Work on ``task`` until answered with nothing outstanding, cancelled, failed or late.

        ``task`` None carries on from the checkpoint put back by :meth:`restore`; ``context``
        (what came before it: an earlier exchange) is a note ahead of it, so the task stays the
        request as written; ``time_left`` (default ``timeout_s``) is how long the session may
        still run.
        """
        if task is not None:
            if context.strip():
                self.state.history.append(prompt.note_block("context", context))
            self.state.history.append({"role": "user", "content": task})
            self.state.new_request(task)
        timeout = self.options.timeout_s if time_left is None else time_left
        deadline = anyio.current_time() + timeout
        try:
            if task is not None:
                await self._save()
            outcome = await self._loop(deadline)
            if self._abandoned is not None:
                raise self._abandoned
            if outcome.status in ("completed", "incomplete", "timed_out"):
                outcome = await self._verdict.checked(outcome)
        except anyio.get_cancelled_exc_class():
            if self._abandoned is not None:
                raise
            self.cancel()  # so the shielded shutdown below gives up on a bus that stays away
            with anyio.CancelScope(shield=True):
                try:
                    await self.stop_agents()
                except BusError as exc:  # recorded; the cancellation is what propagates
                    log.warning("session %s: could not stop the sub-agents: %s", self.session, exc)
            raise
        if outcome.status != "completed":
            await self.stop_agents()
        return LeadOutcome(
            outcome.status,
            outcome.answer,
            self.roster.media_urls,
            outcome.error,
            outcome.invented_urls,
            outcome.composed,
        )

    async def _loop(self, deadline: float) -> LeadOutcome:
        """One step after another, by phase, until one ends the work."""
        while True:
            progress = self.state.progress
            if self._cancelled:
                return LeadOutcome("cancelled", self._last_text())
            if progress.phase == "failed":
                return await self._verdict.failed(progress.error, deadline)
            if progress.phase == "gather":
                ended = await self._gather(deadline)
            else:
                ended = await self._turn_step(deadline)
            if ended is not None:
                return ended

    async def _turn_step(self, deadline: float) -> LeadOutcome | None:
        """Run a turn and act on how it ended (see the module docstring)."""
        progress = self.state.progress
        result = await self._turns.run(deadline)
        if result is None:
            return await self._verdict.late_answer()
        if result.stop is StopReason.CANCELLED or self._cancelled:
            return LeadOutcome("cancelled", self.policy.answer(result).text)
        if result.stop in (StopReason.ERROR, StopReason.BUDGET):
            progress.phase, progress.error = "failed", str(result.error or "model error")
            await self._save()
            return None
        if result.stop is StopReason.NEWS:  # a send found results unread: read them first
            progress.phase, progress.last = "gather", LastTurn(wants_final=True)
            await self._save()
            return None
        answer = self.policy.answer(result)
        if answer.silent and result.text.strip() and result.terminal_call is None:
            self.state.unsay(result.text)  # the policy read the words as no answer
        last = await self._decided(result, answer, deadline)
        if last is not None:
            progress.phase, progress.last = "gather", last
            await self._save()
        return None

    async def _decided(
        self, result: TurnResult, answer: Answer, deadline: float
    ) -> LastTurn | None:
        """What the policy makes of an answered turn: the last turn to gather on, or None when
        the turn is to be run again (sent back) or the request was routed."""
        last = last_turn(result, answer)  # cut, blocked or silent: asked again (ending.py)
        decision = self.policy.after_turn(answer, self._verdict.facts(result), self.state.policy)
        match decision:
            case Accept():
                return last
            case SendBack(note=note):
                await self._turns.retract_shown(RETRACTED_SENT_BACK)
                self._turns.add_note(note, kind="check")
                await self._save()
                return None
            case AskAgain():
                log.info("session %s: the answer is no answer; asking again", self.session)
                await self._turns.retract_shown(RETRACTED_SENT_BACK)
                return LastTurn(reply="", wants_final=True)
            case Route(choices=choices, each=each):
                if not self._turns.routes:
                    return last
                retract = partial(self._turns.retract_shown, RETRACTED_SENT_BACK)
                routed = await self._router.route(choices, deadline, each=each, before_send=retract)
                await self._save()
                return None if routed else last

    async def _gather(self, deadline: float) -> LeadOutcome | None:
        """Wait for news while sub-agents work; with none and nothing outstanding, the last
        turn's reply is the answer (or the answer is asked for once more, without tools)."""
        progress = self.state.progress
        arrived, late = await self.team.gather(deadline)
        if not arrived and not late and not self._cancelled:
            if progress.final_asked or not progress.last.wants_final:
                if not await self._checkpoints.close():
                    return None  # a message came after the read: gather again, and read it
                return final_outcome(progress.last, self.roster, progress.final_asked)
            progress.final_asked = True  # one more turn, asked for the answer without tools
            self._turns.add_note(prompt.final_note(bool(self.roster.agents)), final=True)
        progress.phase = "turn"
        if arrived:
            progress.final_asked = False
        else:
            await self._save()
        await self._turns.take(arrived)
        if self._cancelled:
            return LeadOutcome("cancelled", progress.last.reply)
        if late:
            return await self._verdict.late_answer()
        return None

    def _last_text(self) -> str:
        for message in reversed(self.history):
            if message.get("role") == "assistant" and isinstance(message.get("content"), str):
                return str(message.get("content"))
        return ""

    # -- the checkpoint (lead/checkpoint.py) ----------------------------------------------------

    def checkpoint(self, *, mid_turn: bool = False) -> LeadCheckpoint:
        """Everything of the lead but its conversation, as it stands now."""
        return self.state.checkpoint(mid_turn=mid_turn)

    def restore(self, history: list[Message], checkpoint: LeadCheckpoint) -> None:
        """Put a checkpoint back (before ``run(None)``); see :meth:`LeadState.restore`."""
        self.state.restore(history, checkpoint)
        self.inbox.remember(checkpoint.taken)
        self.team.roster_changed()

    async def _save(self) -> None:
        await self._checkpoints.step()

    async def stop_agents(self) -> None:
        """``shutdown`` to every outstanding sub-agent, then wait (bounded) for their results."""
        await self.team.stop_agents(self.options.shutdown_grace_s)
