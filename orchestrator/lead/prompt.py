"""What the lead reads: its system prompt, and its inbox rendered as context.

The inbox format is the one :mod:`baton.llm.offline` documents (``[<type> from <sender>]
content`` blocks with a ``media:`` line), because the offline model parses exactly that and a real
model reads it just as well. Reports from sub-agents and follow-ups from people go into *separate*
user messages, reports first: the newest plain request then stays the last thing the lead reads,
and a model never mistakes a sub-agent's words for the user's.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from baton.bus.messages import LEAD_NAME as LEAD_NAME
from baton.bus.messages import Envelope
from baton.bus.payloads import result_report
from baton.llm.offline import LEAD_MARKER
from baton.llm.types import Message

_BASE = f"""{LEAD_MARKER} You are the lead agent of a team. You talk to the user and delegate work.

To delegate, call send_message(to=<profile>, content=<a self-contained task>, type="task"): each
such call starts a NEW sub-agent of that profile (named after it: painter, painter-2, ...), so
independent tasks run in parallel: one call per task, several calls in one reply. Give each
sub-agent everything it needs in the task: it sees nothing else. You have no tools of your own
besides these: whatever a profile below does (a picture, a text, ...) you cannot do yourself, so
delegate it, and never claim it is done before its result arrives. Answer a plain question
yourself, without delegating. When the user asks for several separate things (three pictures, two
poems), make one call with items=[one entry per thing]: each item gets its own sub-agent.

To follow up with a running sub-agent (it keeps its context), call send_message with its name
(e.g. "painter-2", or "painter" with type="message"). type="shutdown" stops one.

After delegating, answer briefly and stop: do not wait or poll, and do not send the same task
again. Each sub-agent's progress and final result arrive in your inbox as blocks like
"[result from painter] ..." with a "media: <url> ..." line, and you are called again once they are
in. Your final answer must cite every sub-agent's result and list every media URL they produced,
exactly as given. Never make up a URL."""


_ANSWER_FIELDS = """Its text is all the user sees; status is "done" when you answered yourself,
"delegated" when you sent the work with send_message and it is under way, "cannot" when neither
you nor any sub-agent can do it; media lists the media URLs your sub-agents reported that the
answer presents, exactly as given."""

ANSWER_RULE = f"""You must call a tool in every reply: to reply to the user (your answer, or a short
note after delegating), call answer(text, status, media). {_ANSWER_FIELDS}"""

ANSWER_OPTION = f"""To reply to the user, call answer(text, status, media), or write your reply as
plain text. {_ANSWER_FIELDS} Never write a tool call as text."""

FINAL_NOTE = """All delegated work is in, but you gave no final answer. Answer the user now, in
plain text, from the results above: cite every sub-agent's result and every media URL exactly as
given. Do not delegate again."""

OWN_FINAL_NOTE = """You gave no final answer. Answer the user's request now yourself, in plain
text."""
"""The note asking for the answer when nothing was delegated: saying that delegated work is in, a
1.5B lead that had delegated nothing answered "the answer you provided did not include a final
answer from the sub-agent"."""


def final_note(delegated: bool) -> str:
    """The note asking for the final answer, true to whether any work was delegated."""
    return FINAL_NOTE if delegated else OWN_FINAL_NOTE


def listing(profiles: Mapping[str, str]) -> str:
    """The profiles in one line, as every note and the routing call show them."""
    return "; ".join(f"{name}: {description}" for name, description in profiles.items())


def cannot_note(profiles: Mapping[str, str]) -> str:
    """The note that sends back an answer whose status was ``cannot`` while nothing was delegated:
    the profiles again, and the two ways on."""
    listed = listing(profiles)
    return (
        "You answered that this cannot be done, without delegating anything. Your sub-agents can "
        f"do work you cannot ({listed}). If any part of the request is work one of them does, "
        "delegate that part now with send_message, one call per task. If none of them can, "
        'answer again with status "cannot" and say why.'
    )


def unsent_note(profiles: Mapping[str, str]) -> str:
    """The note that sends back an answer whose status was ``delegated`` while nothing was sent."""
    return (
        "Your answer says the work is delegated, but you sent nothing: no sub-agent is working on "
        f"this request. Your sub-agents: {listing(profiles)}. Delegate the work now with "
        "send_message, one call per task; or, if you answered the request yourself, answer again "
        'with status "done".'
    )


def all_in_note(media: Sequence[str]) -> str:
    """The note that sends back an answer whose status was ``delegated`` although every result is
    in and no sub-agent works any more."""
    urls = f" The media URLs: {' '.join(media)}." if media else ""
    return (
        "Your answer says the work is still under way, but all the work you delegated is in: the "
        "results are above, and no sub-agent is working. Answer the user now with what they "
        'delivered, citing every media URL exactly, with status "done" (or "cannot", saying '
        f"why).{urls}"
    )


def invented_note(invented: Sequence[str], media: Sequence[str]) -> str:
    """The note that sends back an answer presenting media no tool produced."""
    reported = (
        f" Your sub-agents reported these: {' '.join(media)}."
        if media
        else " No sub-agent has reported any."
    )
    return (
        f"Your answer presents media that no tool produced: {' '.join(invented)}. Only the URLs "
        f"your sub-agents report exist.{reported} Delegate the work that makes the media, or "
        "answer again without URLs nobody gave you."
    )


def news_first(senders: Sequence[str]) -> str:
    """A send the model decided before it saw results that have since come in: not made."""
    return (
        f"Not sent: {', '.join(senders)} reported after you last saw your inbox, and you have not "
        "read it yet. This turn ends now so you can: you will be called again with the results, "
        "and can send this then if it is still needed."
    )


def waves_note(media: Sequence[str], outstanding: Sequence[str]) -> str:
    """The note once this request's delegation waves are spent: answer from the results now."""
    pending = (
        f" Still working: {', '.join(outstanding)}; their results will reach the user."
        if outstanding
        else " All delegated work is in."
    )
    urls = f" The media URLs: {' '.join(media)}." if media else ""
    return (
        f"You have delegated enough for this request.{pending} Do not delegate again: answer the "
        f"user now from the results above, citing every media URL exactly.{urls}"
    )


def system_prompt(
    profiles: Mapping[str, str],
    extra: str | None = None,
    *,
    answer_tool: bool = False,
    must_call: bool = False,
) -> str:
    """The lead's system prompt: the rules above (and the ``answer`` tool's, when it is offered:
    the only way to reply when ``must_call``, else beside plain text), the available profiles,
    the caller's extra."""
    rule = ANSWER_RULE if must_call else ANSWER_OPTION
    lines = [_BASE, *(["", rule] if answer_tool else [])]
    lines += ["", "Sub-agent profiles you can start (name: what it does):"]
    lines += [f"- {name}: {description}" for name, description in profiles.items()]
    if extra:
        lines += ["", extra.strip()]
    return "\n".join(lines)


_HEADER_LIKE = re.compile(r"^\[([\w-]+ from [^\]]+)\]", re.MULTILINE)


def defuse(content: str) -> str:
    """Neutralise lines of a message that look like block headers (``[task from lead]``), so a
    sub-agent that quotes its inbox — or one that tries — cannot start a block in another's name."""
    return _HEADER_LIKE.sub(r"(\1)", content)


def inbox_block(envelope: Envelope) -> str:
    """One envelope as an inbox block (offline.py's format), its content defused."""
    block = f"[{envelope.type} from {envelope.sender}] {defuse(envelope.content)}"
    if envelope.media_urls:
        block += "\nmedia: " + " ".join(envelope.media_urls)
    if envelope.type == "result":
        failed = result_report(envelope).tool_errors
        if failed:  # what the runtime saw, whatever the agent's words say
            block += "\ntools failed: " + " | ".join(defuse(" ".join(e.split())) for e in failed)
    return block


def inbox_messages(reports: Sequence[Envelope], requests: Sequence[Envelope]) -> list[Message]:
    """Sub-agent reports as one user message, then people's follow-ups as another."""
    messages: list[Message] = []
    for group in (reports, requests):
        if group:
            text = "\n\n".join(inbox_block(envelope) for envelope in group)
            messages.append({"role": "user", "content": text})
    return messages


def note_block(kind: str, text: str) -> Message:
    """A note from the session itself (a timeout, say), in the same block format."""
    return {"role": "user", "content": f"[{kind} from session] {text}"}
