"""The human approval gate: one batched question per round, failing closed.

Every call whose tool needs approval goes into a single question for the round, answered per call
id, so a person sees the round's gated calls together instead of a dialog per call. Anything but an
explicit approval declines: a "no", a missing decision, a timeout (120 s by default, clamped below
the stream idle timeout), a channel error, or no channel at all. A declined tool is remembered on
the turn, so the loop guard declines a re-request without asking again.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

import anyio

from baton.bus.events import ApprovalDecided, ToolCallInfo
from baton.engine import messages
from baton.engine.calls import Answer, PendingCall, RoundContext
from baton.engine.channels import approval_requested, new_question_id
from baton.engine.errors import ApprovalTimeout
from baton.engine.interaction import ApprovalDecision, ApprovalQuestion
from baton.engine.media import CLOSING_EMIT_S

log = logging.getLogger(__name__)

WITHDRAWN = "withdrawn: the agent's turn was cancelled before anyone answered"
"""The reason of the ``approval.decided`` logged for each call of a question whose agent stopped
waiting because it was cancelled (its session cancelled, the agent stopped): the question is
closed for every reader of the log, as a file question's ``closed`` outcome closes it, and the
call did not run. (The AG-UI endpoint reports it as ``closed``, never as a person's decline.)"""

NO_DECISION = "no decision was given for this call"
"""The reason of a gated call the channel returned no decision for (it is declined)."""


class HumanApproval:
    """Asks once per round about every gated call; claims the ones not approved."""

    async def intercept(self, calls: Sequence[PendingCall], ctx: RoundContext) -> dict[str, Answer]:
        gated = [
            call
            for call in calls
            if call.tool is not None
            and call.args is not None
            and call.tool.needs_approval(call.args)
        ]
        if not gated:
            return {}
        if not ctx.turn.take_interaction():
            budget = ctx.limits.interactions_per_round
            return {
                call.id: await ctx.guard(
                    "interaction-budget", call, messages.interaction_budget(call.name, budget)
                )
                for call in gated
            }
        infos = tuple(
            ToolCallInfo(call_id=call.id, name=call.name, arguments=call.call.arguments)
            for call in gated
        )
        question = ApprovalQuestion(
            id=new_question_id(), session=ctx.session, agent=ctx.agent, calls=infos
        )
        await ctx.emit(
            approval_requested(
                ctx.session,
                ctx.agent,
                infos,
                wait_s=ctx.limits.approval_wait_s,
                channel=ctx.channel,
            )
        )
        try:
            decisions, failure = await _ask(ctx, question)
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True), anyio.move_on_after(CLOSING_EMIT_S):
                for call in gated:
                    await ctx.emit(ApprovalDecided(session=ctx.session, agent=ctx.agent,
                                                   call_id=call.id, approved=False,
                                                   reason=WITHDRAWN))  # fmt: skip
            raise
        answers: dict[str, Answer] = {}
        for call in gated:
            policy = None
            source = call.tool.source if call.tool is not None else "python"
            if failure is not None:
                ctx.telemetry.hitl_decision("ask-failed", source=source)
                approved, reason = False, failure
                answers[call.id] = Answer(messages.approval_failed(call.name, failure))
            else:
                decision = decisions.get(call.id) or ApprovalDecision(
                    approved=False, reason=NO_DECISION
                )
                approved, reason, policy = decision.approved, decision.reason, decision.policy
                ctx.telemetry.hitl_decision("approved" if approved else "declined", source=source)
                if not approved:
                    if policy == "deny":
                        said = messages.approval_denied_by_policy(call.name)
                    elif policy == "nobody":
                        said = messages.approval_unanswerable(call.name, reason)
                    else:
                        said = messages.approval_declined(call.name, reason)
                    answers[call.id] = Answer(said)
            if not approved:
                ctx.turn.decline(call.name)
            await ctx.emit(
                ApprovalDecided(
                    session=ctx.session,
                    agent=ctx.agent,
                    call_id=call.id,
                    approved=approved,
                    reason=reason,
                    policy=policy,
                )
            )
        return answers


async def _ask(
    ctx: RoundContext, question: ApprovalQuestion
) -> tuple[Mapping[str, ApprovalDecision], str | None]:
    """The decisions, or why there are none (then every gated call is declined)."""
    if ctx.channel is None:
        return {}, "nobody can be asked: no interaction channel is configured"
    wait_s = ctx.limits.approval_wait_s
    try:
        with anyio.fail_after(wait_s):
            return await ctx.channel.ask_approval(question), None
    except TimeoutError:
        error = ApprovalTimeout(tuple(call.call_id for call in question.calls), wait_s)
        log.warning("%s", error)
        return {}, f"no answer within {wait_s:g} s"
    except Exception as exc:  # fail closed on any channel fault; cancellation still propagates
        log.warning("approval question %s failed: %s", question.id, exc)
        return {}, f"the question could not be answered: {exc}"
