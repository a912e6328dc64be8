"""The composition root: a session's lead, its event router, its spawn watch and its own worker,
built from its config and the process's live parts.

Everything that reads settings and wires one part to another is here, so the lifecycle
(:mod:`baton.session.lifecycle`) only runs what this built: it never reads a profile, a model
setting or an MCP table. What is opened here (the model client, MCP servers, the sub-agents'
model clients, the spawn-watch subscription, the lead's lease) is closed by the stack it was given.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass

from baton.bus.base import Bus
from baton.bus.errors import BusOutage
from baton.bus.messages import LOCAL_POOL
from baton.engine import InteractionChannel, Tool
from baton.engine.bus_channel import BusInteractionChannel
from baton.engine.channels import policy_channel
from baton.engine.spend import BusSpend
from baton.lead.agent import Lead
from baton.lead.keeper import LeadKeeper, LeadRecord
from baton.lead.options import LeadOptions, LeadParts
from baton.lead.profiles import lead_policy
from baton.lead.prompt import LEAD_NAME
from baton.lead.stream import EventFanout, EventRouter
from baton.llm.types import ChatModel
from baton.media import DirectoryStore, directory_of
from baton.session.compose import (
    descriptions,
    lead_model,
    lead_servers,
    media_profiles,
    resolve_profiles,
)
from baton.session.config import SessionConfig
from baton.session.setup import Resumed, hold_the_lead, offered_profiles, setup_of
from baton.session.spawn_watch import SpawnWatch
from baton.subagents.a2a_worker import with_card_descriptions
from baton.subagents.loop import AgentParts
from baton.subagents.mcp_worker import lead_tools
from baton.subagents.models import ModelFactory, ProfileModels
from baton.subagents.profiles import Profile
from baton.subagents.worker import Worker, WorkerLimits


@dataclass(frozen=True)
class Given:
    """What the embedding process hands a session besides its config: live objects (a bus, a
    model, the lead's tools, the sub-agents' models) that are never stored."""

    bus: Bus | None = None
    model: ChatModel | None = None
    tools: Sequence[Tool] = ()
    subagent_models: ModelFactory | None = None


@dataclass(frozen=True)
class Hooks:
    """How the parts reach back to the session that owns them: whether its lead was cancelled
    (the bus's retries then stop), and what to do once the bus was gone past its bound."""

    give_up: Callable[[], bool]
    on_outage: Callable[[BusOutage], None]


@dataclass(frozen=True)
class Built:
    """A session's parts, wired and not yet running; ``config`` is a resume's own (its stored
    settings), ``setup`` what a new session's lead record keeps."""

    config: SessionConfig
    keeper: LeadKeeper
    resumed: Resumed | None
    model_name: str
    setup: str
    router: EventRouter
    lead: Lead
    watch: SpawnWatch
    worker: Worker | None

    @property
    def record(self) -> LeadRecord | None:
        """The dead lead's record, when this session resumes one."""
        return None if self.resumed is None else self.resumed.record

    @property
    def time_left(self) -> float | None:
        """A resumed session's time left (None: a new session's own ``timeout_s``)."""
        return None if self.resumed is None else self.resumed.time_left


async def build_session(
    stack: AsyncExitStack,
    config: SessionConfig,
    bus: Bus,
    given: Given,
    fanout: EventFanout,
    hooks: Hooks,
) -> Built:
    """Hold the lead's lease (a resume takes it over and continues from its record), then build
    the lead over the profiles, models and tools the config names, the router of its events,
    the watch over its spawn requests and, with local workers, the session's own worker."""
    session = config.session_id
    keeper = LeadKeeper(
        bus, session, lease_s=config.lead_lease_s, outage_s=config.bus_outage_s,
        give_up=hooks.give_up,
    )  # fmt: skip
    stack.push_async_callback(keeper.let_go)  # a session that did not end gives it up
    resumed = await hold_the_lead(keeper, config, bus)
    if resumed is not None:
        config = resumed.config
    offered = None if resumed is None else resumed.offered
    profiles = offered_profiles(session, resolve_profiles(config.profiles), offered)
    profiles = await with_card_descriptions(profiles)  # remote agents' cards, once a process
    model = given.model or lead_model(config.model)
    if given.model is None:
        stack.push_async_callback(_close_model, model)
    servers = lead_servers(config.profiles, config.lead_mcp)  # the lead's MCP tools: now
    store = config.media or DirectoryStore(config.media_dir)
    mcp_tools = await lead_tools(stack, servers, store, session)
    router = EventRouter(
        bus,
        fanout,
        flush_s=config.text_flush_s,
        give_up=hooks.give_up,
        outage_s=config.bus_outage_s,
        on_outage=hooks.on_outage,
    )
    parts = LeadParts(
        tools=[*given.tools, *mcp_tools],
        events=router,
        channel=_approvals(config, bus),
        spend=None if config.budget is None else BusSpend(bus, session),
        checkpoints=keeper,
        policy=lead_policy(config.lead_policy, model.model),
    )
    lead = Lead(
        bus,
        model,
        session=session,
        profiles=descriptions(profiles),
        options=_lead_options(config, profiles),
        parts=parts,
    )
    record = None if resumed is None else resumed.record
    if record is not None and record.restorable:
        assert record.history is not None and record.checkpoint is not None
        lead.restore(record.history, record.checkpoint)
    watch = SpawnWatch(bus, session, unclaimed_s=config.unclaimed_s, give_up=hooks.give_up)
    stack.callback(bus.spawns.watch(session, watch.submitted))
    for request, receipt in lead.team.pending_spawns():  # a dead lead's, resumed
        watch.submitted(request, receipt)
    return Built(
        config=config,
        keeper=keeper,
        resumed=resumed,
        model_name=model.model,
        setup=setup_of(config, profiles, model.model, key_id=bus.key_id),
        router=router,
        lead=lead,
        watch=watch,
        worker=await _own_worker(stack, config, bus, profiles, given),
    )


def _lead_options(config: SessionConfig, profiles: dict[str, Profile]) -> LeadOptions:
    return LeadOptions(
        instructions=config.instructions,
        limits=config.limits,
        timeout_s=config.timeout_s,
        shutdown_grace_s=config.shutdown_grace_s,
        tool_choice=config.tool_choice,
        delegation=config.delegation,
        failure_grace_s=config.failure_grace_s,
        profile_tools=config.profile_tools,
        media_profiles=media_profiles(profiles),
        spawn_pool=LOCAL_POOL if config.local_workers else config.pool,
        spawn_approve=config.approve,
        media_dir=config.media_dir,
    )


def _approvals(config: SessionConfig, bus: Bus) -> InteractionChannel:
    """The lead's approvals: by the session's policy, else asked over the bus (questions for
    files and images always are). Sub-agents get the policy in their spawn requests
    (``spawn_approve``)."""
    root = directory_of(config.media, config.media_dir)
    asks = BusInteractionChannel(bus, config.session_id, LEAD_NAME, file_root=root)
    return policy_channel(config.approve, asks) or asks


async def _own_worker(
    stack: AsyncExitStack,
    config: SessionConfig,
    bus: Bus,
    profiles: dict[str, Profile],
    given: Given,
) -> Worker | None:
    """The session's own worker (local workers): it hosts this session's sub-agents and no
    other session's. A profile whose model lacks a key is refused here, before anything runs."""
    if not config.local_workers:
        return None
    models = given.subagent_models
    if models is None:
        owned = ProfileModels(config.model)
        stack.push_async_callback(owned.aclose)
        owned.check(profiles.values())  # a profile's missing key: a ConfigError, now
        models = owned
    return Worker(
        bus,
        profiles,
        models,
        name=f"{config.session_id}-local",
        session=config.session_id,  # its own sub-agents only, never another session's
        parts=AgentParts(media_dir=config.media_dir, media=config.media, images=config.images),
        limits=WorkerLimits(concurrency=config.worker_concurrency),
    )


async def _close_model(model: ChatModel) -> None:
    aclose = getattr(model, "aclose", None)
    if aclose is not None:
        await aclose()
