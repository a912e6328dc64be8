"""A refused spawn request: the one ``result`` its agent ever sends, and the record that lets a
session deliver it when the refusing worker cannot.

A worker that cannot serve a request it claimed (a profile it lacks, an agent it cannot set up)
answers it at once with a final ``result`` from the agent (reason ``error``, id
``refused-<request id>``: :func:`~baton.bus.messages.refusal_id`), which the lead takes from an
agent no worker hosts because its id answers the lead's own request (docs/protocol.md, *Who may
say what*). One refusal cannot be delivered that way: a signing-key mismatch. The worker's
envelope would be signed with a key the lead does not have, and dead-lettered unread. So the
worker records the refusal in the agent's hash instead (field ``refusal``), and the session that
asked, which watches its own requests, sends that same result to its lead with its own key.
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, ValidationError

from baton.bus.messages import Envelope, refusal_id
from baton.bus.payloads import ResultReport

REFUSAL_FIELD = "refusal"
"""The agent hash's field holding a :class:`SpawnRefusal` (JSON)."""


class SpawnRefusal(BaseModel):
    """A worker's refusal of the spawn request ``spawn``, for the session to deliver."""

    model_config = ConfigDict(defer_build=True, frozen=True, extra="ignore")

    spawn: str
    """The refused request's id."""
    worker: str
    content: str
    """What the refusal result says (why, and what to do)."""

    def to_field(self) -> dict[str, str]:
        """The agent hash's fields that record it."""
        return {REFUSAL_FIELD: self.model_dump_json()}


def read_refusal(fields: Mapping[str, str]) -> SpawnRefusal | None:
    """The refusal an agent hash records, or None (none, or one that does not parse)."""
    raw = fields.get(REFUSAL_FIELD)
    if raw is None:
        return None
    try:
        return SpawnRefusal.model_validate_json(raw)
    except ValidationError:
        return None


def refusal_result(
    *, request_id: str, session: str, agent: str, parent: str, content: str
) -> Envelope:
    """The final ``result`` that refuses spawn request ``request_id``: from the agent to its
    parent, reason ``error``, with the id the parent knows it by. Raises ``ValueError`` (a
    pydantic ``ValidationError``) when no envelope can be made of it."""
    return Envelope(
        id=refusal_id(request_id),
        session=session,
        sender=agent,
        recipient=parent,
        type="result",
        content=content,
        meta=ResultReport(reason="error", steps=0).to_meta(),
    )
