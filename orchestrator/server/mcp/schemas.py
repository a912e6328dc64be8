"""The tools' arguments and results, as pydantic models: each tool's ``inputSchema`` and
``outputSchema`` are generated from the same declarations that validate a call, so what a host is
told and what is enforced cannot drift apart (as :mod:`baton.server.schemas` does for HTTP)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from baton.bus.ids import NAME_MAX, NAME_PATTERN, check_name
from baton.bus.messages import ApproveMode
from baton.server.schemas import NotBlank, ProfileInfo
from baton.server.state import SessionState

SessionStatus = Literal["completed", "incomplete", "failed", "cancelled", "timed_out"]


def _session_id(value: str) -> str:
    return check_name(value, "session id")


SessionId = Annotated[
    str,
    AfterValidator(_session_id),
    Field(
        description="a session id (`s-…`), as `run` returned it or `baton sessions` lists it",
        json_schema_extra={"pattern": NAME_PATTERN, "minLength": 1, "maxLength": NAME_MAX},
    ),
]


class _Arguments(BaseModel):
    model_config = ConfigDict(defer_build=True, extra="forbid", frozen=True)


class RunArguments(_Arguments):
    """``run``: a whole multi-agent session, from the task to the lead's final answer."""

    task: NotBlank = Field(
        min_length=1,
        max_length=20_000,
        description="what the lead agent should get done, in the user's words",
        json_schema_extra={"pattern": r"\S"},
    )
    profiles: list[str] | None = Field(
        None,
        max_length=64,
        description="offer the lead only these sub-agent profiles (the `profiles` tool lists "
        "them; default: all)",
    )
    approve: ApproveMode = Field(
        "ask",
        description="the tools that need a person's approval: ask (the person, through this "
        "host; declined when the host cannot ask), auto (approved), deny (declined)",
    )
    timeout_s: float | None = Field(
        None, gt=0, description="seconds the session may run (capped by the server)"
    )


class PostArguments(_Arguments):
    """``post``: a follow-up from the user to a running session's lead."""

    session: SessionId
    content: NotBlank = Field(
        min_length=1,
        max_length=20_000,
        description="what to tell the lead",
        json_schema_extra={"pattern": r"\S"},
    )


class SessionArguments(_Arguments):
    """``state`` and ``cancel``: one session of the bus."""

    session: SessionId


class NoArguments(_Arguments):
    """``profiles`` takes nothing."""


class RunResult(BaseModel):
    """What ``run`` ends with: the session's end as its log records it."""

    model_config = ConfigDict(defer_build=True)

    session: str = Field(description="the session's id (for state, post, cancel)")
    status: SessionStatus = Field(
        description="completed; incomplete (the lead answered, but work was left undone: notes "
        "say why); failed; cancelled; timed_out"
    )
    answer: str = Field(description="the lead's final answer")
    media_urls: list[str] = Field(
        description="the media the sub-agents made, as URLs this host can open"
    )
    notes: list[str] = Field(
        default_factory=list,
        description="what the host should know beside the answer: approvals declined because "
        "nobody could be asked, why the work is incomplete or failed",
    )


class StateResult(SessionState):
    """``state``: the session folded from its event log, as ``GET /sessions/{id}/state`` has it
    (the questions that wait for a person among it: ``open_questions``)."""


class PostResult(BaseModel):
    model_config = ConfigDict(defer_build=True)

    session: str
    id: str = Field(description="the message's envelope id")


class CancelResult(BaseModel):
    model_config = ConfigDict(defer_build=True)

    session: str
    status: str = Field(
        description="how the session ended (cancelled, or how it ended before the cancel took "
        "effect), or `cancelling` when it had not ended yet"
    )


class ProfilesResult(BaseModel):
    model_config = ConfigDict(defer_build=True)

    profiles: list[ProfileInfo]


def input_schema(model: type[BaseModel]) -> dict[str, Any]:
    """A model's JSON schema as a tool's ``inputSchema`` (an object, no unknown keys)."""
    schema = model.model_json_schema()
    schema.setdefault("properties", {})
    return schema


def output_schema(model: type[BaseModel]) -> dict[str, Any]:
    """A model's JSON schema as a tool's ``outputSchema`` (of its ``structuredContent``)."""
    return model.model_json_schema(mode="serialization")
