"""The lead agent: a streaming engine turn per step, delegation with ``send_message``, and the
macro-loop that waits for sub-agents before the final answer (DESIGN §5).

:class:`Lead` is the core (no ``subagents`` import: profiles arrive as ``name -> description``);
:mod:`baton.session` composes it with a bus, workers and the event stream.

The names resolve lazily (PEP 562): :mod:`baton.lead.keeper` (a session's lease and record,
read by ``baton watch`` and ``sessions``) must not import the lead itself, and with it the engine
and the model client.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from baton.llm._lazy import lazy_attributes

if TYPE_CHECKING:
    from baton.lead.agent import Lead, LeadOutcome, LeadStatus
    from baton.lead.delegation import DelegationLimits
    from baton.lead.outcome import AnswerCheck, check_answer
    from baton.lead.prompt import LEAD_NAME, inbox_block, system_prompt
    from baton.lead.roster import Roster, SubAgentRecord
    from baton.lead.stream import EventFanout, EventRouter, EventStream
    from baton.lead.tools import SEND_MESSAGE, send_message_tool, unknown_agent_hint

_HOMES = {
    "baton.lead.agent": ("Lead", "LeadOutcome", "LeadStatus"),
    "baton.lead.delegation": ("DelegationLimits",),
    "baton.lead.outcome": ("AnswerCheck", "check_answer"),
    "baton.lead.prompt": ("LEAD_NAME", "inbox_block", "system_prompt"),
    "baton.lead.roster": ("Roster", "SubAgentRecord"),
    "baton.lead.stream": ("EventFanout", "EventRouter", "EventStream"),
    "baton.lead.tools": ("SEND_MESSAGE", "send_message_tool", "unknown_agent_hint"),
}

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


__getattr__ = lazy_attributes(__name__, _HOMES)
