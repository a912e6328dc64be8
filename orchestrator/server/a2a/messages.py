"""What a client's A2A message says: its text, and as an answer to an approval, its verdict.

An approval is answered by the next message on the task (docs/a2a.md). Only a clear yes
approves; anything else, an unclear word or an empty message, declines: an approval fails
closed, as everywhere in baton (docs/protocol.md, *Approvals*). A ``data`` part
``{"approved": true|false, "reason": "..."}`` says it without words.
"""

from __future__ import annotations

from dataclasses import dataclass

from a2a.types import Message
from a2a.utils.errors import ContentTypeNotSupportedError

YES = frozenset({"approve", "approved", "yes", "y", "ok", "okay", "allow", "allowed", "accept"})


@dataclass(frozen=True, slots=True)
class Verdict:
    approved: bool
    reason: str


def text_of(message: Message) -> str:
    """The message's text parts, joined by blank lines."""
    return "\n\n".join(part.text for part in message.parts if part.HasField("text")).strip()


def refuse_other_parts(message: Message, *, answering: bool) -> None:
    """Refuse a message with parts baton would not read (a file, a URL, data outside an
    approval's answer), rather than start or continue a task with them silently dropped."""
    for index, part in enumerate(message.parts):
        kind = part.WhichOneof("content")
        if kind == "text" or (kind == "data" and answering):
            continue
        raise ContentTypeNotSupportedError(
            f"part {index} is {kind or 'empty'}{f' ({part.media_type})' if part.media_type else ''}"
            ": baton takes text parts only (and a data part answering an approval); put what "
            "the task needs in words, or a link in the text"
        )


def verdict_of(message: Message) -> Verdict:
    """The answer a message gives to the approvals its task waits for (fails closed)."""
    for part in message.parts:
        if part.HasField("data") and part.data.WhichOneof("kind") == "struct_value":
            fields = part.data.struct_value.fields
            if "approved" in fields and fields["approved"].WhichOneof("kind") == "bool_value":
                reason = fields["reason"].string_value if "reason" in fields else ""
                return Verdict(bool(fields["approved"].bool_value), str(reason)[:500])
    text = text_of(message)
    first = text.split(maxsplit=1)[0].strip(".,!:;").lower() if text else ""
    if first in YES:
        return Verdict(True, text[:500])
    reason = text[:500] if text else "no answer given"
    return Verdict(False, reason if first in ("deny", "no", "decline") else f"unclear: {reason}")
