"""The public embedding API of baton: everything an application needs, from one import.

Run a whole session (in-process bus, in-process workers and the offline model by default)::

    import anyio
    from baton import Session, SessionConfig

    async def main() -> None:
        config = SessionConfig(task="paint a fox and write a haiku about it")
        async with Session(config) as session:
            async for event in session.events():   # token-by-token lead text, then everything else
                if event.type == "text.delta":
                    print(event.text, end="", flush=True)
            result = await session.run()
        print(result.status, result.media_urls)

    anyio.run(main)

Other pieces:

- ``SessionConfig(bus_url="redis://localhost:6379/0", local_workers=False)``: a distributed
  session whose sub-agents run on ``baton worker`` processes (or a :class:`Worker` you embed);
- ``session.post(text)``: a follow-up to the lead; ``session.questions()``: what waits for a
  person; ``session.answer(question_id, ...)``: an approval, a file, a URL or a cancel;
  ``session.cancel()``;
- :func:`answer_approval` and :class:`BusInteractionChannel`: approvals over the bus from any
  process (what ``baton approve`` uses);
- :class:`Worker`: host sub-agents inside your own anyio application
  (``async with Worker(bus, profiles, models): ...``; what its agents share, media and images,
  as :class:`AgentParts`, its capacity and timings as :class:`WorkerLimits`); :func:`open_bus`
  opens a bus by URL.
"""

from baton.bus.base import Bus
from baton.bus.connect import open_bus
from baton.bus.events import Event
from baton.bus.messages import Envelope
from baton.bus.spend import SpendLimits
from baton.engine import LoopLimits, Tool, ToolRun, tool
from baton.engine.bus_channel import (
    ApprovalNotFound,
    BusInteractionChannel,
    answer_approval,
    approvals_inbox,
    find_pending_approval,
)
from baton.engine.questions import (
    AnswerRefused,
    Cancelled,
    Decision,
    OpenQuestion,
    Provided,
    QuestionNotFound,
    answer_question,
    open_questions,
)
from baton.lead import Lead, LeadOutcome
from baton.lead.delegation import DelegationLimits
from baton.llm import ModelSettings
from baton.session import (
    ApproveMode,
    Session,
    SessionConfig,
    SessionResult,
    new_session_id,
    open_session,
)
from baton.subagents.loop import AgentParts
from baton.subagents.profiles import Profile, ProfileModel, builtin_profiles, load_profiles
from baton.subagents.worker import Worker, WorkerLimits

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
