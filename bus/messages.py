"""The envelope: the one message shape on the bus, JSON on the wire, versioned with ``v``.

Validation is strict on purpose: a message that does not fit is refused with a reason that says
exactly what was wrong, because the receiving side moves it to the dead-letter stream with that
reason rather than guessing. The in-memory backend stores and re-validates the same JSON, so a
serialisation bug shows up without Redis.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    ValidationError,
)

from baton.bus.errors import InvalidEnvelope
from baton.bus.events import utc_now
from baton.bus.ids import new_id

WIRE_VERSION: Literal[1] = 1
DEFAULT_MAX_MESSAGE_BYTES = 1024 * 1024
MEDIA_SCHEMES = frozenset({"http", "https", "data", "file"})

MessageType = Literal["task", "message", "progress", "result", "shutdown", "approval", "error"]


def _check_media_url(url: str) -> str:
    scheme, sep, rest = url.partition(":")
    if not sep or not rest or scheme.lower() not in MEDIA_SCHEMES:
        allowed = ", ".join(sorted(MEDIA_SCHEMES))
        raise ValueError(f"media URL {url[:80]!r} has scheme {scheme[:20]!r}; allowed: {allowed}")
    return url


MediaUrl = Annotated[str, AfterValidator(_check_media_url)]
AgentName = Annotated[str, Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9_.\-]+$")]
SessionId = Annotated[str, Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9_.\-]+$")]


class Envelope(BaseModel):
    """One message between agents (see DESIGN §2). ``id`` is the idempotency key."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    v: Literal[1] = WIRE_VERSION
    id: str = Field(default_factory=new_id, min_length=1, max_length=100)
    session: SessionId
    sender: AgentName
    recipient: AgentName
    type: MessageType
    content: str = ""
    media_urls: list[MediaUrl] = Field(default_factory=list)
    reply_to: str | None = None
    created_at: datetime = Field(default_factory=utc_now)
    meta: dict[str, JsonValue] = Field(default_factory=dict)

    def to_json(self) -> str:
        return self.model_dump_json()


def describe_error(exc: ValidationError) -> str:
    """The first few validation errors as one line: ``field: what was wrong; ...``."""
    parts = []
    for err in exc.errors(include_url=False)[:3]:
        where = ".".join(str(p) for p in err["loc"]) or "message"
        parts.append(f"{where}: {err['msg']}")
    return "; ".join(parts)


def parse_envelope(raw: str | bytes, *, max_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> Envelope:
    """Validate one envelope from its JSON text.

    Raises ``InvalidEnvelope`` with a one-line reason: too large, not JSON, wrong types, unknown
    ``type``, a media URL with a scheme other than http/https/data/file.
    """
    size = len(raw) if isinstance(raw, bytes) else len(raw.encode())
    if size > max_bytes:
        raise InvalidEnvelope(f"message is {size} bytes, over the limit of {max_bytes}", raw)
    try:
        # Strict mode refuses "1" for an int; JSON input still parses datetimes from strings.
        envelope = Envelope.model_validate_json(raw)
    except ValidationError as exc:
        if any(e["type"] == "json_invalid" for e in exc.errors()):
            raise InvalidEnvelope(f"not valid JSON: {exc.errors()[0]['msg']}", raw) from exc
        raise InvalidEnvelope(f"invalid envelope: {describe_error(exc)}", raw) from exc
    if "id" not in envelope.model_fields_set:
        # The id is the idempotency key: one invented here would differ on every redelivery.
        raise InvalidEnvelope("invalid envelope: id: Field required", raw)
    return envelope


def encode_envelope(envelope: Envelope, *, max_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> str:
    """The wire form of an envelope; refuses one over the size limit before it is sent."""
    raw = envelope.to_json()
    if len(raw) > max_bytes:  # cheap pre-check on characters; exact on bytes below
        size = len(raw.encode())
        if size > max_bytes:
            raise InvalidEnvelope(f"message is {size} bytes, over the limit of {max_bytes}")
    return raw


def make_envelope(**fields: Any) -> Envelope:
    """Build an envelope from Python values, mapping a validation failure to ``InvalidEnvelope``."""
    try:
        return Envelope.model_validate(fields, strict=False)
    except ValidationError as exc:
        raise InvalidEnvelope(f"invalid envelope: {describe_error(exc)}") from exc


class SpawnRequest(BaseModel):
    """A request to start a sub-agent from a profile; claimed by exactly one worker."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    v: Literal[1] = WIRE_VERSION
    id: str = Field(default_factory=new_id, min_length=1, max_length=100)
    session: SessionId
    agent: AgentName
    profile: str = Field(min_length=1, max_length=200)
    parent: AgentName = "lead"
    created_at: datetime = Field(default_factory=utc_now)
    meta: dict[str, JsonValue] = Field(default_factory=dict)


def parse_spawn_request(raw: str | bytes) -> SpawnRequest:
    """Validate a spawn request; raises ``InvalidEnvelope`` with the reason."""
    try:
        return SpawnRequest.model_validate_json(raw)
    except ValidationError as exc:
        if any(e["type"] == "json_invalid" for e in exc.errors()):
            raise InvalidEnvelope(f"not valid JSON: {exc.errors()[0]['msg']}", raw) from exc
        raise InvalidEnvelope(f"invalid spawn request: {describe_error(exc)}", raw) from exc


class DeadLetter(BaseModel):
    """A message that could not be delivered, with why and where it came from."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    reason: str
    source: str
    session: str | None = None
    raw: str
