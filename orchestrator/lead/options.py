"""What a lead is built from: its settings (:class:`LeadOptions`) and its live parts
(:class:`LeadParts`).

Two groups, so that the lead's constructor stays short and each group says what it is: the options
are plain values a session's settings write down (and a resume reads back); the parts are objects
of the process (tools, the event sink, the human channel, the budget, the checkpoint sink, the
policy) that are never stored.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from baton.bus.messages import DEFAULT_POOL, ApproveMode
from baton.engine import EventSink, InteractionChannel, LoopLimits, Telemetry, Tool
from baton.engine.spend import Spend
from baton.lead.checkpoint import CheckpointSink
from baton.lead.delegation import DelegationLimits
from baton.lead.policy import LeadPolicy, StructuralPolicy
from baton.llm.types import ToolChoice

LATE_ANSWER_S = 60.0
"""The last turn past the session deadline runs at most this long."""


@dataclass(frozen=True, slots=True)
class LeadOptions:
    """The lead's settings.

    ``tool_choice`` goes with every request that offers tools (unless it is ``"none"``, the
    terminal ``answer`` tool, lead/answer.py, is offered too); ``delegation`` caps the sends of
    one turn and the delegating turns (waves) of one request; ``failure_grace_s`` bounds the wait
    for the sub-agents once the model has failed for good; ``profile_tools`` also offers one
    delegation tool per profile; ``media_profiles`` are the profiles whose tools make media;
    ``late_answer_s`` bounds the one turn past the session deadline; ``spawn_pool`` is where its
    spawn requests go (``local``: the session's own worker; else a pool of workers);
    ``spawn_approve`` is the session's approval policy, which every spawn request carries to its
    sub-agent; ``media_dir`` is the media root: a sub-agent's ``file://`` media outside it are
    dropped (lead/media.py; None: not checked, for a lead embedded without one).
    """

    instructions: str | None = None
    limits: LoopLimits | None = None
    timeout_s: float = 600.0
    shutdown_grace_s: float = 1.0
    tool_choice: ToolChoice | None = None
    delegation: DelegationLimits = field(default_factory=DelegationLimits)
    failure_grace_s: float = 120.0
    profile_tools: bool = False
    media_profiles: frozenset[str] = frozenset()
    late_answer_s: float = LATE_ANSWER_S
    spawn_pool: str = DEFAULT_POOL
    spawn_approve: ApproveMode = "ask"
    media_dir: Path | None = None


@dataclass(frozen=True, slots=True)
class LeadParts:
    """The lead's live parts: its own tools, where its events go, the channel to a person, its
    telemetry, the session's shared budget, where its checkpoints go, and its policy (the
    structural default unless given, lead/profiles.py)."""

    tools: Sequence[Tool] = ()
    events: EventSink | None = None
    channel: InteractionChannel | None = None
    telemetry: Telemetry = field(default_factory=Telemetry)
    spend: Spend | None = None
    checkpoints: CheckpointSink | None = None
    policy: LeadPolicy = field(default_factory=StructuralPolicy)
