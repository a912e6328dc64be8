"""baton: a lead/sub-agent orchestration runtime.

One import name over three folders: ``orchestrator/`` is this package, ``bus/`` is
:mod:`baton.bus` and ``subagents/`` is :mod:`baton.subagents` (the ``package-dir`` mapping in
``pyproject.toml``). The embedding API is importable from here::

    from baton import Session, SessionConfig, Worker, Profile, tool

The names resolve lazily (PEP 562) from :mod:`baton.api`: every ``baton.*`` import runs this file
first, and the CLI's start-up and the bus layer must not pay for the model client and the engine
they never use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from baton.llm._lazy import lazy_attributes

if TYPE_CHECKING:
    from baton.api import (
        AgentParts,
        AnswerRefused,
        ApprovalNotFound,
        ApproveMode,
        Bus,
        BusInteractionChannel,
        Cancelled,
        Decision,
        DelegationLimits,
        Envelope,
        Event,
        Lead,
        LeadOutcome,
        LoopLimits,
        ModelSettings,
        OpenQuestion,
        Profile,
        ProfileModel,
        Provided,
        QuestionNotFound,
        Session,
        SessionConfig,
        SessionResult,
        SpendLimits,
        Tool,
        ToolRun,
        Worker,
        WorkerLimits,
        answer_approval,
        answer_question,
        approvals_inbox,
        builtin_profiles,
        find_pending_approval,
        load_profiles,
        new_session_id,
        open_bus,
        open_questions,
        open_session,
        tool,
    )

__all__ = [
    "AgentParts",
    "AnswerRefused",
    "ApprovalNotFound",
    "ApproveMode",
    "Bus",
    "BusInteractionChannel",
    "Cancelled",
    "Decision",
    "DelegationLimits",
    "Envelope",
    "Event",
    "Lead",
    "LeadOutcome",
    "LoopLimits",
    "ModelSettings",
    "OpenQuestion",
    "Profile",
    "ProfileModel",
    "Provided",
    "QuestionNotFound",
    "Session",
    "SessionConfig",
    "SessionResult",
    "SpendLimits",
    "Tool",
    "ToolRun",
    "Worker",
    "WorkerLimits",
    "answer_approval",
    "answer_question",
    "approvals_inbox",
    "builtin_profiles",
    "find_pending_approval",
    "load_profiles",
    "new_session_id",
    "open_bus",
    "open_questions",
    "open_session",
    "tool",
]


__getattr__ = lazy_attributes(__name__, {"baton.api": __all__})


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
