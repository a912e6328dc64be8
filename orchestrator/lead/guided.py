"""The guided policy: the default's structural judgement, plus aids for small models (opt-in).

Small models (1.5B parameters and below were measured) answer work they cannot do without doing
it, apologise instead of delegating, say the request back, quote their own instructions as the
answer, and refuse beside pictures their sub-agents made. Typed decisions remove most of that
(lead/answer.py); what is left needs the model's words read, in English
(lead/heuristics.py), which cannot be right for every model, language and request. So these aids
run only under this policy, chosen with ``lead_policy = "guided"`` or by a model profile
(lead/profiles.py); docs/small-models.md lists each aid with its trigger, its switch and its
language. On top of :class:`~baton.lead.policy.StructuralPolicy`:

- **screened replies**: a reply that repeats what the session told the lead (a note, a send's
  receipt, the client's parse-error correction) or quotes one of its tool results or its system
  prompt is no reply (the turn counts as silent, so the answer is asked for again);
- **routing, by the request's words, with no model call**: while nothing was delegated, an
  answer to a request that names profiles on offer ("have the writer write …":
  :func:`~baton.lead.heuristics.named_profiles`) goes, as written, to each of them; one that asks
  for a picture (:func:`~baton.lead.heuristics.picture_asked`) to the profile that makes media
  (one ``route(to)`` call only when several do); and while part of it was delegated, the part
  that went to nobody: a profile the request names that no sub-agent runs, or a picture asked
  while no media-making one runs. Routing never asks the model to *choose* where nothing in the
  request decides it: over 43 such choices by a 1.5B lead in nine benchmark runs, the check of a
  plain answer (``route(to)`` among ``none`` and the profiles) and the route of a decline or a
  typed ``cannot`` among all profiles were right for 1 of 11 picture requests in French, German
  and Chinese (the case they were for) and sent 5 questions to a sub-agent; a typed ``cannot``
  or ``delegated`` with nothing sent gets the default's send-back note instead;
- **no refusal beside results**: a final answer that refuses while sub-agents delivered is taken
  back and asked for again (once);
- **judged**: a request for a picture that ends with no media, a decline with nothing delegated,
  and URLs no tool produced while no media was made, are ``incomplete``.
"""

from __future__ import annotations

from typing import ClassVar

from baton.engine import TurnResult
from baton.lead import heuristics
from baton.lead.answer import Answer
from baton.lead.outcome import AnswerCheck
from baton.lead.policy import (
    AskAgain,
    Decision,
    Facts,
    Memo,
    Route,
    StructuralPolicy,
)
from baton.llm.correction import echoes_correction


class GuidedPolicy(StructuralPolicy):
    """See the module docstring."""

    name: ClassVar[str] = "guided"

    def answer(self, result: TurnResult) -> Answer:
        answer = super().answer(result)
        text = answer.text
        if echoes_correction(text) or heuristics.echoes_note(text):
            return Answer("", answer.status, answer.media, answer.typed)
        if heuristics.quotes_what_it_was_told(text, result.messages):
            return Answer("", answer.status, answer.media, answer.typed)
        return answer

    def after_turn(self, answer: Answer, facts: Facts, memo: Memo) -> Decision:
        roster = facts.roster
        if facts.delegated and not memo.get("left_out"):  # the waves need not be left: the
            # route is the runtime's one send, and a 1.5B lead that spent its waves on the
            # writer was asked without tools, so the picture went to nobody; and before the
            # refusal check: a lead that refused beside the painter's picture was asked again,
            # refused again, and the writer the request named was never asked
            left_out = self._not_asked(facts)
            if left_out:  # part of the request went to nobody (routing's sends count too)
                memo["left_out"] = True
                return left_out
        if roster.delivered and heuristics.refuses(answer.text):
            return AskAgain()  # bounded: asked again once, the answer is composed (ending.py)
        if invented := self.invented_sent_back(answer, facts, memo):
            return invented  # before routing: the URL is the fact the model is shown
        if (
            facts.delegated
            or roster.agents
            or facts.own_tools
            or not facts.profiles
            or not facts.can_delegate
        ):
            return super().after_turn(answer, facts, memo)
        if not memo.get("routed") and (route := self._route(facts)) is not None:
            memo["routed"] = True
            return route
        return super().after_turn(answer, facts, memo)

    def judge(self, answer: Answer, check: AnswerCheck, facts: Facts) -> list[str]:
        reasons = super().judge(answer, check, facts)
        roster = facts.roster
        if roster.media_urls:
            return reasons
        if check.invented_urls and not check.invented_media:
            reasons.append(
                f"the answer cites URLs that no tool produced: {', '.join(check.invented_urls)}"
            )
        if self._picture_asked(facts):
            reasons.append("the request asked for a picture and no sub-agent produced any media")
        if not roster.agents and facts.profiles and heuristics.declines(answer.text):
            reasons.append("the lead declined the request without asking any sub-agent")
        return reasons

    def _route(self, facts: Facts) -> Route | None:
        """Where an answer that delegated nothing is routed (None: it is not): to each profile
        the request names ("have the writer write …"), else for a picture among those that make
        media. Nothing else: where the request's words decide nothing, the model's choice among
        profiles was no better than chance (the module docstring)."""
        profiles = dict(facts.profiles)
        named = heuristics.named_profiles(facts.request, profiles)
        if named:
            return Route({p: profiles[p] for p in named}, each=True)
        makers = self._media_makers(facts) if self._picture_asked(facts) else {}
        return Route(makers) if makers else None

    def _not_asked(self, facts: Facts) -> Route | None:
        """The route for the part of the request that no sub-agent of the session runs, after
        the lead delegated part of it (a 1.5B lead sent "paint a lighthouse and have the writer
        write a poem about it" to the writer only, then said it cannot paint): to each profile
        the request names; else, for a picture, to one of the media-making ones. None when the
        lead worked with tools of its own (it may have made the picture itself)."""
        if facts.own_tools:
            return None
        profiles = dict(facts.profiles)
        asked = {record.profile for record in facts.roster.agents.values()}
        named = [p for p in heuristics.named_profiles(facts.request, profiles) if p not in asked]
        if named:
            return Route({p: profiles[p] for p in named}, each=True)
        if not asked & facts.media_profiles and self._picture_asked(facts):
            return Route(self._media_makers(facts))
        return None

    @staticmethod
    def _media_makers(facts: Facts) -> dict[str, str]:
        return {p: d for p, d in facts.profiles.items() if p in facts.media_profiles}

    @staticmethod
    def _picture_asked(facts: Facts) -> bool:
        return heuristics.picture_asked(facts.request, facts.media_profiles, facts.profiles)
