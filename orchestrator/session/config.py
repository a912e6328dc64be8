"""What a session is told (:class:`SessionConfig`: everything about it that can be written down,
validated once) and what it ends with (:class:`SessionResult`).

The config is the one shape every surface fills (the CLI's settings, ``baton serve``'s defaults,
an A2A request, an embedding application's keywords); what belongs to the process (the model's
key, the profiles' code, a media store) is never stored (:mod:`baton.session.setup`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Self

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, SecretStr, model_validator

from baton.bus.base import DEFAULT_RETENTION_S
from baton.bus.ids import new_id
from baton.bus.messages import DEFAULT_POOL, ApproveMode, SessionId, check_pool
from baton.bus.parts.records import LEAD_LEASE_S
from baton.bus.retry import DEFAULT_OUTAGE_S
from baton.engine import LoopLimits
from baton.engine.questions import UPLOAD_MAX_BYTES
from baton.engine.spend import SpendLimits
from baton.lead.agent import LeadStatus
from baton.lead.delegation import DelegationLimits
from baton.lead.profiles import PolicyName
from baton.lead.stream import DEFAULT_FLUSH_S
from baton.llm import ModelSettings
from baton.llm.types import ToolChoice
from baton.media import MediaStore
from baton.session.spawn_watch import UNCLAIMED_S
from baton.subagents.images import ImageGenerator
from baton.subagents.mcp_config import McpServerConfig
from baton.subagents.profiles import Profile


def new_session_id() -> str:
    """A short, unique, time-ordered-enough session id (``s-`` + 12 hex digits)."""
    return f"s-{new_id()[-12:]}"


class SessionConfig(BaseModel):
    """Everything a session needs that can be written down (live objects go to :class:`Session`).

    ``model=None`` uses the offline model (labelled as such: ``SessionStarted(offline=True)``);
    ``profiles`` are Python profiles, a TOML path, or None for the built-in demo profiles
    (each profile carries its sub-agents' own ``tool_choice`` and model overrides).

    ``local_workers`` (the default) hosts the sub-agents in the session's own worker, which takes
    this session's spawn requests and no other; without it they go to the ``baton worker``s of
    ``pool`` (``default`` unless set; ``local`` is reserved) that know their profiles.

    ``media`` is where the local workers' tools put media (a :class:`~baton.media.MediaStore`,
    e.g. ``baton.media.open_store("s3://bucket/prefix")``; None: a folder at ``media_dir``;
    docs/media.md) and ``images`` what draws ``generate_image``'s pictures (None: the offline
    painter); like ``model``, both belong to the process and are never stored.

    ``approve`` answers the approvals of every agent of the session, wherever it runs: ``ask``
    a person (``Session.answer``, ``baton approve``, the HTTP API), or ``auto``/``deny`` at once
    by policy (the lead's own channel, and each sub-agent's spawn request carries it).

    ``resume`` continues the session ``session_id`` whose lead died, from the lead's checkpoint:
    its ``task`` and settings come from there (see :meth:`Session.resume`); ``lead_lease_s`` is
    the lead's lease, the longest a resume waits to learn that a lead died.

    ``tool_choice`` is the lead's (``required`` unless set; None: not sent); ``budget`` caps the
    model calls and tokens of the lead and every sub-agent together, wherever they run (it is
    written to the bus before the lead starts, so remote workers see it); ``delegation`` caps the
    lead's sends per turn; ``profile_tools`` also offers the lead one delegation tool per
    profile; ``lead_mcp`` gives the lead the tools of MCP servers (over a profiles file's
    ``[lead.mcp.<server>]``; docs/profiles.md), started when the session opens; ``lead_policy``
    is what decides after the lead's turns and judges its answer (lead/profiles.py). Once the
    lead's model failed for good (the model's own retries spent), the session waits up to
    ``failure_grace_s`` for its sub-agents' results before it ends ``failed`` with them. Once it
    ended, its keys on Redis live ``retention_s`` more (7 days by default; ``docs/bus.md``,
    *Retention*).

    ``unclaimed_s`` bounds how long a sub-agent's spawn request waits for a worker in silence:
    past it the session logs ``agent.unclaimed`` (one warning line in every view, naming the pool
    and the profile), and when no live worker of the pool serves the profile, it ends the agent
    with that reason instead of waiting out ``timeout_s`` (:mod:`baton.session.spawn_watch`).
    """

    model_config = ConfigDict(
        defer_build=True, extra="forbid", arbitrary_types_allowed=True, frozen=True
    )

    task: str = Field("", description="what the lead should get done (a resumed session's own)")
    context: str = Field(
        "",
        description=(
            "what came before the task (an earlier exchange of the same conversation): the lead "
            "reads it as a note ahead of the task, which stays the request as written"
        ),
    )
    session_id: SessionId = Field(default_factory=new_session_id)
    bus_url: str = "memory://"
    bus_prefix: str = Field("baton", min_length=1, description="Redis key prefix of the bus")
    bus_signing_key: SecretStr | None = Field(
        None, description="sign envelopes and refuse unsigned ones (docs/protocol.md); never stored"
    )
    model: ModelSettings | None = None
    profiles: list[Profile] | dict[str, Profile] | Path | None = None
    approve: ApproveMode = "ask"
    local_workers: bool = True
    pool: Annotated[str, AfterValidator(check_pool)] = Field(
        DEFAULT_POOL, description="the worker pool that hosts the sub-agents without local workers"
    )
    worker_concurrency: int = Field(100, ge=1)
    timeout_s: float = Field(600.0, gt=0, description="the whole session, waits included")
    media_dir: Path = Path("media")
    upload_max_bytes: int = Field(
        UPLOAD_MAX_BYTES, ge=1, description="the largest file Session.answer uploads to a question"
    )
    media: MediaStore | None = Field(
        None, description="where the local workers' tools put media (None: a folder, media_dir)"
    )
    images: ImageGenerator | None = Field(
        None, description="what draws generate_image's pictures (None: the offline painter)"
    )
    instructions: str | None = Field(None, description="appended to the lead's system prompt")
    limits: LoopLimits | None = None
    text_flush_s: float = Field(DEFAULT_FLUSH_S, gt=0)
    shutdown_grace_s: float = Field(1.0, ge=0, description="wait for sub-agents on cancel")
    tool_choice: ToolChoice | None = Field(
        "required", description="the lead's tool_choice (None: not sent); see baton.settings"
    )
    budget: SpendLimits | None = Field(None, description="model calls and tokens, all agents")
    delegation: DelegationLimits = Field(default_factory=DelegationLimits)
    profile_tools: bool = False
    lead_mcp: dict[str, McpServerConfig] = Field(
        default_factory=dict,
        description="the lead's MCP servers, over a profiles file's [lead.mcp.<server>] tables",
    )
    lead_policy: PolicyName = Field(
        "auto",
        description=(
            "what judges the lead's answers: structural, guided (aids for small models), or auto "
            "(guided for models whose name says at most 4B parameters); docs/small-models.md"
        ),
    )
    failure_grace_s: float = Field(120.0, ge=0, description="wait for results after a failure")
    bus_outage_s: float = Field(
        DEFAULT_OUTAGE_S, gt=0, description="seconds of bus outage the session rides out"
    )
    lead_lease_s: float = Field(
        LEAD_LEASE_S, gt=0, description="the lead's lease: how long a resume waits for it"
    )
    retention_s: float = Field(
        DEFAULT_RETENTION_S,
        gt=0,
        description="seconds the bus keeps the session's data once it ended (docs/bus.md)",
    )
    unclaimed_s: float = Field(
        UNCLAIMED_S,
        gt=0,
        description="seconds a spawn request waits for a worker before a warning (and, with no "
        "live worker of its pool serving its profile, before its agent is ended)",
    )
    resume: bool = Field(False, description="continue session_id, whose lead died")

    @model_validator(mode="after")
    def _task_or_resume(self) -> Self:
        if not self.resume and not self.task.strip():  # blank is no task: the lead would guess
            raise ValueError(
                "task: a new session needs a task (not just whitespace): say what the lead should "
                "get done"
            )
        if self.resume and "session_id" not in self.model_fields_set:
            raise ValueError("session_id: resume=True needs the id of the session to continue")
        return self


class SessionResult(BaseModel):
    """How a session ended: its status, the lead's last answer, every sub-agent media URL, and
    the URLs the answer cites that nothing produced (``invented_urls``)."""

    model_config = ConfigDict(defer_build=True, frozen=True)

    session: str
    status: LeadStatus
    answer: str = ""
    media_urls: list[str] = Field(default_factory=list)
    error: str = ""
    invented_urls: list[str] = Field(default_factory=list)
