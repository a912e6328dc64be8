"""What the endpoint declares about itself: ``GET /ag-ui/capabilities``, AG-UI's
``AgentCapabilities`` (the protocol leaves retrieval to the implementation; the shape is its own).

Only what the endpoint does is declared: it streams over SSE, delegates to the sub-agents of
the server's profiles (``multiAgent.subagents``), asks for approvals and files as interrupts,
keeps the state of a thread across runs, and resumes a stream from baton's ``id:`` cursors
(``transport.resumable``, a baton extension of the SSE binding, spelled out under ``custom``).
It does not run the client's tools (``RunAgentInput.tools`` is not read) nor read a message's
non-text parts.
"""

from __future__ import annotations

from collections.abc import Iterable

from ag_ui.core import (
    AgentCapabilities,
    ExecutionCapabilities,
    HumanInTheLoopCapabilities,
    IdentityCapabilities,
    MultiAgentCapabilities,
    MultimodalCapabilities,
    MultimodalInputCapabilities,
    MultimodalOutputCapabilities,
    StateCapabilities,
    SubagentInfo,
    ToolsCapabilities,
    TransportCapabilities,
)

from baton.errors import installed_version
from baton.subagents.profiles import Profile


def capabilities(profiles: Iterable[Profile], session_timeout_s: float) -> AgentCapabilities:
    """The declaration for a server offering ``profiles``."""
    offered = list(profiles)
    return AgentCapabilities(
        identity=IdentityCapabilities(
            name="baton",
            type="baton",
            description="A lead agent that delegates to sub-agents: "
            + ", ".join(profile.name for profile in offered),
            version=installed_version(),
        ),
        transport=TransportCapabilities(
            streaming=True,
            websocket=False,
            http_binary=False,
            push_notifications=False,
            resumable=True,
        ),
        tools=ToolsCapabilities(supported=True, parallel_calls=True, client_provided=False),
        state=StateCapabilities(snapshots=True, deltas=True, persistent_state=True, memory=False),
        multi_agent=MultiAgentCapabilities(
            supported=True,
            delegation=True,
            handoffs=False,
            subagents=[SubagentInfo(name=p.name, description=p.description) for p in offered],
        ),
        multimodal=MultimodalCapabilities(
            input=MultimodalInputCapabilities(
                image=False, audio=False, video=False, pdf=False, file=False
            ),
            output=MultimodalOutputCapabilities(image=True, audio=False),
        ),
        execution=ExecutionCapabilities(max_execution_time=int(session_timeout_s * 1000)),
        human_in_the_loop=HumanInTheLoopCapabilities(
            supported=True,
            approvals=True,
            interrupts=True,
            approve_with_edits=False,
        ),
        custom={
            "baton": {
                "resume": "every frame of a logged event carries id: <session>:<cursor>; send it "
                "back as Last-Event-ID (or forwardedProps.baton.lastEventId) to get what came "
                "after, or run the same thread with no new message",
                "cancel": "a run with forwardedProps.baton.cancel = true",
                "interruptReasons": ["tool_approval", "file_upload", "image_pick"],
            }
        },
    )
