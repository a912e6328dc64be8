"""The agent loop engine: one governed tool loop for the lead and every sub-agent (DESIGN §3).

Build an :class:`AgentLoop` from a :class:`~baton.llm.types.ChatModel`, tools made with
:func:`tool`, its settings as :class:`LoopOptions` (:class:`LoopLimits`, a ``tool_choice``, a
token budget) and its live parts as :class:`LoopParts` (an event sink, an
:class:`InteractionChannel` for human questions, optionally a :data:`CallRewriter` and a session
``Spend``); call :meth:`AgentLoop.run_turn` with the history; read the :class:`TurnResult`.

The names resolve lazily (PEP 562): a process that reads a lead's checkpoint (``baton watch``,
``sessions``) imports a module or two of the engine, not the whole loop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from baton.llm._lazy import lazy_attributes

if TYPE_CHECKING:
    from baton.engine.budget import TokenBudget
    from baton.engine.calls import EventSink, ImageResolver
    from baton.engine.channels import MemoryChannel, PolicyChannel
    from baton.engine.errors import (
        ApprovalTimeout,
        EngineError,
        InteractionCancelled,
        InteractionError,
        InteractionTimeout,
        InteractionUnavailable,
        ToolDefinitionError,
        ToolTimeout,
        TurnInProgress,
    )
    from baton.engine.interaction import (
        ApprovalDecision,
        ApprovalQuestion,
        ImageQuestion,
        InteractionChannel,
        ProvidedMedia,
        Question,
        QuestionClosed,
        UploadQuestion,
    )
    from baton.engine.loop import AgentLoop, CallRewriter, StopReason, TurnResult
    from baton.engine.loop_options import LoopOptions, LoopParts
    from baton.engine.media import (
        DESCRIBE_IMAGE,
        REQUEST_FILE_UPLOAD,
        file_upload_tool,
        image_tool,
    )
    from baton.engine.telemetry import Telemetry
    from baton.engine.tools import Tool, ToolRegistry, ToolResult, ToolRun, tool
    from baton.engine.turn import AgentTurn, LoopLimits, Verdict

_HOMES = {
    "baton.engine.budget": ("TokenBudget",),
    "baton.engine.calls": ("EventSink", "ImageResolver"),
    "baton.engine.channels": ("MemoryChannel", "PolicyChannel"),
    "baton.engine.errors": (
        "ApprovalTimeout",
        "EngineError",
        "InteractionCancelled",
        "InteractionError",
        "InteractionTimeout",
        "InteractionUnavailable",
        "ToolDefinitionError",
        "ToolTimeout",
        "TurnInProgress",
    ),
    "baton.engine.interaction": (
        "ApprovalDecision",
        "ApprovalQuestion",
        "ImageQuestion",
        "InteractionChannel",
        "ProvidedMedia",
        "Question",
        "QuestionClosed",
        "UploadQuestion",
    ),
    "baton.engine.loop": ("AgentLoop", "CallRewriter", "StopReason", "TurnResult"),
    "baton.engine.loop_options": ("LoopOptions", "LoopParts"),
    "baton.engine.media": (
        "DESCRIBE_IMAGE",
        "REQUEST_FILE_UPLOAD",
        "file_upload_tool",
        "image_tool",
    ),
    "baton.engine.telemetry": ("Telemetry",),
    "baton.engine.tools": ("Tool", "ToolRegistry", "ToolResult", "ToolRun", "tool"),
    "baton.engine.turn": ("AgentTurn", "LoopLimits", "Verdict"),
}

__all__ = [
    "DESCRIBE_IMAGE",
    "REQUEST_FILE_UPLOAD",
    "AgentLoop",
    "AgentTurn",
    "ApprovalDecision",
    "ApprovalQuestion",
    "ApprovalTimeout",
    "CallRewriter",
    "EngineError",
    "EventSink",
    "ImageQuestion",
    "ImageResolver",
    "InteractionCancelled",
    "InteractionChannel",
    "InteractionError",
    "InteractionTimeout",
    "InteractionUnavailable",
    "LoopLimits",
    "LoopOptions",
    "LoopParts",
    "MemoryChannel",
    "PolicyChannel",
    "ProvidedMedia",
    "Question",
    "QuestionClosed",
    "StopReason",
    "Telemetry",
    "TokenBudget",
    "Tool",
    "ToolDefinitionError",
    "ToolRegistry",
    "ToolResult",
    "ToolRun",
    "ToolTimeout",
    "TurnInProgress",
    "TurnResult",
    "UploadQuestion",
    "Verdict",
    "file_upload_tool",
    "image_tool",
    "tool",
]

__getattr__ = lazy_attributes(__name__, _HOMES)
