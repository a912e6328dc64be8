"""How one of the lead's last turns becomes the session's answer.

A model's last turn is sometimes no answer: cut at ``max_tokens``, stopped by the guards (blocked,
the hard round limit), or silent (no words at all). These are structural facts (a stop reason, an
empty text), so the runtime handles them itself, for every policy: such a turn is not taken as the
final answer, and the lead asks once more, without tools. What the second try gives decides: a
reply is the answer; a reply cut again is ``incomplete`` (it says it was cut); nothing at all is an
answer composed from the sub-agents' results. A turn cut by the session deadline is followed by one
short late turn; with no reply from it, the answer is composed from the results too
(``timed_out``).
"""

from __future__ import annotations

from baton.engine import StopReason, TurnResult
from baton.lead.answer import Answer
from baton.lead.checkpoint import LastTurn
from baton.lead.outcome import LeadOutcome, composed_answer
from baton.lead.roster import Roster

NO_ANSWER = "the lead gave no final answer"
CUT = "the final answer was cut at the output limit (max_tokens)"
CUT_TWICE = "the lead's final answer was cut at the output limit (max_tokens) twice"


def wants_final(result: TurnResult, answer: Answer) -> bool:
    """Whether a last turn gave no usable answer: cut, blocked, stopped, or silent."""
    if result.stop in (StopReason.BLOCKED, StopReason.HARD_STOP, StopReason.TRUNCATED):
        return True
    if result.stop is StopReason.TERMINAL and not answer.typed:
        return False  # a caller's own terminal tool ended the turn: its call is the reply
    return answer.silent


def last_turn(result: TurnResult, answer: Answer) -> LastTurn:
    """What the final answer needs of a turn that ended normally (it is checkpointed: a resumed
    lead whose sub-agents are all in answers from it)."""
    return LastTurn(
        reply=answer.text,
        status=answer.status,
        media=list(answer.media),
        wants_final=wants_final(result, answer),
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


def late_outcome(answer: Answer | None, roster: Roster, timeout_s: float) -> LeadOutcome:
    """The late turn's answer (None: it was cut too, or failed) as a ``timed_out`` answer, or one
    composed from the results when it gave none."""
    error = f"the session timed out after {timeout_s:g} s"
    reply = "" if answer is None else answer.text
    if not reply.strip():
        reply = composed_answer("The session timed out before the lead answered", roster)
    return LeadOutcome("timed_out", reply, error=error)
