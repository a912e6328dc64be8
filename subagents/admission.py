"""Whether a worker hosts a claimed spawn request, and as what agent.

A request is hosted only where it can be served: the session signs with this worker's key, the
profile is one of its own, and the agent is not already hosted here (a duplicate, acked: the
running copy reads the same inbox). The agent is then built from its profile: its model, its
tools (the profile's MCP servers' joining them on its first agent, when the servers start) and,
for a remote A2A profile, the runner that relays its rounds. Whatever cannot be set up is the same
on every claim, so the request is refused with an error result at once rather than coming back
every lease while the lead waits to its timeout.
"""

from __future__ import annotations

import logging
from collections.abc import Container, Mapping

from baton.bus.base import Bus, SpawnClaim
from baton.engine import ToolRegistry
from baton.subagents.a2a_worker import WorkerA2A
from baton.subagents.loop import AgentParts, Seat, SubAgent, TurnMaker
from baton.subagents.mcp_worker import WorkerMcp
from baton.subagents.models import ModelFactory
from baton.subagents.profiles import Profile
from baton.subagents.settling import ClaimSettler, why

log = logging.getLogger("baton.subagents.worker")
"""The worker's log: this is the worker's doing, and operators filter on that name."""


class Admission:
    """Admits the claims of the worker named ``worker``: its ``profiles`` and the ``models``
    their agents get; ``mcp`` and ``a2a`` are its profiles' MCP servers and remote agents (the
    worker opens and closes them); ``settler`` settles what is not hosted."""

    __slots__ = ("_a2a", "_bus", "_mcp", "_models", "_profiles", "_settler", "_tools", "_worker")

    def __init__(
        self,
        bus: Bus,
        worker: str,
        profiles: Mapping[str, Profile],
        models: ModelFactory,
        mcp: WorkerMcp,
        a2a: WorkerA2A,
        settler: ClaimSettler,
    ) -> None:
        self._bus = bus
        self._worker = worker
        self._profiles = profiles
        self._models = models
        self._mcp = mcp
        self._a2a = a2a
        self._settler = settler
        self._tools = {name: ToolRegistry(p.tools) for name, p in profiles.items()}

    async def admit(
        self, claim: SpawnClaim, parts: AgentParts, hosted: Container[tuple[str, str]]
    ) -> SubAgent | None:
        """The agent to host for ``claim``, working with ``parts`` (the worker's, for every
        agent), or None once the request is settled here instead: refused with an error result
        (a profile this worker lacks, an agent it cannot set up) or acked (a duplicate of one in
        ``hosted``, by session and agent)."""
        request = claim.request
        key = (request.session, request.agent)
        mismatch = self._settler.key_mismatch(request)
        if mismatch is not None:
            await self._settler.refuse_unreadable(claim, mismatch)
            return None
        profile = self._profiles.get(request.profile)
        if profile is None:
            await self._settler.refuse(claim, f"unknown profile {request.profile!r}")
            return None
        if key in hosted:  # already running here: it reads the same inbox
            log.info("duplicate spawn of %s/%s; already hosted", *key)
            await self._settler.ack(key, "ack duplicate", claim.receipt)
            return None
        try:
            # A profile's MCP tools join its own on its first agent (its servers start then).
            tools = self._tools[profile.name]
            self._tools[profile.name] = await self._mcp.registry(profile, tools)
            return self._agent(claim, profile, parts, self._a2a.turns(profile))
        except Exception as exc:
            # Its model or its tools cannot be set up here (a profile's endpoint settings, a
            # bug): the same on every claim, so the lead gets an error result at once instead
            # of waiting to its timeout while the request comes back every lease.
            log.exception("cannot start %s/%s", *key)
            await self._settler.refuse(claim, f"it could not be set up here: {why(exc)}")
            return None

    def _agent(
        self, claim: SpawnClaim, profile: Profile, parts: AgentParts, remote: TurnMaker | None
    ) -> SubAgent:
        own = AgentParts(
            tools=self._tools[profile.name],
            media_dir=parts.media_dir,
            media=parts.media,
            images=parts.images,
            telemetry=parts.telemetry,
            spend=parts.spend,
            on_round=parts.on_round,
            remote=remote,  # a remote A2A agent: its rounds are relayed there
        )
        seat = Seat.of(claim.request, owner=f"{self._worker}/{claim.receipt}")
        return SubAgent(self._bus, profile, self._models(profile), seat, own)
