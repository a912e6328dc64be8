"""The session event log's payloads: one typed, discriminated union.

Every observer of a session — the CLI live view, ``baton watch``, the SSE endpoint, the web page —
reads these same events from the session's event log, so they are the public record of what
happened. They travel as JSON with a ``type`` discriminator; unknown fields are refused so a
producer bug shows up at the first read rather than as a silently missing field.
"""

from __future__ import annotations

import functools
from datetime import UTC, datetime
from typing import Annotated, Any, Literal, cast, get_args

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter


def utc_now() -> datetime:
    """The current time, timezone-aware in UTC (naive datetimes never enter the wire format)."""
    return datetime.now(UTC)


class _Event(BaseModel):
    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    session: str
    agent: str = Field(description="who emitted it: 'lead', a sub-agent name, 'bus' or 'user'")
    ts: datetime = Field(default_factory=utc_now)


class ToolCallInfo(BaseModel):
    """One tool call the model asked for, as shown to observers."""

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    call_id: str
    name: str
    arguments: str


class ToolResultInfo(BaseModel):
    """The answer given for one tool call; ``synthetic`` when governance answered instead."""

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    call_id: str
    name: str
    content: str
    is_error: bool = False
    synthetic: bool = False


class SessionStarted(_Event):
    type: Literal["session.started"] = "session.started"
    task: str
    model: str = ""
    offline: bool = False
    resumed: bool = False
    """A lead that died was resumed (``baton resume``): the session goes on from its checkpoint."""


class SessionFinished(_Event):
    type: Literal["session.finished"] = "session.finished"
    status: Literal["completed", "incomplete", "failed", "cancelled", "timed_out"]
    answer: str = ""
    media_urls: list[str] = Field(default_factory=list)
    invented_urls: list[str] = Field(default_factory=list)
    """URLs the answer cites that no tool produced (see ``answer.checked``)."""


class TextDelta(_Event):
    """Streamed model text; on the bus the lead's deltas are coalesced into larger pieces."""

    type: Literal["text.delta"] = "text.delta"
    text: str


class RoundStarted(_Event):
    type: Literal["round.started"] = "round.started"
    round: int


class RoundEnded(_Event):
    type: Literal["round.ended"] = "round.ended"
    round: int
    tool_calls: list[ToolCallInfo] = Field(default_factory=list)
    results: list[ToolResultInfo] = Field(default_factory=list)


class ToolCalled(_Event):
    type: Literal["tool.call"] = "tool.call"
    call: ToolCallInfo


class ToolResulted(_Event):
    type: Literal["tool.result"] = "tool.result"
    result: ToolResultInfo


class GuardFired(_Event):
    """A governance guard answered a call instead of running it (outcomes of ``chat.tool.loop``)."""

    type: Literal["guard.fired"] = "guard.fired"
    outcome: Literal[
        "wrap-up",
        "hard-stop",
        "cancelled",
        "repeated",
        "declined-repeat",
        "interaction-budget",
        "send-cap",
        "quoted",
        "blocked-rounds",
        "length",
        "runaway",
        "budget",
    ]
    call_id: str | None = None
    tool: str | None = None


class ApprovalRequested(_Event):
    type: Literal["approval.requested"] = "approval.requested"
    calls: list[ToolCallInfo]
    expires_at: datetime | None = None
    """When the agent stops waiting and declines what is still undecided (None in logs written
    before it was recorded)."""
    policy: Literal["auto", "deny"] | None = None
    """The session's policy, when it answers the question itself: nobody is asked, so no surface
    shows it as open (its ``approval.decided`` follows at once). None: a person is asked."""


class ApprovalDecided(_Event):
    """``policy`` is the session's policy when it decided (nobody was asked: ``auto``, ``deny``),
    ``nobody`` when no person could be asked and the call was declined for that, else None (a
    person decided)."""

    type: Literal["approval.decided"] = "approval.decided"
    call_id: str
    approved: bool
    reason: str = ""
    policy: Literal["auto", "deny", "nobody"] | None = None


QuestionKind = Literal["upload", "image"]
QuestionOutcome = Literal["provided", "cancelled", "expired", "closed", "failed"]


def asked_for(kind: str) -> str:
    """What a question of ``kind`` asks a person for, in two words: every surface says it so."""
    return {"upload": "a file", "image": "an image"}.get(kind, "a decision")


class QuestionAsked(_Event):
    """An agent asks a person for a file (``request_file_upload``) or an image
    (``describe_image`` with nothing it could resolve), and waits until ``expires_at``.
    Answered by an ``answer`` envelope to ``<agent>.approvals`` (docs/protocol.md, *Questions*)."""

    type: Literal["question.asked"] = "question.asked"
    question_id: str
    kind: QuestionKind
    call_id: str
    prompt: str = ""
    accept: list[str] = Field(default_factory=list)
    """Media types (``image/png``, ``image/*``) or extensions (``.csv``) it takes; empty: any."""
    reference: str = ""
    """For an image: what the model named and baton could not resolve."""
    expires_at: datetime


class QuestionAnswered(_Event):
    """How a :class:`QuestionAsked` ended: ``provided`` (``url``, ``name``, ``media_type``),
    ``cancelled`` by the person, ``expired`` (nobody answered in time), ``closed`` (the turn or
    the agent ended first) or ``failed`` (the answer could not be used: ``reason``)."""

    type: Literal["question.answered"] = "question.answered"
    question_id: str
    outcome: QuestionOutcome
    url: str = ""
    name: str = ""
    media_type: str = ""
    reason: str = ""


class AgentSpawned(_Event):
    """The lead started a sub-agent (queued its spawn request): one per sub-agent. Which worker
    runs it is :class:`AgentClaimed`."""

    type: Literal["agent.spawned"] = "agent.spawned"
    profile: str
    worker: str = ""
    """Always empty now; kept so that logs written before :class:`AgentClaimed` existed (when a
    worker logged a second ``agent.spawned`` naming itself here) still read."""


class AgentClaimed(_Event):
    """A worker claimed a sub-agent's spawn request and runs it (again, after a takeover: the
    worker that resumes an agent whose worker died logs one too)."""

    type: Literal["agent.claimed"] = "agent.claimed"
    profile: str
    worker: str


class AgentUnclaimed(_Event):
    """No worker claimed a sub-agent's spawn request within the session's bound
    (``SessionConfig.unclaimed_s``): logged once per agent by the session that asked.
    ``workers`` is how many live workers of ``pool`` serve ``profile`` (0: none, and the agent
    is ended: its ``agent.result`` and ``agent.exited`` follow); None for the session's own
    worker (``pool`` ``local``), which is busy with as many agents as it may host."""

    type: Literal["agent.unclaimed"] = "agent.unclaimed"
    profile: str
    pool: str
    waited_s: float
    workers: int | None = None


class AgentProgress(_Event):
    type: Literal["agent.progress"] = "agent.progress"
    content: str


class AgentResult(_Event):
    type: Literal["agent.result"] = "agent.result"
    content: str
    media_urls: list[str] = Field(default_factory=list)


class AgentExited(_Event):
    type: Literal["agent.exited"] = "agent.exited"
    reason: Literal[
        "finished", "idle", "shutdown", "max_steps", "round_limit", "error", "cancelled", "budget"
    ]


class ErrorEvent(_Event):
    """Something went wrong that observers should see (model fault, dead-lettered message, ...)."""

    type: Literal["error"] = "error"
    message: str
    detail: dict[str, Any] = Field(default_factory=dict)


class ModelRetried(_Event):
    """The model client is about to try a request again: shown so a retry is never invisible."""

    type: Literal["model.retried"] = "model.retried"
    attempt: int
    """The attempt that failed (1 = the first request)."""
    reason: str
    delay_s: float
    """How long the client waits before the next attempt."""
    model: str = ""


RETRACTED_SENT_BACK = "sent back"
"""``text.retracted`` ``why``: the policy did not take the lead's reply as the answer (sent back,
asked again, or the request routed)."""
RETRACTED_DEADLINE = "cut by the deadline"
"""``text.retracted`` ``why``: the session deadline cut the lead's reply; a late answer follows."""


class TextRetracted(_Event):
    """Text this agent streamed belongs to a reply that failed and is being retried: views drop
    the agent's text of the current reply (``chars`` of it) before the retry streams anew."""

    type: Literal["text.retracted"] = "text.retracted"
    chars: int
    why: str = ""
    """Why, when the reply is not being retried after a failure: :data:`RETRACTED_SENT_BACK`,
    :data:`RETRACTED_DEADLINE`."""


class BudgetUpdated(_Event):
    """The session's spend so far across the lead and every sub-agent, after a model call."""

    type: Literal["budget.updated"] = "budget.updated"
    calls: int
    tokens: int
    max_calls: int | None = None
    max_tokens: int | None = None


class ModelUsage(_Event):
    """What one model request of this agent cost, as the server counted it (``usage`` of the
    reply; estimated from the characters for a reply stopped as a runaway, whose count never
    came). Logged for every request whose usage is known, budget or not, so a view can sum a
    session's tokens per model across the lead and every sub-agent, wherever they ran."""

    type: Literal["model.usage"] = "model.usage"
    model: str
    input_tokens: int = Field(ge=0)
    output_tokens: int = Field(ge=0)
    total_tokens: int = Field(ge=0)
    estimated: bool = False
    """Counted by baton from the characters (a runaway reply), not reported by the server."""


class AnswerChecked(_Event):
    """The lead's final answer checked against what the tools produced."""

    type: Literal["answer.checked"] = "answer.checked"
    missing_media: list[str] = Field(default_factory=list)
    """Media URLs sub-agents produced that the answer left out (baton appended them)."""
    missing_items: list[str] = Field(default_factory=list)
    """Deliverables the lead declared (``send_message`` ``items``) that got no result: the
    session is then ``incomplete``."""
    invented_urls: list[str] = Field(default_factory=list)
    """URLs in the answer that no tool produced."""
    composed: bool = False
    """The lead gave no final answer, even asked once more: baton composed it from the
    sub-agents' reports (the answer says so)."""
    policy: str = ""
    """The lead policy that judged the answer (``structural``, ``guided``; docs/lead.md)."""
    reasons: list[str] = Field(default_factory=list)
    """Why the policy judged the work not complete although the lead answered (empty: it is);
    the session is then ``incomplete``."""


Event = Annotated[
    SessionStarted
    | SessionFinished
    | TextDelta
    | RoundStarted
    | RoundEnded
    | ToolCalled
    | ToolResulted
    | GuardFired
    | ApprovalRequested
    | ApprovalDecided
    | QuestionAsked
    | QuestionAnswered
    | AgentSpawned
    | AgentClaimed
    | AgentUnclaimed
    | AgentProgress
    | AgentResult
    | AgentExited
    | ErrorEvent
    | ModelRetried
    | TextRetracted
    | BudgetUpdated
    | ModelUsage
    | AnswerChecked,
    Field(discriminator="type"),
]


@functools.cache
def _event_adapter() -> TypeAdapter[Event]:
    """The union's validator, made on the first read of an event. Making it builds every event
    class's schema, which the classes defer: a process that only writes events builds those it
    makes, and none at import."""
    return TypeAdapter(Event)


EVENT_CLASSES: dict[str, type[_Event]] = {
    cls.model_fields["type"].default: cls for cls in get_args(get_args(Event)[0])
}
"""Every event class by its ``type``."""


def parse_event(raw: str | bytes, kind: str | None = None) -> Event:
    """Validate one event from its JSON form; raises ``pydantic.ValidationError`` when malformed.

    ``kind``: the event's ``type`` when the reader knows it already (the in-process log keeps it
    beside the text). The text is then validated by that class alone, and the union's validator,
    which builds every event class, is not made. What that class takes, the union takes too: a
    text whose ``type`` is missing (which the class would default) goes to the union, which
    refuses it; only the errors' locations differ (``text``, not ``text.delta.text``)."""
    cls = EVENT_CLASSES.get(kind) if kind is not None else None
    if cls is not None:
        event = cls.model_validate_json(raw)
        if "type" in event.model_fields_set:
            return cast(Event, event)
    return _event_adapter().validate_json(raw)


def dump_event(event: Event) -> str:
    """The JSON wire form of an event."""
    return event.model_dump_json()
