"""A lead on a real (in-memory) bus, its model scripted through the real ``openai`` client, and
sub-agents played by the test: it puts their ``result`` envelopes on the bus when the lead's own
events say the moment has come (awaited in the lead's event sink, so the order is exact, never a
sleep).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio

from baton.bus.base import Bus
from baton.bus.connect import open_bus
from baton.bus.events import AgentSpawned, Event, GuardFired, ToolResulted
from baton.bus.messages import Envelope
from baton.bus.payloads import ResultReport
from baton.lead.agent import Lead, LeadOutcome
from baton.lead.options import LeadOptions, LeadParts
from baton.llm.script import ScriptItem
from baton.llm.scripted import ScriptedServer
from baton.llm.types import ChatModel
from tests.support.models import llama_like, scripted

SESSION = "s-lead"
PROFILES = {"painter": "Paints pictures.", "writer": "Writes text.", "helper": "Helps."}


_OPTIONS = {f.name for f in dataclasses.fields(LeadOptions)}
_PARTS = {f.name for f in dataclasses.fields(LeadParts)}


def make_lead(
    bus: Bus,
    model: ChatModel,
    *,
    session: str = SESSION,
    profiles: Mapping[str, str] = PROFILES,
    **settings: Any,
) -> Lead:
    """A :class:`Lead` from flat keywords, each sorted into its options or its parts (a test
    names what it sets, whichever group it belongs to)."""
    unknown = set(settings) - _OPTIONS - _PARTS
    if unknown:
        raise TypeError(f"not a lead option or part: {sorted(unknown)}")
    if "media_profiles" in settings:
        settings["media_profiles"] = frozenset(settings["media_profiles"])
    options = LeadOptions(**{k: v for k, v in settings.items() if k in _OPTIONS})
    parts = LeadParts(**{k: v for k, v in settings.items() if k in _PARTS})
    return Lead(bus, model, session=session, profiles=profiles, options=options, parts=parts)


@dataclass
class Scenario:
    """One lead run: what it logged, what its model was asked, how it ended."""

    bus: Bus
    lead: Lead
    server: ScriptedServer
    events: list[Event] = field(default_factory=list)

    @property
    def spawned(self) -> list[str]:
        return [e.agent for e in self.events if isinstance(e, AgentSpawned)]

    def tool_results(self) -> dict[str, str]:
        """Each call id's result text, as the model got it."""
        return {
            e.result.call_id: e.result.content for e in self.events if isinstance(e, ToolResulted)
        }

    def guards(self) -> list[str]:
        return [e.outcome for e in self.events if isinstance(e, GuardFired)]

    def to_enum(self, request: int) -> list[str]:
        """The ``send_message`` tool's ``to`` enum offered in the model's ``request``-th request."""
        tools = self.server.requests[request].body["tools"]
        send = next(t for t in tools if t["function"]["name"] == "send_message")
        return list(send["function"]["parameters"]["properties"]["to"]["enum"])

    async def report(
        self,
        sender: str,
        content: str = "done",
        *,
        media: Sequence[str] = (),
        reason: str = "finished",
    ) -> None:
        """``sender``'s final result, answering the last message the lead sent it; its agent
        hash first names it claimed (by no worker: the owner is ``""``), as a sub-agent run
        without a worker leaves it, so the lead takes the report as its owner's."""
        sent = self.lead.roster.agents[sender].sent
        await claimed(self.bus, sender)
        await self.bus.inboxes.send(
            Envelope(
                session=SESSION,
                sender=sender,
                recipient="lead",
                type="result",
                content=content,
                media_urls=list(media),
                reply_to=sent[-1].id if sent else None,
                meta=ResultReport(reason=reason, steps=1).to_meta(),
            )
        )


async def claimed(bus: Bus, agent: str, session: str = SESSION) -> None:
    """Record ``agent`` as claimed, with the owner a sub-agent run without a worker has (``""``):
    the lead takes reports only from an agent's owner (lead/trust.py)."""
    await bus.records.set_agent(session, agent, {"status": "running", "owner": ""})


React = Callable[[Scenario, Event], Awaitable[None]]


async def run_lead(
    script: Iterable[ScriptItem],
    react: React | None = None,
    *,
    task: str = "paint a fox",
    timeout: float = 20.0,
    setup: Callable[[Bus], Awaitable[dict[str, Any]]] | None = None,
    llama: bool = False,
    retries: int = 0,
    **options: Any,
) -> tuple[Scenario, LeadOutcome]:
    """Run a lead on ``task`` with the scripted ``script`` (no fallback), ``react`` called with
    every event it emits (after it was recorded), ``options`` passed to :class:`Lead`, and the
    options ``setup(bus)`` returns (for parts that live on the lead's bus). ``llama``: the server
    is as strict about tool calls as llama-server, and the client retries its parse errors;
    ``retries``: the model client's own retries (the only ones: the lead retries no turn)."""
    if llama:
        server, model = llama_like(list(script), fallback=False)
    else:
        server, model = scripted(list(script), fallback=False, max_retries=retries)
    async with open_bus() as bus:
        if setup is not None:
            options.update(await setup(bus))
        holder: list[Scenario] = []

        async def on_event(event: Event) -> None:
            scenario = holder[0]
            scenario.events.append(event)
            if react is not None:
                await react(scenario, event)

        options.setdefault("shutdown_grace_s", 0.2)
        lead = make_lead(bus, model, events=on_event, **options)
        holder.append(Scenario(bus, lead, server))
        with anyio.fail_after(timeout):
            outcome = await lead.run(task)
        return holder[0], outcome
