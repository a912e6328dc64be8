"""The JSON bodies of the HTTP API, as pydantic models: validation and the OpenAPI description
come from the same declarations, so the documentation cannot drift from what is enforced."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator
from pydantic_core import PydanticCustomError

from baton.bus.ids import NAME_MAX, NAME_PATTERN, check_name
from baton.bus.messages import ApproveMode


def _agent_name(value: str) -> str:
    return check_name(value, "agent name")


def _not_blank(value: str) -> str:
    """Refuse text that is only whitespace: a lead handed it would work on nothing (the offline
    model even paints "(empty request)"), so the client hears it at once, as a 422."""
    if not value.strip():
        raise PydanticCustomError("blank", "String should not be blank (only whitespace)")
    return value


NotBlank = Annotated[str, AfterValidator(_not_blank)]
"""Text with something in it besides whitespace (the schema says so with ``pattern: \\S``)."""


class _Body(BaseModel):
    model_config = ConfigDict(defer_build=True, extra="forbid", frozen=True)


class StartSession(_Body):
    """``POST /sessions``: what the lead should get done, and how."""

    task: NotBlank = Field(
        min_length=1,
        max_length=20_000,
        description="the user's request",
        json_schema_extra={"pattern": r"\S"},
    )
    profiles: list[str] | None = Field(
        None,
        max_length=64,
        description="offer only these of the server's sub-agent profiles (default: all)",
    )
    approve: ApproveMode = Field(
        "ask",
        description="the approvals of the lead and every sub-agent: ask (answered over the "
        "API), auto, deny",
    )
    timeout_s: float | None = Field(
        None, gt=0, description="seconds the session may run (capped by the server)"
    )
    instructions: str | None = Field(
        None, max_length=10_000, description="appended to the lead's system prompt"
    )


class PostMessage(_Body):
    """``POST /sessions/{id}/messages``: a follow-up to the lead, or a task for a sub-agent."""

    content: NotBlank = Field(min_length=1, max_length=20_000, json_schema_extra={"pattern": r"\S"})
    to: Annotated[str, AfterValidator(_agent_name)] = Field(
        "lead",
        description="the recipient agent",
        # Checked by the bus's own rule (so what passes here, an envelope accepts), with its
        # words in the error; the schema still shows it.
        json_schema_extra={"pattern": NAME_PATTERN, "minLength": 1, "maxLength": NAME_MAX},
    )
    type: Literal["task", "message"] = "task"


class Decision(_Body):
    """``POST /sessions/{id}/approvals/{call_id}``: the answer to one pending approval."""

    approved: bool
    reason: str = Field("", max_length=2_000, description="shown to the agent")


class QuestionAnswer(_Body):
    """``POST /sessions/{id}/questions/{question_id}`` as JSON: exactly one of ``approved`` (an
    approval), ``url`` (a file or an image at a URL), ``media`` (one of the session's own
    media, by its ``/media/`` path) or ``cancel``. A file itself is sent as multipart."""

    approved: bool | None = Field(None, description="an approval's decision")
    url: str | None = Field(
        None, min_length=1, max_length=60_000, description="http(s) or data: URL of a file"
    )
    name: str = Field("", max_length=200, description="the file's name, with a url")
    media: str | None = Field(
        None, max_length=2_000, description="/media/<session>/<name>: one of the session's media"
    )
    cancel: bool = Field(False, description="true: no answer (the tool is declined)")
    reason: str = Field("", max_length=2_000, description="shown to the agent")

    @model_validator(mode="after")
    def _exactly_one(self) -> QuestionAnswer:
        given = [self.approved is not None, self.url is not None, self.media is not None,
                 self.cancel]  # fmt: skip
        if sum(given) != 1:
            raise PydanticCustomError(
                "one_answer", "give exactly one of approved, url, media or cancel: true"
            )
        return self


class Answered(BaseModel):
    model_config = ConfigDict(defer_build=True)

    question_id: str
    agent: str = Field(description="the agent that asked")
    outcome: Literal["approved", "declined", "provided", "cancelled"]
    url: str = Field("", description="where the file is now (provided)")


class SessionTokens(BaseModel):
    """The two tokens of one session (docs/http.md, *Session tokens*): shown once, here."""

    model_config = ConfigDict(defer_build=True)

    read: str = Field(description="read-only: the session's page, state, events and media")
    write: str = Field(
        description="read-write: also its messages, answers to its questions and cancel"
    )


class Started(BaseModel):
    model_config = ConfigDict(defer_build=True)

    id: str
    page: str = Field(description="the live page of the session")
    events: str = Field(description="its Server-Sent Events stream")
    state: str = Field(description="its state as JSON")
    tokens: SessionTokens | None = Field(
        None, description="tokens of this session only; null on a server without a token"
    )


class Posted(BaseModel):
    model_config = ConfigDict(defer_build=True)

    id: str = Field(description="the envelope id (idempotency key) of the message")


class Decided(BaseModel):
    model_config = ConfigDict(defer_build=True)

    call_id: str
    approved: bool
    agent: str = Field(description="the agent that asked")


class Cancelled(BaseModel):
    model_config = ConfigDict(defer_build=True)

    id: str
    cancelling: bool = True


class ProfileInfo(BaseModel):
    model_config = ConfigDict(defer_build=True)

    name: str
    description: str


class Profiles(BaseModel):
    model_config = ConfigDict(defer_build=True)

    profiles: list[ProfileInfo]


class ErrorBody(BaseModel):
    """Every error: ``detail`` is one line saying what is wrong and what to do; ``errors`` lists
    each invalid field of a 422."""

    model_config = ConfigDict(defer_build=True)

    detail: str
    errors: list[dict[str, object]] = Field(default_factory=list)
