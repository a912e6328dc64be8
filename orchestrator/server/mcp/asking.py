"""A question to a person (:mod:`baton.engine.questions`) as an MCP elicitation, and the host's
answer as the question's reply.

Every kind goes out in **form mode**, the one mode every eliciting host has (an empty
``elicitation`` capability means form only):

- an approval is ``{approved: boolean, reason: string}``; only an accepted form that says
  ``approved: true`` approves. A declined or dismissed dialog, or a form without a boolean
  ``approved``, declines the call (fail closed, as everywhere in baton), with a reason that says
  which.
- a file or an image is ``{url: string (uri)}``: an ``http(s)`` URL the asking agent can open, or
  a ``data:`` URL carrying the file itself (within the form's size). A declined or dismissed
  dialog cancels the question. URL mode is not used: it sends the person to a page that takes the
  upload out of band, which only ``baton serve`` has (``baton mcp`` has no page), and whose
  completion the host learns only by a separate notification; a form answers in the same call.

The reply goes through :func:`~baton.engine.questions.answer_question`, whose checks (the URL's
scheme, the types the question accepts) refuse a bad answer with one line and leave the question
open.
"""

from __future__ import annotations

from typing import Any

from baton.engine.questions import Cancelled, Decision, OpenQuestion, Provided, Reply
from baton.server.mcp.progress import short

APPROVAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "approved": {
            "type": "boolean",
            "title": "Approve",
            "description": "true: the call may run; false: it is declined",
        },
        "reason": {
            "type": "string",
            "title": "Reason",
            "description": "why (shown to the agent)",
        },
    },
    "required": ["approved"],
}
"""The form of an approval (the issue's ``{approved: boolean, reason: string}``)."""

FILE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "url": {
            "type": "string",
            "format": "uri",
            "title": "URL",
            "description": "an http(s) URL of the file, or a data: URL carrying it",
        },
    },
    "required": ["url"],
}
"""The form of a question for a file or an image."""


def elicitation_params(question: OpenQuestion) -> dict[str, Any]:
    """The ``elicitation/create`` params (form mode) that ask ``question``."""
    return {"mode": "form", "message": message_of(question), "requestedSchema": schema_of(question)}


def schema_of(question: OpenQuestion) -> dict[str, Any]:
    return APPROVAL_SCHEMA if question.kind == "approval" else FILE_SCHEMA


def message_of(question: OpenQuestion) -> str:
    """What the person reads: who asks, for what, and what answering does."""
    if question.kind == "approval":
        arguments = f" with {short(question.arguments, 400)}" if question.arguments else ""
        return (
            f"{question.agent} wants to run {question.tool}{arguments}. Approve it? "
            "(Declining, or closing this dialog, declines the call.)"
        )
    what = "a file" if question.kind == "upload" else "an image"
    accepted = f" ({', '.join(question.accept)})" if question.accept else ""
    return (
        f"{question.agent} asks for {what}{accepted}: {short(question.message, 400)}. Give an "
        "http(s) URL it can open, or a data: URL carrying the file. (Declining cancels.)"
    )


def reply_of(question: OpenQuestion, action: str, content: dict[str, Any] | None) -> Reply:
    """The question's reply from an elicitation's answer (``action``, ``content``)."""
    values = content or {}
    if question.kind == "approval":
        if action != "accept":
            said = "declined" if action == "decline" else "dismissed"
            return Decision(approved=False, reason=f"the person {said} it in the MCP host")
        approved = values.get("approved")
        reason = values.get("reason")
        reason = reason.strip() if isinstance(reason, str) else ""
        if approved is True:
            return Decision(approved=True, reason=reason or "approved in the MCP host")
        if approved is False:
            return Decision(approved=False, reason=reason or "declined in the MCP host")
        return Decision(
            approved=False, reason="the MCP host's answer did not say approved: true or false"
        )
    url = values.get("url")
    if action != "accept" or not isinstance(url, str) or not url.strip():
        said = {"decline": "declined", "cancel": "dismissed"}.get(action, "answered without a URL")
        return Cancelled(reason=f"the person {said} it in the MCP host")
    return Provided(url=url.strip())


def nobody_reply(question: OpenQuestion, why: str) -> Reply:
    """The reply when nobody can be asked: declined on the runtime's behalf (fail closed)."""
    if question.kind == "approval":
        return Decision(approved=False, reason=why, nobody=True)
    return Cancelled(reason=why, nobody=True)


def nobody_note(question: OpenQuestion, why: str) -> str:
    """What the result says of a question nobody could answer."""
    if question.kind == "approval":
        return (
            f"{question.agent}'s call of {question.tool} was declined: {why}; call run with "
            'approve="auto" to let such tools run without asking (where the server\'s approval '
            "policy allows it: --approve auto)"
        )
    what = "file" if question.kind == "upload" else "image"
    return f"{question.agent}'s request for a {what} was cancelled: {why}"
