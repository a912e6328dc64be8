"""How one of the lead's last turns becomes the session's answer.

A small model's last turn is often no answer: cut at ``max_tokens``, stopped by the guards
(blocked, the hard round limit), or silent (empty text, an empty ``answer`` call). Such a turn is
not taken as the final answer: the lead asks once more, without tools. What the second try gives
decides: a reply is the answer; a reply cut again is ``incomplete`` (it says it was cut); nothing
at all is an answer composed from the sub-agents' results (``incomplete``). A turn cut by the
session deadline is followed by one short late turn; with no reply from it, the answer is composed
from the results too (``timed_out``).
"""

from __future__ import annotations

from collections.abc import Sequence
from difflib import SequenceMatcher

from baton.engine import StopReason, TurnResult
from baton.lead.answer import answered_text, text_answer
from baton.lead.checkpoint import LastTurn
from baton.lead.outcome import LeadOutcome, composed_answer
from baton.lead.prompt import echoes_note
from baton.lead.roster import Roster
from baton.llm.correction import echoes_correction
from baton.llm.types import Message

NO_ANSWER = "the lead gave no final answer"
CUT = "the final answer was cut at the output limit (max_tokens)"
CUT_TWICE = "the lead's final answer was cut at the output limit (max_tokens) twice"


QUOTE_CHARS = 40
"""A reply sharing this many characters in a row with one of the lead's tool results (or its system
prompt) quotes it."""


def _folded(text: str) -> str:
    return " ".join(text.casefold().split())


def quotes_what_it_was_told(reply: str, messages: Sequence[Message]) -> bool:
    """Whether ``reply`` repeats one of the lead's tool results or its system prompt. The lead's
    tools are its delegation (lead/dispatch.py): their results are receipts and guard notices
    meant for the lead alone ("...already called 3 times with the exact same arguments"), and
    small models hand them to the user as the answer, as they do their rules ("You must call a
    tool in every reply: to reply to the user..."). The sub-agents' results reach the lead as
    user messages, not tool results, so quoting those stays an answer."""
    said = _folded(reply)
    if len(said) < QUOTE_CHARS:
        return False
    for message in messages:
        content = message.get("content")
        if message.get("role") not in ("tool", "system") or not isinstance(content, str):
            continue
        told = _folded(content)
        if len(told) < QUOTE_CHARS:
            continue
        match = SequenceMatcher(None, said, told, autojunk=False).find_longest_match()
        if match.size >= QUOTE_CHARS:
            return True
    return False


def reply_of(result: TurnResult) -> str:
    """The turn's reply: its ``answer`` call's text (lead/answer.py; also when written out as
    text), else its last text without calls written out as text. A reply that parrots the
    client's parse-error correction, a session note or a tool result is no reply (counted as
    silent)."""
    answered = answered_text(result.terminal_call)
    reply = text_answer(result.text) if answered is None else answered
    if echoes_correction(reply) or echoes_note(reply):
        return ""
    return "" if quotes_what_it_was_told(reply, result.messages) else reply


def wants_final(result: TurnResult) -> bool:
    """Whether a last turn gave no usable answer: cut, blocked, stopped, or silent."""
    if result.stop in (StopReason.BLOCKED, StopReason.HARD_STOP, StopReason.TRUNCATED):
        return True
    if result.stop is StopReason.TERMINAL and answered_text(result.terminal_call) is None:
        return False  # a caller's own terminal tool ended the turn: its call is the reply
    return not reply_of(result).strip()


def last_turn(result: TurnResult) -> LastTurn:
    """What the final answer needs of a turn that ended normally (it is checkpointed: a resumed
    lead whose sub-agents are all in answers from it)."""
    return LastTurn(
        reply=reply_of(result),
        wants_final=wants_final(result),
        truncated=result.stop is StopReason.TRUNCATED,
    )


def final_outcome(last: LastTurn, roster: Roster, final_asked: bool) -> LeadOutcome:
    """The last turn's reply as the answer; once asked again (``final_asked``): still nothing, or
    cut again, an answer composed from the sub-agents' results: ``completed`` when every
    sub-agent delivered (the work is done and the answer carries all of it, saying that baton
    wrote it), else ``incomplete``. A cut answer with no sub-agents stays, ``incomplete``."""
    reply = last.reply
    if final_asked and not reply.strip():
        answer = composed_answer(NO_ANSWER, roster)
        if roster.all_delivered:
            return LeadOutcome("completed", answer, composed=True)
        return LeadOutcome("incomplete", answer, error=NO_ANSWER, composed=True)
    if final_asked and last.truncated:
        if roster.all_delivered:  # a runaway summary of work that is done: the work's own words
            answer = composed_answer(CUT_TWICE, roster)
            return LeadOutcome("completed", answer, composed=True)
        return LeadOutcome("incomplete", reply, error=CUT)
    return LeadOutcome("completed", reply)


def late_outcome(result: TurnResult | None, roster: Roster, timeout_s: float) -> LeadOutcome:
    """The late turn's reply (None: it was cut too) as a ``timed_out`` answer, or one composed
    from the results when it gave none."""
    error = f"the session timed out after {timeout_s:g} s"
    if result is not None and result.stop is StopReason.CANCELLED:
        return LeadOutcome("cancelled", reply_of(result), error=error)
    failed = result is None or result.stop in (StopReason.ERROR, StopReason.BUDGET)
    reply = "" if result is None or failed else reply_of(result)
    if not reply.strip():
        reply = composed_answer("The session timed out before the lead answered", roster)
    return LeadOutcome("timed_out", reply, error=error)
