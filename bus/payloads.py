"""Typed payloads: what ``Envelope.meta`` carries for the envelope types that have one.

Four envelope types carry data the receiver acts on: an ``approval`` answers a tool call
(``call_id``, ``approved``, ``reason``), an ``answer`` replies to a question for a file or an image
(``question_id``, ``outcome``, ``url``), a ``result`` says whether it is the sender's last word
and why it left (``final``, ``reason``, ``steps``), and both a ``result`` and a ``progress`` say
which claim of the agent sent them (``owner``). The wire is unchanged (the payload is the
``meta`` object, see docs/protocol.md); these models give both ends one definition of it.

A payload that does not fit is refused like any malformed envelope, with ``InvalidEnvelope`` and a
reason saying exactly what was wrong: the inbox reader moves such an envelope to the dead letters
instead of guessing (``"approved": "yes"`` is not an approval). Unknown keys are ignored, so
``meta`` stays open for extensions.
"""

from __future__ import annotations

from typing import ClassVar, Literal, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    StrictBool,
    StrictStr,
    ValidationError,
    field_validator,
    model_validator,
)

from baton.bus.errors import InvalidEnvelope
from baton.bus.messages import Envelope, describe_error

MEDIA_URL_MAX = 8192
"""The longest URL an answer may carry (a presigned bucket URL fits); a longer ``data:`` URL is
refused at the surface, which says to upload the file instead."""


class Payload(BaseModel):
    """Base of the typed ``meta`` payloads: strict types, unknown keys ignored."""

    model_config = ConfigDict(defer_build=True, frozen=True, extra="ignore", strict=True)

    OMIT_EMPTY: ClassVar[frozenset[str]] = frozenset()
    """Keys left out of ``meta`` while empty (``""``, ``false``): added later, they leave the
    wire as it was."""

    def to_meta(self) -> dict[str, JsonValue]:
        """The payload as the envelope's ``meta`` object."""
        meta: dict[str, JsonValue] = self.model_dump(mode="json")
        for name in self.OMIT_EMPTY:
            if name in meta and not meta[name]:
                del meta[name]
        return meta


class ApprovalAnswer(Payload):
    """A decision on one tool call (an ``approval`` envelope to ``<agent>.approvals``): a
    person's, or with ``nobody`` set, the runtime's when no person could be asked (it declines,
    and says so rather than "the user declined it")."""

    call_id: StrictStr = Field(min_length=1, max_length=200)
    approved: StrictBool
    reason: StrictStr = ""
    nobody: StrictBool = False

    OMIT_EMPTY: ClassVar[frozenset[str]] = frozenset({"nobody"})


class QuestionReply(Payload):
    """A person's answer to a question for a file or an image (an ``answer`` envelope to
    ``<agent>.approvals``): ``provided`` with the URL where the file now is (the answering side
    stored it first), or ``cancelled``. The asking agent checks the media type against what it
    accepts, so a reply it cannot use is refused there too, not only by the surface."""

    question_id: StrictStr = Field(min_length=1, max_length=200)
    outcome: Literal["provided", "cancelled"]
    url: StrictStr = Field(default="", max_length=MEDIA_URL_MAX)
    name: StrictStr = Field(default="", max_length=300)
    media_type: StrictStr = Field(default="", max_length=200)
    reason: StrictStr = Field(default="", max_length=1000)
    nobody: StrictBool = False
    """Cancelled because no person could be asked (as for an approval)."""

    OMIT_EMPTY: ClassVar[frozenset[str]] = frozenset(
        {"url", "name", "media_type", "reason", "nobody"}
    )

    @model_validator(mode="after")
    def _url_when_provided(self) -> QuestionReply:
        if self.outcome == "provided" and not self.url:
            raise ValueError("a provided answer needs its url")
        return self


TOOL_ERRORS_MAX = 20
"""The most tool errors a result carries (one per failing tool)."""
TOOL_ERROR_CHARS = 500
"""The longest tool error a result carries."""
OWNER_MAX = 400
"""The longest ``owner`` a report may carry (a worker's name and a claim's receipt)."""


class ResultReport(Payload):
    """How a sub-agent's ``result`` envelope ends its work.

    ``final`` is True unless said otherwise (a bare ``result`` from a foreign producer is its last
    word; the lead takes one only from an agent it spawned, from its owner: docs/protocol.md,
    *Who may say what*); ``reason`` is the exit kind (``finished``, ``idle``, ``shutdown``,
    ``max_steps``, ``error``, ``cancelled``; the lead hands unseen tasks on only after
    ``finished``); ``owner`` is the claim the sender runs under, as the agent's hash records it.
    """

    final: StrictBool = True
    reason: StrictStr = Field(default="", max_length=100)
    steps: int = Field(default=0, ge=0)
    owner: StrictStr = Field(default="", max_length=OWNER_MAX)
    tool_errors: list[StrictStr] = Field(default_factory=list)
    """What the agent's failing tools said in its last round (at most :data:`TOOL_ERRORS_MAX`,
    each cut to :data:`TOOL_ERROR_CHARS`): the structural fact that its work did not get done as
    asked, whatever its text says."""

    OMIT_EMPTY: ClassVar[frozenset[str]] = frozenset({"owner", "tool_errors"})

    @field_validator("tool_errors", mode="before")
    @classmethod
    def _cut(cls, value: object) -> object:
        if isinstance(value, list):
            return [v[:TOOL_ERROR_CHARS] if isinstance(v, str) else v for v in value][
                :TOOL_ERRORS_MAX
            ]
        return value


class ProgressReport(Payload):
    """Who sends a sub-agent's ``progress``: the claim it runs under, as for a result."""

    owner: StrictStr = Field(default="", max_length=OWNER_MAX)

    OMIT_EMPTY: ClassVar[frozenset[str]] = frozenset({"owner"})


PAYLOADS: dict[str, type[Payload]] = {
    "approval": ApprovalAnswer,
    "answer": QuestionReply,
    "result": ResultReport,
    "progress": ProgressReport,
}
"""Envelope type → the model its ``meta`` must fit."""


P = TypeVar("P", bound=Payload)


def _parse(model: type[P], envelope: Envelope) -> P:
    try:
        return model.model_validate(envelope.meta)
    except ValidationError as exc:
        reason = f"invalid {envelope.type} payload in meta: {describe_error(exc)}"
        raise InvalidEnvelope(reason, envelope.to_json()) from exc


def approval_answer(envelope: Envelope) -> ApprovalAnswer:
    """The decision an ``approval`` envelope carries; raises ``InvalidEnvelope`` if malformed."""
    return _parse(ApprovalAnswer, envelope)


def question_reply(envelope: Envelope) -> QuestionReply:
    """The answer an ``answer`` envelope carries; raises ``InvalidEnvelope`` if malformed."""
    return _parse(QuestionReply, envelope)


def result_report(envelope: Envelope) -> ResultReport:
    """How a ``result`` envelope ends its sender's work; raises ``InvalidEnvelope`` if malformed."""
    return _parse(ResultReport, envelope)


def owner_of(envelope: Envelope) -> str:
    """The owner a ``result`` or ``progress`` says it is sent by (``""`` when it names none, or
    for another type); one whose ``meta.owner`` is no string is dead-lettered on read."""
    owner = envelope.meta.get("owner", "")
    return owner if isinstance(owner, str) else ""


def check_payload(envelope: Envelope) -> None:
    """Raise ``InvalidEnvelope`` when the envelope's type has a payload and ``meta`` misfits it."""
    model = PAYLOADS.get(envelope.type)
    if model is not None:
        _parse(model, envelope)
