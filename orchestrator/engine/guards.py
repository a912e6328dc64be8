"""The first links of the chain: the loop guard and the call check.

The loop guard runs first so that a round that must not run (budget spent, turn cancelled) never
opens a dialog, and so a repeated or already-declined call never reaches a human. The call check
follows it: a call to an unknown tool or with invalid arguments is answered with a recovery hint
instead of crashing the loop, and never reaches the approval question either (asking a person to
approve a call that cannot run would waste their attention).
"""

from __future__ import annotations

from collections.abc import Sequence

from baton.engine import messages
from baton.engine.calls import Answer, PendingCall, RoundContext
from baton.engine.telemetry import LoopOutcome
from baton.engine.turn import Verdict, fingerprint, repeat_fingerprint


class LoopGuard:
    """Applies the round verdict, short-circuits repeats, auto-declines declined tools.

    A call is a repeat when its normalised arguments were seen ``max_repeats`` times this turn, or
    when its tool's ``repeat_key`` (e.g. a message's content, whatever its target) was.

    Past the soft limit (wrap-up) a terminal call — one whose tool's ``terminal`` predicate holds
    for its arguments, e.g. a sub-agent's ``send_message(type="result")`` — still runs: it is the
    very call the wrap-up asks for, and refusing it would leave such an agent (asked for a tool
    call on every request) no way to finish but the hard limit, its result lost.
    """

    async def intercept(self, calls: Sequence[PendingCall], ctx: RoundContext) -> dict[str, Answer]:
        if ctx.verdict is not Verdict.CONTINUE:
            return await self._apply_verdict(calls, ctx)
        return await self._repeats(calls, ctx)

    async def _repeats(self, calls: Sequence[PendingCall], ctx: RoundContext) -> dict[str, Answer]:
        answers: dict[str, Answer] = {}
        turn = ctx.turn
        limit = ctx.limits.max_repeats
        for call in calls:
            if turn.is_declined(call.name):
                answers[call.id] = await ctx.guard(
                    "declined-repeat", call, messages.declined_repeat(call.name)
                )
                continue
            count = turn.count_call(fingerprint(call.name, call.call.arguments))
            if count > limit:
                answers[call.id] = await ctx.guard(
                    "repeated", call, messages.repeated(call.name, count, limit)
                )
                continue
            key = _repeat_key(call)
            if key is not None:
                count = turn.count_call(repeat_fingerprint(call.name, key))
                if count > limit:
                    answers[call.id] = await ctx.guard(
                        "repeated", call, messages.repeated_content(call.name, count, limit)
                    )
        return answers

    async def _apply_verdict(
        self, calls: Sequence[PendingCall], ctx: RoundContext
    ) -> dict[str, Answer]:
        verdict = ctx.verdict
        if verdict is Verdict.WRAP_UP:
            finishing: list[PendingCall] = []
            refused: list[PendingCall] = []
            for call in calls:
                (finishing if _is_terminal(call) else refused).append(call)
            if finishing:  # the call the wrap-up asks for runs (repeat-checked as ever)
                answers = await self._repeats(finishing, ctx)
                if refused:
                    answers.update(await self._refuse(refused, ctx))
                return answers
        return await self._refuse(calls, ctx)

    async def _refuse(self, calls: Sequence[PendingCall], ctx: RoundContext) -> dict[str, Answer]:
        """Answer every call with the verdict's text; none runs."""
        rounds = ctx.turn.rounds
        outcome: LoopOutcome
        if ctx.verdict is Verdict.CANCELLED:
            outcome = "cancelled"  # counted once per turn by the loop, not per round
        else:
            outcome = "wrap-up" if ctx.verdict is Verdict.WRAP_UP else "hard-stop"
            ctx.telemetry.loop_outcome(outcome)
        finish_with = ctx.tools.terminal_names if ctx.verdict is Verdict.WRAP_UP else ()
        answers: dict[str, Answer] = {}
        for call in calls:
            if ctx.verdict is Verdict.CANCELLED:
                text = messages.cancelled(call.name)
            elif ctx.verdict is Verdict.WRAP_UP:
                text = messages.wrap_up(call.name, rounds - 1, finish_with)
            else:
                text = messages.hard_stop(call.name, rounds - 1)
            answers[call.id] = await ctx.guard(outcome, call, text, count=False, blocked=False)
        return answers


def _is_terminal(call: PendingCall) -> bool:
    """The call ends the turn once it has run (valid arguments and a terminal predicate)."""
    return call.tool is not None and call.args is not None and call.tool.is_terminal(call.args)


def _repeat_key(call: PendingCall) -> str | None:
    """The tool's own notion of "the same call" (None without one or without valid arguments)."""
    if call.tool is None or call.tool.repeat_key is None or call.args is None:
        return None
    return call.tool.repeat_key(call.args)


class CallCheck:
    """Answers calls to unknown tools and calls with invalid arguments with a recovery hint."""

    async def intercept(self, calls: Sequence[PendingCall], ctx: RoundContext) -> dict[str, Answer]:
        return {
            call.id: Answer(call.problem, is_error=True)
            for call in calls
            if call.problem is not None
        }
