"""The envelope: the one message shape on the bus, JSON on the wire, versioned with ``v``.

Validation is strict on purpose: a message that does not fit is refused with a reason that says
exactly what was wrong, because the receiving side moves it to the dead-letter stream with that
reason rather than guessing. The in-memory backend stores and re-validates the same JSON, so a
serialisation bug shows up without Redis.
"""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    JsonValue,
    SerializerFunctionWrapHandler,
    ValidationError,
    model_serializer,
    model_validator,
)

from baton.bus.errors import InvalidEnvelope
from baton.bus.events import utc_now
from baton.bus.ids import NAME_MAX, NAME_PATTERN, name_problem, new_id
from baton.bus.utf8 import not_utf8, printable, utf8_problem

WIRE_VERSION: Literal[1] = 1
DEFAULT_MAX_MESSAGE_BYTES = 1024 * 1024
MEDIA_SCHEMES = frozenset({"http", "https", "data", "file"})

MessageType = Literal[
    "task", "message", "progress", "result", "shutdown", "approval", "answer", "error"
]


def _check_media_url(url: str) -> str:
    scheme, sep, rest = url.partition(":")
    if not sep or not rest or scheme.lower() not in MEDIA_SCHEMES:
        allowed = ", ".join(sorted(MEDIA_SCHEMES))
        raise ValueError(f"media URL {url[:80]!r} has scheme {scheme[:20]!r}; allowed: {allowed}")
    return url


MediaUrl = Annotated[str, AfterValidator(_check_media_url)]
ID_MAX = 100
"""The longest envelope or spawn-request id."""
AgentName = Annotated[str, Field(min_length=1, max_length=NAME_MAX, pattern=NAME_PATTERN)]
SessionId = Annotated[str, Field(min_length=1, max_length=NAME_MAX, pattern=NAME_PATTERN)]
TRACEPARENT_MAX = 256
TRACESTATE_MAX = 1024


class TraceContext(BaseModel):
    """The W3C Trace Context (``traceparent``, ``tracestate``) of the span that sent a message.

    Only sizes and types are checked here: a ``traceparent`` that does not parse is ignored by the
    receiver (its work starts a trace of its own), as the W3C recommendation asks, because a
    broken trace must never cost the message it rides on.
    """

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid", strict=True)

    traceparent: str = Field(min_length=1, max_length=TRACEPARENT_MAX)
    tracestate: str = Field(default="", max_length=TRACESTATE_MAX)


_UNTRACED = {"trace"}
"""Left out of the wire form when empty, so an untraced message is byte for byte what it was
before the field existed (a reader of an older release refuses unknown fields)."""


class Envelope(BaseModel):
    """One message between agents (see DESIGN §2). ``id`` is the idempotency key."""

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid", strict=True)

    v: Literal[1] = WIRE_VERSION
    id: str = Field(default_factory=new_id, min_length=1, max_length=ID_MAX)
    session: SessionId
    sender: AgentName
    recipient: AgentName
    type: MessageType
    content: str = ""
    media_urls: list[MediaUrl] = Field(default_factory=list)
    reply_to: str | None = None
    created_at: datetime = Field(default_factory=utc_now)
    meta: dict[str, JsonValue] = Field(default_factory=dict)
    trace: TraceContext | None = None

    def to_json(self) -> str:
        return self.model_dump_json(exclude=_UNTRACED if self.trace is None else None)


def describe_error(exc: ValidationError) -> str:
    """The first few validation errors as one line: ``field: what was wrong; ...``."""
    parts = []
    for err in exc.errors(include_url=False)[:3]:
        where = ".".join(str(p) for p in err["loc"]) or "message"
        parts.append(f"{where}: {err['msg']}")
    return "; ".join(parts)


def parse_envelope(
    raw: str | bytes, *, max_bytes: int = DEFAULT_MAX_MESSAGE_BYTES, field: str = "msg"
) -> Envelope:
    """Validate one envelope from its JSON text (the stream entry's ``field``).

    Raises ``InvalidEnvelope`` with a one-line reason: not UTF-8, too large, not JSON, wrong
    types, unknown ``type``, a media URL with a scheme other than http/https/data/file.
    """
    if isinstance(raw, bytes) or raw.isascii():  # isascii is O(1): no second pass
        size = len(raw)
    else:
        try:  # the size in bytes, and the UTF-8 check of text read from Redis, in one pass
            size = len(raw.encode())
        except UnicodeEncodeError as exc:
            raise not_utf8(raw, field, exc) from None
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


LEAD_NAME = "lead"
"""The lead's agent name: its inbox, its events' ``agent``, the parent of every spawn request.
Here, with the messages it names, so that what needs only the name (the lead's keeper, the fold
of events) never imports the lead's prompt and, through it, the model client."""

DEFAULT_POOL = "default"
"""The pool of ``baton worker``s and of sessions without local workers unless told otherwise."""
LOCAL_POOL = "local"
"""A request's ``pool`` when the session hosts its sub-agents itself: only the worker inside that
session claims it (``docs/protocol.md``); no worker pool may take this name."""
POOL_MAX = 100
PoolName = Annotated[str, Field(min_length=1, max_length=POOL_MAX, pattern=NAME_PATTERN)]
"""Like a session id: it becomes part of Redis keys (``baton:spawn:{P}:...``)."""


def check_pool(name: str) -> str:
    """A pool name a worker may serve or a session may send to: well-formed and not ``local``.

    Raises ``ValueError`` with the reason (pydantic validators turn it into their own error).
    """
    problem = name_problem(name, "pool", max_len=POOL_MAX)
    if problem is not None:
        raise ValueError(problem)
    if name == LOCAL_POOL:
        raise ValueError(
            f"pool {LOCAL_POOL!r} is reserved for a session's own in-process worker; "
            "name the pool of external workers otherwise"
        )
    return name


ApproveMode = Literal["ask", "auto", "deny"]
"""How approvals are answered: ``ask`` a person, or ``auto``-approve / ``deny`` them by policy.

The one name of the approve mode, in the lowest layer that needs it: a session's setting, the
lead's, each sub-agent's, and what its spawn request carries (:attr:`SpawnRequest.approve`);
``baton`` re-exports it."""
APPROVE_MODES: tuple[ApproveMode, ...] = ("ask", "auto", "deny")
KEY_ID_MAX = 64
SPAWN_VERSION: Literal[2] = 2
"""The spawn request's wire version: 2 carries the approval policy and the signing key id as
fields of their own; a version-1 request (``meta.approve``, ``meta.key_id``) is still read
(docs/protocol.md, *Spawn requests*)."""
_V1_META = ("approve", "key_id")
"""The ``meta`` keys a version-1 request carried what version 2 has as fields."""


def _lift_v1_meta(data: Any) -> Any:
    """A version-1 request's ``meta.approve`` and ``meta.key_id`` become the fields version 2
    writes (a wrong value is still refused, by the field's own check); a version-2 request that
    puts them in ``meta`` is refused, since one of the two would be silently ignored."""
    if not isinstance(data, dict) or not isinstance(data.get("meta"), dict):
        return data
    meta = data["meta"]
    named = [key for key in _V1_META if key in meta]
    if not named:
        return data
    if data.get("v", 1) != 1:
        raise ValueError(
            f"meta.{named[0]} is version 1's; a version-{data.get('v')} request carries "
            f"{named[0]} as a field of its own"
        )
    lifted = {key: meta[key] for key in named}
    clash = [key for key in named if key in data and data[key] != lifted[key]]
    if clash:
        raise ValueError(f"{clash[0]} and meta.{clash[0]} disagree")
    rest = {key: value for key, value in meta.items() if key not in _V1_META}
    return {**data, **lifted, "meta": rest}


def _check_approve(value: object) -> ApproveMode:
    """Refuse a policy that is none of the three: guessing could approve a call that the session
    meant to deny (docs/protocol.md, *Approvals*)."""
    if isinstance(value, str) and value in APPROVE_MODES:
        return value
    raise ValueError(f"approve must be 'ask', 'auto' or 'deny', not {printable(repr(value)[:80])}")


def _check_key_id(value: object) -> str | None:
    if value is None or (isinstance(value, str) and len(value) <= KEY_ID_MAX):
        return value
    raise ValueError(
        f"key_id must be a key id (a string of at most {KEY_ID_MAX} characters), not "
        f"{printable(repr(value)[:80])}"
    )


class SpawnRequest(BaseModel):
    """A request to start a sub-agent from a profile; claimed by exactly one worker.

    ``pool`` routes it (``docs/protocol.md``): :data:`LOCAL_POOL` to the session's own worker,
    any other name to the workers of that pool that know ``profile``. ``approve`` carries the
    session's approval policy to whichever worker hosts the agent, and ``key_id`` the id of the
    session's signing key (``""``: it signs nothing; None: the producer did not say).
    """

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    v: Literal[1, 2] = SPAWN_VERSION
    id: str = Field(default_factory=new_id, min_length=1, max_length=ID_MAX)
    session: SessionId
    agent: AgentName
    profile: str = Field(min_length=1, max_length=200)
    parent: AgentName = LEAD_NAME
    pool: PoolName = DEFAULT_POOL
    created_at: datetime = Field(default_factory=utc_now)
    approve: Annotated[ApproveMode, BeforeValidator(_check_approve)] = "ask"
    key_id: Annotated[str | None, BeforeValidator(_check_key_id)] = None
    meta: dict[str, JsonValue] = Field(default_factory=dict)
    trace: TraceContext | None = None

    @model_validator(mode="before")
    @classmethod
    def _version_1(cls, data: Any) -> Any:
        return _lift_v1_meta(data)

    @model_serializer(mode="wrap")
    def _untraced(self, handler: SerializerFunctionWrapHandler) -> dict[str, object]:
        """Without a trace the request is written as before the field existed (see
        :data:`_UNTRACED`), and without a key id it leaves that out; spawn requests are few, so
        the wrap costs nothing that matters. Written, a request is always version 2."""
        data: dict[str, object] = handler(self)
        data["v"] = SPAWN_VERSION
        if self.trace is None:
            data.pop("trace", None)
        if self.key_id is None:
            data.pop("key_id", None)
        return data


REFUSAL_PREFIX = "refused-"


def refusal_id(request_id: str) -> str:
    """The id of the ``result`` a worker sends for a spawn request it refuses: the same on every
    claim (the lead dedupes a repeat, and knows it for the answer to its own request), and
    within the envelope's 100 characters whatever the request's id (a hash when it would not
    fit)."""
    readable = f"{REFUSAL_PREFIX}{request_id}"
    if len(readable) <= ID_MAX:
        return readable
    return f"{REFUSAL_PREFIX}{hashlib.sha256(request_id.encode()).hexdigest()[:40]}"


def parse_spawn_request(raw: str | bytes, *, field: str = "req") -> SpawnRequest:
    """Validate a spawn request (the stream entry's ``field``); raises ``InvalidEnvelope`` with
    the reason."""
    try:
        return SpawnRequest.model_validate_json(raw)
    except ValidationError as exc:
        if isinstance(raw, str) and utf8_problem(raw) is not None:  # checked only on failure
            raise not_utf8(raw, field) from None
        if any(e["type"] == "json_invalid" for e in exc.errors()):
            raise InvalidEnvelope(f"not valid JSON: {exc.errors()[0]['msg']}", raw) from exc
        raise InvalidEnvelope(f"invalid spawn request: {describe_error(exc)}", raw) from exc


def check_addressed(envelope: Envelope, session: str, agent: str) -> None:
    """Raise ``InvalidEnvelope`` unless the envelope is addressed to the inbox it was read from.

    A producer that writes to a stream by hand (``redis-cli XADD``, a bridge) can put an
    envelope in the wrong inbox; handing it out would make its reader act on another session's
    or another agent's message.
    """
    if envelope.session != session or envelope.recipient != agent:
        raise InvalidEnvelope(
            f"misaddressed envelope: it is for {envelope.recipient!r} in session "
            f"{envelope.session!r} but sits in the inbox of {agent!r} in session {session!r}",
            envelope.to_json(),
        )


Printable = Annotated[str, AfterValidator(printable)]


class DeadLetter(BaseModel):
    """A message that could not be delivered, with why and where it came from.

    ``raw`` keeps what was read, with any byte that was not UTF-8 written as a ``\\xNN`` escape:
    a dead letter must itself be safe to print, serialise and store (it would otherwise poison
    the dead-letter stream and whoever lists it).
    """

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    id: str
    reason: Printable
    source: Printable
    session: Printable | None = None
    raw: Printable
