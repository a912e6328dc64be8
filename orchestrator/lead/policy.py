"""The lead's policy seam: what happens after a turn, and how the outcome is judged.

The loop (lead/agent.py) runs turns and waits for sub-agents; at two points it asks a
:class:`LeadPolicy` instead of deciding itself:

- **after a turn that answered** (:meth:`LeadPolicy.after_turn`): :class:`Accept` the answer,
  :class:`SendBack` it once with a note (the model then answers again or delegates),
  :class:`Route` the request to a profile chosen in one constrained call, or :class:`AskAgain`
  (the reply is taken back and the answer asked for without tools);
- **at the end** (:meth:`LeadPolicy.judge`): the reasons the work is not complete although the
  lead answered (the session is then ``incomplete``, exit 4).

The policy reads :class:`Facts`: what the runtime knows without understanding language (the typed
answer, what was delegated, delivered, refused and produced). Whatever it needs to remember for the
current request lives in ``memo`` (the checkpoint's ``policy`` part), so a new policy never changes
the checkpoint's schema.

:class:`StructuralPolicy`, the default, judges structure only: it sends back once an answer whose
typed status is ``cannot``, and once one whose status is ``delegated``, while profiles were on
offer and nothing was delegated (and once one whose status is ``delegated`` while every result
is in and nothing is outstanding), and once an answer that presents media no tool produced; it
judges work delegated and not delivered, sends refused by the caps, invented media, a ``cannot``
and a ``delegated`` with nothing sent. No content pattern overrides a model's answer,
its status or the exit code. The opt-in aids for small models are lead/guided.py; which policy a
session runs is lead/profiles.py (docs/small-models.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar, Protocol

from pydantic import JsonValue

from baton.engine import TurnResult
from baton.lead import prompt
from baton.lead.answer import Answer, answer_of, written_answer
from baton.lead.outcome import AnswerCheck, check_answer, structural_reasons
from baton.lead.roster import Roster
from baton.llm.types import Message

Memo = dict[str, JsonValue]
"""A policy's memory for the current request (cleared at each new request; checkpointed)."""


@dataclass(frozen=True, slots=True)
class Facts:
    """What the runtime knows of the current request, by structure."""

    request: str
    """The person's newest request, as written."""
    profiles: Mapping[str, str]
    """The profiles on offer: name -> description."""
    media_profiles: frozenset[str]
    """The profiles whose tools make media."""
    roster: Roster
    delegated: bool
    """Work was sent for this request (this turn or an earlier one)."""
    refused: tuple[str, ...] = ()
    """Sends the delegation caps refused for this request."""
    own_tools: bool = False
    """The turn called a tool of the lead's own (it worked on the request itself)."""
    can_delegate: bool = True
    """The lead is offered tools at all (``tool_choice`` is not ``none``): a note asking it to
    delegate, or a routing call, can only be followed when it is."""
    history: tuple[Message, ...] = ()
    """The lead's context (for a policy that compares a reply with what it was told)."""
    news_waiting: bool = False
    """Messages were read that are not in the lead's context yet (a result that came in during
    the turn): the roster may say an agent is done before the model has seen its result."""


@dataclass(frozen=True, slots=True)
class Accept:
    """The answer stands."""


@dataclass(frozen=True, slots=True)
class SendBack:
    """Show the answer back to the model once, with ``note``: it answers again or delegates."""

    note: str


@dataclass(frozen=True, slots=True)
class Route:
    """Hand the request, as written, to one of ``choices`` (profile -> description), chosen in
    one constrained call (``route(to)``, lead/routing.py); with one choice, no call. ``each``:
    to every one of them, no call (the request named them all)."""

    choices: Mapping[str, str]
    each: bool = False


@dataclass(frozen=True, slots=True)
class AskAgain:
    """The reply is no answer: take it back and ask for the answer once more, without tools."""


Decision = Accept | SendBack | Route | AskAgain


class LeadPolicy(Protocol):
    """Decides after each answered turn and judges the outcome; see the module docstring."""

    name: ClassVar[str]

    def answer(self, result: TurnResult) -> Answer:
        """The turn's answer: its ``answer`` call, or its text read as one."""
        ...

    def after_turn(self, answer: Answer, facts: Facts, memo: Memo) -> Decision:
        """What happens to a turn's answer (a silent one, or one cut at the output limit or by
        the guards, too: accepted, the runtime asks for the answer again without tools,
        lead/ending.py)."""
        ...

    def judge(self, answer: Answer, check: AnswerCheck, facts: Facts) -> list[str]:
        """Why the work is not complete although the lead answered (empty: it is)."""
        ...


class StructuralPolicy:
    """The default: structure only (see the module docstring)."""

    name: ClassVar[str] = "structural"

    def answer(self, result: TurnResult) -> Answer:
        typed = answer_of(result.terminal_call)
        return typed if typed is not None else written_answer(result.text)

    def after_turn(self, answer: Answer, facts: Facts, memo: Memo) -> Decision:
        if answer.silent:
            return Accept()
        invented = self.invented_sent_back(answer, facts, memo)
        if invented is not None:
            return invented
        if all_in(answer, facts) and not memo.get("all_in_sent_back"):
            memo["all_in_sent_back"] = True
            return SendBack(prompt.all_in_note(facts.roster.media_urls))
        if not facts.profiles or not facts.can_delegate or facts.delegated:
            return Accept()
        if answer.status == "cannot" and not memo.get("cannot_sent_back"):
            memo["cannot_sent_back"] = True
            return SendBack(prompt.cannot_note(facts.profiles))
        if unsent(answer, facts) and not memo.get("unsent_sent_back"):
            memo["unsent_sent_back"] = True
            return SendBack(prompt.unsent_note(facts.profiles))
        return Accept()

    def invented_sent_back(self, answer: Answer, facts: Facts, memo: Memo) -> SendBack | None:
        """An answer presenting media no tool produced, sent back once with the fact (before
        any other check of a policy built on this one: the words may be right, the URL is not).
        A silent answer is no answer to send back (the runtime asks for one, lead/ending.py)."""
        if answer.silent:
            return None
        invented = facts_invented(answer, facts)
        if not invented or memo.get("invented_sent_back"):
            return None
        memo["invented_sent_back"] = True
        return SendBack(prompt.invented_note(invented, facts.roster.media_urls))

    def judge(self, answer: Answer, check: AnswerCheck, facts: Facts) -> list[str]:
        return structural_reasons(
            check,
            facts.roster,
            cannot=answer.status == "cannot",
            unsent=unsent(answer, facts),
            refused=facts.refused,
            media_profiles=facts.media_profiles,
        )


def unsent(answer: Answer, facts: Facts) -> bool:
    """Whether ``answer`` says, typed, that the work is delegated while nothing was sent for the
    request: a claim the runtime can check (a 1.5B lead answered a picture request with
    "Delegating task... please wait." and delegated nothing)."""
    return answer.status == "delegated" and not facts.delegated and not facts.roster.outstanding


def all_in(answer: Answer, facts: Facts) -> bool:
    """Whether ``answer`` says, typed, that the work is under way while every result of it is in
    the lead's context: nothing outstanding, nothing read and waiting. The person would be left
    waiting for work that is done (a 1.5B lead answered a translation with ``delegated`` after
    its helper had reported)."""
    roster = facts.roster
    return (
        answer.status == "delegated"
        and facts.delegated
        and roster.delivered
        and not roster.outstanding
        and not facts.news_waiting
    )


def facts_invented(answer: Answer, facts: Facts) -> list[str]:
    """The URLs ``answer`` presents as media that no tool produced and nobody gave."""
    check = check_answer(answer.text, facts.roster, facts.history, presented=answer.media)
    return check.invented_media
