"""How the lead's work ends: judged, late, or failed.

:class:`Verdict` is the half of the lead that decides what its work came to. It gathers the
facts the policy judges by (lead/policy.py), checks the final answer against what the tools
produced and what the model declared (lead/outcome.py, lead/items.py) and logs that as the
``answer.checked`` event; past the session deadline it runs the one short late turn (its answer,
or one composed from the results: lead/ending.py), and when the model failed for good it waits
(bounded) for the sub-agents and answers with what they reported. The lead's loop (lead/agent.py)
decides when the work ends; this says how.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

import anyio

from baton.bus.events import AnswerChecked
from baton.engine import StopReason, TurnResult
from baton.lead.answer import Answer
from baton.lead.ending import late_outcome
from baton.lead.items import items_reason, missing_items
from baton.lead.options import LeadOptions, LeadParts
from baton.lead.outcome import LeadOutcome, LeadStatus, check_answer, failure_answer
from baton.lead.policy import Facts
from baton.lead.prompt import LEAD_NAME
from baton.lead.state import LeadState
from baton.lead.team import Team
from baton.lead.turns import LeadTurns

log = logging.getLogger(__name__)


class Verdict:
    """The end of one lead's work, judged; see the module docstring."""

    def __init__(
        self,
        state: LeadState,
        team: Team,
        turns: LeadTurns,
        profiles: Mapping[str, str],
        *,
        options: LeadOptions,
        parts: LeadParts,
    ) -> None:
        self.state = state
        self.team = team
        self.turns = turns
        self.session = state.session
        self.options = options
        self.policy = parts.policy
        self._emit = parts.events
        self._profiles = dict(profiles)
        self._own_tools = frozenset(tool.name for tool in parts.tools)

    def facts(self, result: TurnResult | None) -> Facts:
        """What the policy judges by: the request, the team's work, the context (``result``:
        the turn judged; None for the final answer)."""
        state = self.state
        return Facts(
            request=state.progress.request,
            profiles=self._profiles,
            media_profiles=self.options.media_profiles,
            roster=state.roster,
            delegated=state.delegated,
            refused=tuple(state.refused),
            own_tools=result is not None and self._used_own_tools(result),
            can_delegate=self.turns.routes and self.turns.tools_offered,
            news_waiting=self.team.news_waiting,
            history=tuple(state.history),
        )

    def _used_own_tools(self, result: TurnResult) -> bool:
        """Whether the turn called one of the lead's own tools (it worked on the request itself)."""
        for message in result.messages:
            calls = message.get("tool_calls")
            for call in calls if isinstance(calls, list) else ():
                function = call.get("function") if isinstance(call, dict) else None
                if isinstance(function, dict) and function.get("name") in self._own_tools:
                    return True
        return False

    async def checked(self, outcome: LeadOutcome) -> LeadOutcome:
        """The final answer against what the tools produced (lead/outcome.py), judged by the
        policy, and the ``answer.checked`` event."""
        roster = self.state.roster
        last = self.state.progress.last
        answer = Answer(outcome.answer, last.status, tuple(last.media))
        if outcome.composed:
            answer = Answer(outcome.answer)
        check = check_answer(answer.text, roster, self.state.history, presented=answer.media)
        reasons = self.policy.judge(answer, check, self.facts(None))
        missing = missing_items(self.state.items, roster, self.options.media_profiles)
        if missing:  # what the model declared, judged whatever the policy
            reasons.append(items_reason(missing))
        if self._emit is not None:
            await self._emit(
                AnswerChecked(
                    session=self.session,
                    agent=LEAD_NAME,
                    missing_media=check.missing_media,
                    missing_items=[item.text for item in missing],
                    invented_urls=check.invented_urls,
                    composed=outcome.composed,
                    policy=self.policy.name,
                    reasons=reasons,
                )
            )
        status, error = outcome.status, outcome.error
        if status == "completed" and reasons:  # nothing ran at all: the work failed outright
            status = "failed" if roster.none_ran else "incomplete"
            error = "; ".join(reasons)
        return LeadOutcome(status, check.answer, [], error, check.invented_urls, outcome.composed)

    async def late_answer(self) -> LeadOutcome:
        """Past the session deadline: one short last turn without tools (``late_answer_s``),
        told what is missing; no answer from it, one composed from the results."""
        turns, roster = self.turns, self.state.roster
        if not turns.cancelled:  # what arrived while the cut turn ran (one read, no wait)
            await turns.take(await self.team.collect(anyio.current_time(), lambda _: True))
        timeout_s = self.options.timeout_s
        missing = ", ".join(roster.outstanding)
        waiting = f"; still no result from: {missing}" if missing else ""
        turns.add_note(
            f"The session timed out after {timeout_s:g} s{waiting}. Do not delegate again: "
            "answer the user now with what you have, citing every media URL exactly.",
            final=True,
            kind="error",
        )
        result = await turns.run(anyio.current_time() + self.options.late_answer_s)
        error = f"the session timed out after {timeout_s:g} s"
        if result is not None and result.stop is StopReason.CANCELLED:
            return LeadOutcome("cancelled", self.policy.answer(result).text, error=error)
        failed = result is None or result.stop in (StopReason.ERROR, StopReason.BUDGET)
        answer = None if result is None or failed else self.policy.answer(result)
        return late_outcome(answer, roster, timeout_s)

    async def failed(self, error: str, deadline: float) -> LeadOutcome:
        """The model failed for good (or the budget is spent): the sub-agents' work still counts,
        so wait (bounded) for what is outstanding and answer with what they reported."""
        log.warning("session %s: the lead's model failed for good: %s", self.session, error)
        roster = self.state.roster
        if roster.outstanding and not self.turns.cancelled:
            until = min(deadline, anyio.current_time() + self.options.failure_grace_s)
            await self.turns.take(await self.team.collect(until, lambda _: not roster.outstanding))
        status: LeadStatus = "cancelled" if self.turns.cancelled else "failed"
        return LeadOutcome(status, failure_answer(error, roster), error=error)
