"""What a person may put on the bus from outside a session: the user's words, never an agent's.

``baton post`` and ``POST /sessions/{id}/messages`` let anyone who can reach them write to a
session's inboxes. Were they free to pick the sender and the type, a forged ``result`` in an
agent's name would end that agent's work with the forger's text and media, and (``meta.final``
defaults to true) land in the session's answer. So both send as ``user`` and only what a person
says: a task or a message. Approval answers have their own way in, built from the pending question
(``baton approve``, the approvals route), and shutting a session down is cancelling it.
"""

from __future__ import annotations

from typing import Final

USER: Final = "user"
"""The sender of everything a person posts."""
USER_TYPES: Final = ("task", "message")
"""The envelope types a person may post."""


def user_post_problem(sender: str, kind: str) -> str | None:
    """Why a post from outside may not go out as asked (one line that says what to do), or None.

    ``sender`` and ``kind`` are what was asked for (``--from`` and ``--type``).
    """
    if sender != USER:
        return (
            f"posts are sent as {USER!r} only, not as {sender!r}: an agent's messages come from "
            "the agent itself (drop --from)"
        )
    if kind not in USER_TYPES:
        hint = _HINTS.get(kind, "a person posts a task or a message")
        return f"a post is a task or a message from the user, not {kind!r} ({hint})"
    return None


_HINTS: Final = {
    "result": "an agent's result comes from the agent itself",
    "progress": "an agent's progress comes from the agent itself",
    "approval": "answer an approval with `baton approve`",
    "answer": "answer a question for a file or an image with `baton upload`",
    "shutdown": "a person stops a session with `baton cancel SESSION`",
}
