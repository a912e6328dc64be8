"""The agent loop engine: one governed tool loop for the lead and every sub-agent (DESIGN §3).

Build an :class:`AgentLoop` from a :class:`~baton.llm.types.ChatModel`, tools made with
:func:`tool`, optional :class:`LoopLimits`, an :class:`InteractionChannel` for human questions and
an event sink (optionally a ``tool_choice``, a :data:`CallRewriter` and a session ``Spend``); call
:meth:`AgentLoop.run_turn` with the history; read the :class:`TurnResult`.
"""

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
from baton.engine.media import (
    DESCRIBE_IMAGE,
    REQUEST_FILE_UPLOAD,
    file_upload_tool,
    image_tool,
)
from baton.engine.telemetry import Telemetry
from baton.engine.tools import Tool, ToolRegistry, ToolResult, tool
from baton.engine.turn import AgentTurn, LoopLimits, Verdict

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
    "ToolTimeout",
    "TurnInProgress",
    "TurnResult",
    "UploadQuestion",
    "Verdict",
    "file_upload_tool",
    "image_tool",
    "tool",
]
