"""The lead agent: a streaming engine turn per step, delegation with ``send_message``, and the
macro-loop that waits for sub-agents before the final answer (DESIGN §5).

:class:`Lead` is the core (no ``subagents`` import: profiles arrive as ``name -> description``);
:mod:`baton.session` composes it with a bus, workers and the event stream.
"""

from baton.lead.agent import Lead, LeadOutcome, LeadStatus
from baton.lead.delegation import DelegationLimits
from baton.lead.outcome import AnswerCheck, check_answer
from baton.lead.prompt import LEAD_NAME, inbox_block, system_prompt
from baton.lead.roster import Roster, SubAgentRecord
from baton.lead.stream import EventFanout, EventRouter, EventStream
from baton.lead.tools import SEND_MESSAGE, send_message_tool, unknown_agent_hint

__all__ = [
    "LEAD_NAME",
    "SEND_MESSAGE",
    "AnswerCheck",
    "DelegationLimits",
    "EventFanout",
    "EventRouter",
    "EventStream",
    "Lead",
    "LeadOutcome",
    "LeadStatus",
    "Roster",
    "SubAgentRecord",
    "check_answer",
    "inbox_block",
    "send_message_tool",
    "system_prompt",
    "unknown_agent_hint",
]
