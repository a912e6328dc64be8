"""Sessions: a lead, its sub-agents, the bus and the event stream, under one task group.

Run a whole session in your own anyio (asyncio) application — nothing needs starting first: the
in-process bus, an in-process worker for the sub-agents and the offline model are the defaults::

    from baton.api import Session, SessionConfig

    async with Session(SessionConfig(task="paint a fox and write a haiku about it")) as session:
        async for event in session.events():       # starts the session; ends after it finished
            if event.type == "text.delta" and event.agent == "lead":
                print(event.text, end="", flush=True)   # token by token
        result = await session.run()                # SessionResult(status, answer, media_urls)

``await session.run()`` alone runs it to the end too. While it runs, from any task:
``await session.post("also a cat")`` (a follow-up the lead answers in this session),
``await session.answer(call_id, approved=True)`` (an approval the lead or a sub-agent asked for),
``session.cancel()`` (shutdown to every sub-agent, then ``SessionFinished(status="cancelled")``).

With ``bus_url="redis://..."`` the session runs on Redis; with ``local_workers=False`` external
``baton worker`` processes of its ``pool`` host the sub-agents. A session's own worker hosts only
that session's sub-agents (its spawn requests are routed to it alone: ``docs/protocol.md``).
Every event also goes to the session's event log (lead text coalesced every ``text_flush_s``),
where ``baton watch`` and others read it.

Bus outages: every part of a session rides out a bus that went away (a Redis restart or
failover) and carries on where it was once it is back, for up to ``bus_outage_s`` (120 s by
default). The session's tail of its own event log doubles as its pulse on the bus: it touches the
bus every few seconds whatever the lead is doing, so once the bus has been gone longer than that,
the tail fails the session (status ``failed``, ``Session.error`` a
:class:`~baton.bus.errors.BusOutage`: "bus unreachable for N s") and the lead, whose own bus calls
wait for as long as it takes, is cancelled; ``baton run`` then exits 3.

Durable lead: while it runs, the lead holds a lease on the bus and checkpoints itself at every step
(its conversation, its sub-agents, what it took from its inbox); a session whose lead process died
(``kill -9``) is continued by ``Session.resume(session_id, bus_url="redis://...")`` (or
``baton resume``) with the results that arrived meanwhile, and ends with one final answer
(``docs/protocol.md``, *The lead's checkpoint and resuming a session*)::

    async with Session.resume("s-123", bus_url="redis://localhost:6379/0") as session:
        result = await session.run()

A session that finished, one whose lead is alive, and any on a ``memory://`` bus are refused
(:class:`~baton.lead.keeper.ResumeRefused`, a ``ConfigError``).

Lifecycle: leaving the ``async with`` block cancels a session still running (gracefully: the
sub-agents are told to shut down; a session that has not ended after a bounded wait is then
cancelled outright, with a warning) and stops everything the session started; cancelling the task
that runs it does the same and re-raises the cancellation.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterable, Sequence
from contextlib import AsyncExitStack
from functools import partial
from pathlib import Path
from types import TracebackType
from typing import Annotated, Self

import anyio
from anyio.abc import TaskGroup, TaskStatus
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    model_validator,
)

from baton.base_errors import ConfigError
from baton.bus.base import DEFAULT_RETENTION_S, Bus, BusOptions
from baton.bus.connect import open_bus
from baton.bus.errors import BusError, BusOutage
from baton.bus.events import AgentSpawned, SessionFinished, SessionStarted
from baton.bus.ids import new_id
from baton.bus.lifecycle import Service
from baton.bus.messages import (
    DEFAULT_POOL,
    LOCAL_POOL,
    MessageType,
    SessionId,
    check_pool,
    make_envelope,
)
from baton.bus.parts.retention import Leftovers
from baton.bus.retry import DEFAULT_OUTAGE_S, persist
from baton.bus.signing import SETUP_KEY_ID, key_mismatch, stored_key_id
from baton.bus.tail import tail_events
from baton.compose import (
    descriptions,
    lead_model,
    lead_servers,
    media_profiles,
    resolve_profiles,
)
from baton.defaults import ApproveMode
from baton.engine import InteractionChannel, LoopLimits, Tool
from baton.engine.bus_channel import BusInteractionChannel, answer_approval, approvals_inbox
from baton.engine.channels import policy_channel
from baton.engine.spend import BusSpend, SpendLimits
from baton.errors import describe_validation
from baton.lead.agent import Lead, LeadOutcome, LeadStatus
from baton.lead.delegation import DelegationLimits
from baton.lead.keeper import LEAD_LEASE_S, LeadKeeper, LeadRecord, LeadTakenOver, ResumeRefused
from baton.lead.options import LeadOptions, LeadParts
from baton.lead.profiles import PolicyName, lead_policy
from baton.lead.prompt import LEAD_NAME
from baton.lead.stream import DEFAULT_FLUSH_S, EventFanout, EventRouter, EventStream
from baton.llm import ModelSettings
from baton.llm.offline import OFFLINE_MODEL_NAME
from baton.llm.types import ChatModel, ToolChoice
from baton.media import DirectoryStore, MediaStore
from baton.spawn_watch import UNCLAIMED_S, SpawnWatch
from baton.subagents.a2a_worker import with_card_descriptions
from baton.subagents.images import ImageGenerator
from baton.subagents.mcp_config import McpServerConfig
from baton.subagents.mcp_worker import lead_tools
from baton.subagents.models import ModelFactory, ProfileModels
from baton.subagents.profiles import Profile
from baton.subagents.worker import Worker

log = logging.getLogger(__name__)

WORKER_STOP_S = 5.0
"""Bound on stopping the in-process worker at the end of a session."""
TAIL_DRAIN_S = 2.0
"""How long the end of a session waits for the event tail to catch up with the log."""
DROP_QUEUE_S = 1.0
"""Bound on deleting the session's own spawn queue as it ends."""
RETIRE_S = 2.0
"""Bound on giving the session's keys their lifetime as it ends."""
RELEASE_INBOXES_S = 1.0
"""Bound on unsubscribing the lead's inboxes as the session ends here."""
CANCEL_SLACK_S = 5.0
"""Leaving the block of a running session waits for its graceful end at most the shutdown grace,
the worker's and the tail's bounds and this much more (the bus's own retries of the last writes);
past that its tasks are cancelled outright."""


def new_session_id() -> str:
    """A short, unique, time-ordered-enough session id (``s-`` + 12 hex digits)."""
    return f"s-{new_id()[-12:]}"


class SessionConfig(BaseModel):
    """Everything a session needs that can be written down (live objects go to :class:`Session`).

    ``model=None`` uses the offline model (labelled as such: ``SessionStarted(offline=True)``);
    ``profiles`` are Python profiles, a TOML path, or None for the built-in demo profiles
    (each profile carries its sub-agents' own ``tool_choice`` and model overrides).

    ``local_workers`` (the default) hosts the sub-agents in the session's own worker, which takes
    this session's spawn requests and no other; without it they go to the ``baton worker``s of
    ``pool`` (``default`` unless set; ``local`` is reserved) that know their profiles.

    ``media`` is where the local workers' tools put media (a :class:`~baton.media.MediaStore`,
    e.g. ``baton.media.open_store("s3://bucket/prefix")``; None: a folder at ``media_dir``;
    docs/media.md) and ``images`` what draws ``generate_image``'s pictures (None: the offline
    painter); like ``model``, both belong to the process and are never stored.

    ``approve`` answers the approvals of every agent of the session, wherever it runs: ``ask``
    a person (``Session.answer``, ``baton approve``, the HTTP API), or ``auto``/``deny`` at once
    by policy (the lead's own channel, and each sub-agent's spawn request carries it).

    ``resume`` continues the session ``session_id`` whose lead died, from the lead's checkpoint:
    its ``task`` and settings come from there (see :meth:`Session.resume`); ``lead_lease_s`` is
    the lead's lease, the longest a resume waits to learn that a lead died.

    ``tool_choice`` is the lead's (``required`` unless set; None: not sent); ``budget`` caps the
    model calls and tokens of the lead and every sub-agent together, wherever they run (it is
    written to the bus before the lead starts, so remote workers see it); ``delegation`` caps the
    lead's sends per turn; ``profile_tools`` also offers the lead one delegation tool per
    profile; ``lead_mcp`` gives the lead the tools of MCP servers (over a profiles file's
    ``[lead.mcp.<server>]``; docs/profiles.md), started when the session opens; ``lead_policy``
    is what decides after the lead's turns and judges its answer (lead/profiles.py). Once the
    lead's model failed for good (the model's own retries spent), the session waits up to
    ``failure_grace_s`` for its sub-agents' results before it ends ``failed`` with them. Once it
    ended, its keys on Redis live ``retention_s`` more (7 days by default; ``docs/bus.md``,
    *Retention*).

    ``unclaimed_s`` bounds how long a sub-agent's spawn request waits for a worker in silence:
    past it the session logs ``agent.unclaimed`` (one warning line in every view, naming the pool
    and the profile), and when no live worker of the pool serves the profile, it ends the agent
    with that reason instead of waiting out ``timeout_s`` (:mod:`baton.spawn_watch`).
    """

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True, frozen=True)

    task: str = Field("", description="what the lead should get done (a resumed session's own)")
    context: str = Field(
        "",
        description=(
            "what came before the task (an earlier exchange of the same conversation): the lead "
            "reads it as a note ahead of the task, which stays the request as written"
        ),
    )
    session_id: SessionId = Field(default_factory=new_session_id)
    bus_url: str = "memory://"
    bus_prefix: str = Field("baton", min_length=1, description="Redis key prefix of the bus")
    bus_signing_key: SecretStr | None = Field(
        None, description="sign envelopes and refuse unsigned ones (docs/protocol.md); never stored"
    )
    model: ModelSettings | None = None
    profiles: list[Profile] | dict[str, Profile] | Path | None = None
    approve: ApproveMode = "ask"
    local_workers: bool = True
    pool: Annotated[str, AfterValidator(check_pool)] = Field(
        DEFAULT_POOL, description="the worker pool that hosts the sub-agents without local workers"
    )
    worker_concurrency: int = Field(100, ge=1)
    timeout_s: float = Field(600.0, gt=0, description="the whole session, waits included")
    media_dir: Path = Path("media")
    media: MediaStore | None = Field(
        None, description="where the local workers' tools put media (None: a folder, media_dir)"
    )
    images: ImageGenerator | None = Field(
        None, description="what draws generate_image's pictures (None: the offline painter)"
    )
    instructions: str | None = Field(None, description="appended to the lead's system prompt")
    limits: LoopLimits | None = None
    text_flush_s: float = Field(DEFAULT_FLUSH_S, gt=0)
    shutdown_grace_s: float = Field(1.0, ge=0, description="wait for sub-agents on cancel")
    tool_choice: ToolChoice | None = Field(
        "required", description="the lead's tool_choice (None: not sent); see settings.py"
    )
    budget: SpendLimits | None = Field(None, description="model calls and tokens, all agents")
    delegation: DelegationLimits = Field(default_factory=DelegationLimits)
    profile_tools: bool = False
    lead_mcp: dict[str, McpServerConfig] = Field(
        default_factory=dict,
        description="the lead's MCP servers, over a profiles file's [lead.mcp.<server>] tables",
    )
    lead_policy: PolicyName = Field(
        "auto",
        description=(
            "what judges the lead's answers: structural, guided (aids for small models), or auto "
            "(guided for models whose name says at most 4B parameters); docs/small-models.md"
        ),
    )
    failure_grace_s: float = Field(120.0, ge=0, description="wait for results after a failure")
    bus_outage_s: float = Field(
        DEFAULT_OUTAGE_S, gt=0, description="seconds of bus outage the session rides out"
    )
    lead_lease_s: float = Field(
        LEAD_LEASE_S, gt=0, description="the lead's lease: how long a resume waits for it"
    )
    retention_s: float = Field(
        DEFAULT_RETENTION_S,
        gt=0,
        description="seconds the bus keeps the session's data once it ended (docs/bus.md)",
    )
    unclaimed_s: float = Field(
        UNCLAIMED_S,
        gt=0,
        description="seconds a spawn request waits for a worker before a warning (and, with no "
        "live worker of its pool serving its profile, before its agent is ended)",
    )
    resume: bool = Field(False, description="continue session_id, whose lead died")

    @model_validator(mode="after")
    def _task_or_resume(self) -> Self:
        if not self.resume and not self.task.strip():  # blank is no task: the lead would guess
            raise ValueError(
                "task: a new session needs a task (not just whitespace): say what the lead should "
                "get done"
            )
        if self.resume and "session_id" not in self.model_fields_set:
            raise ValueError("session_id: resume=True needs the id of the session to continue")
        return self


PROCESS_FIELDS = frozenset(
    {
        "bus_url", "bus_prefix", "bus_signing_key", "model", "profiles", "resume", "session_id",
        "media", "images", "lead_mcp",
    }
)  # fmt: skip
"""What a session's stored setup never holds: it belongs to the process that runs the session
(the model's endpoint and key above all, and the profiles' code)."""
FIXED_FIELDS = ("task", "local_workers", "pool")
"""What a resume cannot change: the work, and where its sub-agents' spawn requests went."""


def _setup_of(
    config: SessionConfig, profiles: Iterable[str], model: str, *, key_id: str = ""
) -> str:
    """The session's settings as its lead's record keeps them (``setup``), with the id of the
    key its envelopes are signed with (never the key): what a sender checks its own against."""
    stored = config.model_dump(mode="json", exclude=set(PROCESS_FIELDS))
    stored["media_dir"] = str(config.media_dir.absolute())  # the resumer's cwd may differ
    setup = {"config": stored, "profiles": list(profiles), "model": model, SETUP_KEY_ID: key_id}
    return json.dumps({**setup, "started_at": time.time()}, ensure_ascii=False)


def _resumed_config(
    config: SessionConfig, record: LeadRecord
) -> tuple[SessionConfig, list[str], float]:
    """A resumed session's config (its stored setup, what the resumer set and may change, and
    the process's own fields), the profiles its lead was offered, and the time it has left
    (what was left of its own timeout, or a new ``timeout_s`` from now)."""
    session = config.session_id
    try:
        setup = json.loads(record.setup)
        stored, offered = dict(setup["config"]), [str(p) for p in setup["profiles"]]
        started_at = float(setup["started_at"])
    except (ValueError, TypeError, KeyError) as exc:
        raise ResumeRefused(f"session {session}: its setup cannot be read: {exc!r}") from exc
    given = {name: getattr(config, name) for name in config.model_fields_set}
    for name in FIXED_FIELDS:
        if given.get(name) not in (None, "", stored.get(name)):
            raise ConfigError(
                f"session {session} ran with {name}={stored.get(name)!r}; a resume cannot "
                f"change it (got {given[name]!r})"
            )
    fields = {k: v for k, v in stored.items() if k in SessionConfig.model_fields}
    fields.update({k: v for k, v in given.items() if k not in FIXED_FIELDS})
    fields.update({name: getattr(config, name) for name in PROCESS_FIELDS})
    try:
        resumed = SessionConfig.model_validate(fields)
    except ValidationError as exc:
        raise ResumeRefused(
            f"session {session}: its setup does not fit: {describe_validation(exc)}"
        ) from exc
    if "timeout_s" in given:
        return resumed, offered, resumed.timeout_s
    return resumed, offered, max(0.0, started_at + resumed.timeout_s - time.time())


class SessionResult(BaseModel):
    """How a session ended: its status, the lead's last answer, every sub-agent media URL, and
    the URLs the answer cites that nothing produced (``invented_urls``)."""

    model_config = ConfigDict(frozen=True)

    session: str
    status: LeadStatus
    answer: str = ""
    media_urls: list[str] = Field(default_factory=list)
    error: str = ""
    invented_urls: list[str] = Field(default_factory=list)


class Session(Service):
    """One session; see the module docstring. Use it as an async context manager, once (a
    :class:`~baton.bus.lifecycle.Service`)."""

    def __init__(
        self,
        config: SessionConfig,
        *,
        bus: Bus | None = None,
        model: ChatModel | None = None,
        tools: Sequence[Tool] = (),
        subagent_models: ModelFactory | None = None,
    ) -> None:
        super().__init__()
        self.config = config
        self._given_bus = bus
        self._given_model = model
        self._tools = list(tools)
        self._subagent_models = subagent_models
        self._group: TaskGroup | None = None
        self._fanout = EventFanout()
        self._router: EventRouter | None = None
        self._lead: Lead | None = None
        self._bus: Bus | None = None
        self._inboxes_released = False
        self._worker: Worker | None = None
        self._model_name = ""
        self._started = False
        self._done = anyio.Event()
        self._tail_done = anyio.Event()
        self._result: SessionResult | None = None
        self._error: BaseException | None = None
        self._bus_lost: BusOutage | None = None
        self._keeper: LeadKeeper | None = None
        self._resumed: LeadRecord | None = None
        """The dead lead's record, when this session resumes one."""
        self._time_left: float | None = None
        self._setup = ""
        self._watch: SpawnWatch | None = None
        """The watch over the session's spawn requests that no worker claims."""

    @classmethod
    def resume(
        cls,
        session_id: str,
        *,
        bus: Bus | None = None,
        model: ChatModel | None = None,
        tools: Sequence[Tool] = (),
        subagent_models: ModelFactory | None = None,
        **settings: object,
    ) -> Session:
        """The session ``session_id``, whose lead died, continued from its checkpoint (open it
        with ``async with``; :meth:`run` then carries it to its end).

        ``settings`` are :class:`SessionConfig` fields, validated alike: the bus (``bus_url``,
        ``bus_prefix``, or a ``bus``), the model endpoint and the profiles must be given again
        (they are never stored: the key, the profiles' code); ``approve``, ``media_dir`` and
        ``timeout_s`` (from now) may change; the rest comes from the session's setup. Opening
        raises :class:`~baton.lead.keeper.ResumeRefused` for a session that finished, one whose
        lead is alive, one the bus has no record of, and one on a ``memory://`` URL.
        """
        fields = {**settings, "session_id": session_id, "resume": True}
        try:
            config = SessionConfig.model_validate(fields)
        except ValidationError as exc:
            raise ConfigError(f"bad session setting: {describe_validation(exc)}") from exc
        return cls(config, bus=bus, model=model, tools=tools, subagent_models=subagent_models)

    @property
    def id(self) -> str:
        return self.config.session_id

    @property
    def bus(self) -> Bus:
        if self._bus is None:
            raise RuntimeError("the session is not open: use `async with Session(...)`")
        return self._bus

    @property
    def result(self) -> SessionResult | None:
        """The result once the session has finished, else None."""
        return self._result

    @property
    def error(self) -> BaseException | None:
        """What stopped the session before it reached an outcome of its own (a ``BusOutage``
        when the bus was gone longer than ``bus_outage_s``); None otherwise. :meth:`run`
        raises it."""
        return self._error

    # -- lifecycle ------------------------------------------------------------------------------

    async def _open(self, stack: AsyncExitStack) -> None:
        config = self.config
        stack.callback(self._fanout.close_viewers)  # unwound last, whatever failed before it
        bus = self._given_bus
        if bus is None:
            if config.resume and config.bus_url.startswith("memory:"):
                raise ResumeRefused(
                    f"session {self.id} cannot be resumed from a memory:// bus: an in-process "
                    "bus ends with its process; run sessions on Redis (--bus redis://...) to "
                    "resume them"
                )
            options = BusOptions(signing_key=config.bus_signing_key)
            opened = open_bus(config.bus_url, options, prefix=config.bus_prefix)
            bus = await stack.enter_async_context(opened)
        self._bus = bus
        stack.push_async_callback(self._release_inboxes)  # taken over, or failed to start
        keeper = self._keeper = LeadKeeper(
            bus,
            self.id,
            lease_s=config.lead_lease_s,
            outage_s=config.bus_outage_s,
            give_up=self._cancelling,
        )
        stack.push_async_callback(keeper.let_go)  # a session that did not end gives it up
        offered: list[str] | None = None
        if config.resume:
            self._resumed = await keeper.take_over()
            config, offered, self._time_left = _resumed_config(config, self._resumed)
            self.config = config
            stored = stored_key_id(self._resumed.setup)
            mismatch = None if stored is None else key_mismatch(
                stored, bus.key_id, they=f"session {self.id}", we="this resume"
            )  # fmt: skip
            if mismatch is not None:  # its agents could not read it, nor it their results
                raise ResumeRefused(f"session {self.id} cannot be resumed: {mismatch}")
        else:
            await keeper.claim()
        profiles = _offered(self.id, resolve_profiles(config.profiles), offered)
        profiles = await with_card_descriptions(profiles)  # remote agents' cards, once a process
        model = self._given_model or lead_model(config.model)
        if self._given_model is None:
            stack.push_async_callback(_close_model, model)
        self._model_name = model.model
        self._setup = _setup_of(config, profiles, model.model, key_id=bus.key_id)
        servers = lead_servers(config.profiles, config.lead_mcp)  # the lead's MCP tools: now
        store = config.media or DirectoryStore(config.media_dir)
        mcp_tools = await lead_tools(stack, servers, store, self.id)
        subagent_models = self._subagent_models
        if subagent_models is None and config.local_workers:
            owned = ProfileModels(config.model)
            stack.push_async_callback(owned.aclose)
            owned.check(profiles.values())  # a profile's missing key: a ConfigError, now
            subagent_models = owned
        self._router = EventRouter(
            bus,
            self._fanout,
            flush_s=config.text_flush_s,
            give_up=self._cancelling,
            outage_s=config.bus_outage_s,
            on_outage=self._lose_bus,
        )
        lead_options = LeadOptions(
            instructions=config.instructions,
            limits=config.limits,
            timeout_s=config.timeout_s,
            shutdown_grace_s=config.shutdown_grace_s,
            tool_choice=config.tool_choice,
            delegation=config.delegation,
            failure_grace_s=config.failure_grace_s,
            profile_tools=config.profile_tools,
            media_profiles=frozenset(media_profiles(profiles)),
            spawn_pool=LOCAL_POOL if config.local_workers else config.pool,
            spawn_approve=config.approve,
            media_dir=config.media_dir,
        )
        parts = LeadParts(
            tools=[*self._tools, *mcp_tools],
            events=self._router,
            channel=self._channel(),
            spend=None if config.budget is None else BusSpend(bus, self.id),
            checkpoints=keeper,
            policy=lead_policy(config.lead_policy, model.model),
        )
        self._lead = Lead(
            bus,
            model,
            session=self.id,
            profiles=descriptions(profiles),
            options=lead_options,
            parts=parts,
        )
        resumed = self._resumed
        if resumed is not None and resumed.restorable:
            assert resumed.history is not None and resumed.checkpoint is not None
            self._lead.restore(resumed.history, resumed.checkpoint)
        watch = self._watch = SpawnWatch(
            bus, self.id, unclaimed_s=config.unclaimed_s, give_up=self._cancelling
        )
        stack.callback(bus.spawns.watch(self.id, watch.submitted))
        for request, receipt in self._lead.team.pending_spawns():  # a dead lead's, resumed
            watch.submitted(request, receipt)
        self._group = await stack.enter_async_context(anyio.create_task_group())
        stack.push_async_exit(self._stop)  # unwound first: end the session, then its parts
        await self._group.start(self._router.run_flusher)
        await self._group.start(watch.run)
        await self._group.start(partial(keeper.keep, on_lost=self._taken_over))
        if config.local_workers:
            self._worker = Worker(
                bus,
                profiles,
                subagent_models,
                concurrency=config.worker_concurrency,
                media_dir=config.media_dir,
                media=config.media,
                images=config.images,
                name=f"{self.id}-local",
                session=self.id,  # its own sub-agents only, never another session's
            )
            await self._group.start(self._worker.run)

    async def _stop(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        """Leaving the block: a session still running is cancelled gracefully (unless the block
        failed), then the worker, the session's tasks and the viewers' feed stop."""
        try:
            if self._started and not self._done.is_set() and exc_type is None:
                self.cancel()
                bound = self.config.shutdown_grace_s + WORKER_STOP_S + TAIL_DRAIN_S + CANCEL_SLACK_S
                with anyio.move_on_after(bound):
                    await self._done.wait()
                if not self._done.is_set():
                    log.warning("session %s: not finished %.1f s after it was cancelled; "
                                "stopping its tasks outright", self.id, bound)  # fmt: skip
        finally:
            if self._worker is not None:
                self._worker.give_back_now()
            if self._group is not None:
                self._group.cancel_scope.cancel()
            self._fanout.close()
        return False

    def _taken_over(self, exc: LeadTakenOver) -> None:
        """Another lead took the session's lease: this one stops and leaves the session alone."""
        log.error("%s", exc)
        self._error = exc
        if self._lead is not None:
            self._lead.abandon(exc)

    def _cancelling(self) -> bool:
        """Whether the lead was cancelled: the event log's writes then stop retrying the bus."""
        return self._lead is not None and self._lead.cancelled

    def _lose_bus(self, exc: BusOutage) -> None:
        """The bus has been gone longer than ``bus_outage_s``: the session fails with that
        (the first report wins), and the lead, still waiting for the bus, is cancelled."""
        if self._bus_lost is None:
            log.error("session %s: %s", self.id, exc)
            self._bus_lost = exc
        self.cancel()

    def _channel(self) -> InteractionChannel:
        """The lead's approvals: by the session's policy, else asked over the bus. Sub-agents
        get the policy in their spawn requests (``spawn_approve``)."""
        by_policy = policy_channel(self.config.approve)
        return by_policy or BusInteractionChannel(self.bus, self.id, LEAD_NAME)

    # -- the public surface ---------------------------------------------------------------------

    def start(self) -> None:
        """Start the session in the background (idempotent); :meth:`run` waits for its end."""
        if self._group is None:
            raise RuntimeError("the session is not open: use `async with Session(...)`")
        if not self._started:
            self._started = True
            self._group.start_soon(self._main)

    async def run(self) -> SessionResult:
        """Start the session if needed and wait for its result.

        Raises what stopped it from running at all (e.g. ``BusUnreachable``); a model failure is a
        result with ``status="failed"``, not an exception.
        """
        self.start()
        await self._done.wait()
        if self._error is not None:
            raise self._error
        assert self._result is not None
        return self._result

    def events(self) -> EventStream:
        """Every event of the session from now on: the lead's text token by token, everything
        else as it is logged; the stream ends after ``SessionFinished``. Starts the session.

        Read it to the end (or close it): a viewer that stops reading holds the session back.
        """
        stream = self._fanout.subscribe()
        self.start()
        return stream

    async def post(
        self, content: str, *, to: str = LEAD_NAME, type: MessageType = "task", sender: str = "user"
    ) -> str:
        """Put a message on the bus for the lead (a follow-up) or a sub-agent; returns its id."""
        envelope = make_envelope(
            session=self.id, sender=sender, recipient=to, type=type, content=content
        )
        return await self.bus.inboxes.send(envelope)

    async def answer(
        self, call_id: str, approved: bool, reason: str = "", *, nobody: bool = False
    ) -> str:
        """Answer a pending approval of this session; returns the agent that asked.
        ``nobody``: no person could be asked, so it is declined on the runtime's behalf."""
        return await answer_approval(self.bus, self.id, call_id, approved, reason, nobody=nobody)

    def cancel(self) -> None:
        """Cancel the session: its lead stops, its sub-agents are told to shut down."""
        if self._lead is not None:
            self._lead.cancel()

    # -- the session's own task -----------------------------------------------------------------

    async def _main(self) -> None:
        assert self._lead is not None and self._router is not None and self._group is not None
        lead, router = self._lead, self._router
        outcome = LeadOutcome("failed", "")
        resumed = self._resumed
        try:
            started = SessionStarted(
                session=self.id,
                agent=LEAD_NAME,
                task=self.config.task,
                model=self._model_name,
                offline=self._model_name == OFFLINE_MODEL_NAME,
                resumed=resumed is not None,
            )
            if resumed is not None:
                await self._take_inbox(resumed)
            else:
                await self._keeper_of().begin(self._setup)
            if self.config.budget is not None and resumed is None:  # before the first spawn
                write = partial(self.bus.budget.set_limits, self.id, self.config.budget)
                await persist(
                    write,
                    "the session's budget",
                    give_up=self._cancelling,
                    outage_s=self.config.bus_outage_s,
                )
            cursor = await router.emit(started)
            if self._bus_lost is not None:
                raise self._bus_lost
            await self._group.start(self._tail, cursor)
            if resumed is not None and resumed.outcome is not None:
                outcome = resumed.outcome  # decided before the lead died: logged now, once
            elif resumed is not None and resumed.restorable:
                outcome = await lead.run(None, time_left=self._time_left)
            else:
                outcome = await lead.run(
                    self.config.task, context=self.config.context, time_left=self._time_left
                )
            if self._bus_lost is not None:  # the lead was cancelled for it
                raise self._bus_lost
        except LeadTakenOver as exc:  # another lead runs the session now: leave it alone
            with anyio.CancelScope(shield=True):
                await self._wind_down()
            self._leave(exc)
            return
        except anyio.get_cancelled_exc_class():
            if isinstance(self._error, LeadTakenOver):
                self._leave(self._error)
                raise
            with anyio.CancelScope(shield=True):
                await self._wind_down()
                await self._finish(LeadOutcome("cancelled", "", lead.roster.media_urls))
            raise
        except BusOutage as exc:  # met by the start, the tail or the lead's event log
            self._lose_bus(exc)
            self._error = self._bus_lost
            outcome = LeadOutcome("failed", "", lead.roster.media_urls, f"{self._bus_lost}")
        except Exception as exc:
            log.exception("session %s failed", self.id)
            self._error = exc
            outcome = LeadOutcome("failed", "", lead.roster.media_urls, f"{exc}")
        with anyio.CancelScope(shield=True):
            await self._wind_down()
            await self._finish(outcome)

    async def _take_inbox(self, resumed: LeadRecord) -> None:
        """A resumed lead reads the dead one's inbox: what was delivered to it and not acked is
        handed back (claimable at once, not a lease later), then the record names our consumer."""
        if resumed.consumer:
            release = partial(
                self.bus.inboxes.hand_back, self.id, LEAD_NAME, consumer=resumed.consumer
            )
            await persist(
                release,
                "hand back the dead lead's inbox",
                give_up=self._cancelling,
                outage_s=self.config.bus_outage_s,
            )
        await self._keeper_of().adopt_inbox()

    def _keeper_of(self) -> LeadKeeper:
        assert self._keeper is not None
        return self._keeper

    def _leave(self, exc: LeadTakenOver) -> None:
        """End this copy of a session taken over: no last event (the session is another's)."""
        self._error = exc
        self._fanout.close()
        self._done.set()

    async def _wind_down(self) -> None:
        """The lead is done: its spawn requests are watched no more (nothing is logged after
        the session's end), and the in-process worker stops."""
        if self._watch is not None:
            self._watch.stop()
        await self._stop_worker()

    async def _stop_worker(self) -> None:
        """Stop the in-process worker before the last event, so ``SessionFinished`` is last.

        Its agents have all reported by now, unless the session was cancelled or timed out: those
        are given back unfinished (their ``shutdown`` is already in their inboxes).
        """
        if self._worker is None:
            return
        self._worker.give_back_now()
        with anyio.move_on_after(WORKER_STOP_S):
            await self._worker.stopped.wait()

    async def _finish(self, outcome: LeadOutcome) -> None:
        """Write ``SessionFinished`` last (after the tail caught up), end the viewers' streams."""
        await self._release_inboxes()  # first: whoever sees the end sees them unsubscribed
        result = SessionResult(
            session=self.id,
            status=outcome.status,
            answer=outcome.answer,
            media_urls=outcome.media_urls,
            error=self._why(outcome),
            invented_urls=outcome.invented_urls,
        )
        self._result = result
        finished = SessionFinished(
            session=self.id,
            agent=LEAD_NAME,
            status=result.status,
            answer=result.answer,
            media_urls=result.media_urls,
            invented_urls=result.invented_urls,
        )
        assert self._router is not None and self._keeper is not None
        logged = False
        try:
            with anyio.fail_after(TAIL_DRAIN_S):
                await self._keeper.decided(outcome)  # a resume after this logs this same end
                await self._router.emit(finished, publish=False)
                await self._keeper.ended()
                logged = True
                await self._tail_done.wait()
        except Exception as exc:  # the bus is gone: viewers still get the end of the story
            log.warning("session %s: could not log its end: %s", self.id, exc)
        await self._drop_spawn_queue()
        if logged:
            await self._retire()
        await self._fanout.publish(finished)
        self._fanout.close()
        self._done.set()
        log.info("session %s %s", self.id, result.status)

    def _why(self, outcome: LeadOutcome) -> str:
        """The result's error: the lead's, unless work was left undone because an agent could
        not start (no worker serves it, or a worker refused it): that reason names the cause."""
        ended = self._watch.ended if self._watch is not None else []
        if outcome.status == "incomplete" and ended:
            return ended[0]
        return outcome.error

    async def _drop_spawn_queue(self) -> None:
        """The session's own spawn queue ends with it (once its end is recorded): what is left
        there, agents given back unfinished that nobody resumes now, would stay on the bus for
        ever. Never for a session taken over by another lead: that one goes on with it."""
        if self._worker is None or self._bus_lost is not None:
            return
        with anyio.move_on_after(DROP_QUEUE_S):
            try:
                left = await self.bus.spawns.drop_queue(self.id)
            except BusError as exc:
                log.warning("session %s: could not delete its spawn queue: %s", self.id, exc)
                return
            if left:
                log.info("session %s: deleted %d spawn request(s) left in its queue", self.id, left)

    async def _release_inboxes(self) -> None:
        """Stop watching the lead's inboxes (its own and its approvals'): the session ended in
        this process (finished, cancelled, taken over). A process hosting session after session
        (an embedding application, ``baton serve``) would otherwise stay subscribed to the wake-up
        channel of every session it ever ran. Idempotent, bounded and best effort: the bus may be
        gone, and a message sent later still lands in the stream, only unwatched."""
        bus = self._bus
        if bus is None or self._inboxes_released:
            return
        self._inboxes_released = True
        with anyio.CancelScope(shield=True), anyio.move_on_after(RELEASE_INBOXES_S):
            for inbox in (LEAD_NAME, approvals_inbox(LEAD_NAME)):
                try:
                    await bus.inboxes.forget(self.id, inbox)
                except BusError as exc:
                    log.debug("session %s: %s inbox not released: %s", self.id, inbox, exc)

    async def _retire(self) -> None:
        """The session's end is logged: its keys expire after ``retention_s``, and the inboxes
        nobody reads any more are emptied now (``docs/bus.md``, *Retention*): the lead's (a
        cancelled session's late results), and with the session's own worker, stopped and its
        spawn queue gone, its agents' too (the shutdowns of agents given back unfinished). A
        pool's agent may still have its shutdown to read: its inbox only expires. Bounded and
        best effort: keys left without a lifetime are still removed by ``baton clean``."""
        assert self._lead is not None
        agents = list(self._lead.roster.agents)
        inboxes = [
            name for agent in (LEAD_NAME, *agents) for name in (agent, approvals_inbox(agent))
        ]
        done = (LEAD_NAME, *agents) if self._worker is not None else (LEAD_NAME,)
        unread = [approvals_inbox(agent) for agent in done] + list(done)
        retire = partial(self.bus.retention.retire, self.id, self.config.retention_s)
        with anyio.move_on_after(RETIRE_S) as bounded:
            try:
                retired = await retire(Leftovers(agents, inboxes, unread))
            except BusError as exc:
                log.warning("session %s: its keys got no expiry: %s", self.id, exc)
                return
            log.debug("session %s: %s", self.id, retired)
        if bounded.cancelled_caught:
            log.warning("session %s: its keys got no expiry within %.1f s", self.id, RETIRE_S)

    async def _tail(self, after: str | None, *, task_status: TaskStatus[None]) -> None:
        """Forward other agents' logged events to the viewers, until ``SessionFinished``.

        The session's own events reach the viewers directly (the lead's text token by token), so
        they are skipped here: anything from ``lead``, and ``AgentSpawned`` (the lead logs it, in
        its sub-agent's name; the worker that claims the agent logs ``AgentClaimed``). The tail
        resumes at its cursor after a bus outage; one longer than ``bus_outage_s`` fails the
        session (see the module docstring).
        """
        task_status.started()
        events = tail_events(self.bus, self.id, after=after, outage_s=self.config.bus_outage_s)
        try:
            async for logged in events:
                event = logged.event
                if isinstance(event, SessionFinished):
                    break
                if event.agent == LEAD_NAME or isinstance(event, AgentSpawned):
                    continue
                await self._fanout.publish(event)
        except BusOutage as exc:
            self._lose_bus(exc)
        finally:
            self._tail_done.set()
            with anyio.CancelScope(shield=True):
                await events.aclose()


def _offered(
    session: str, profiles: dict[str, Profile], offered: list[str] | None
) -> dict[str, Profile]:
    """A resumed session's profiles: those its lead was offered, each of which the resumer must
    have (``offered`` None: a new session's, as given)."""
    if offered is None:
        return profiles
    missing = [name for name in offered if name not in profiles]
    if missing:
        raise ResumeRefused(
            f"session {session}: its lead was offered the profiles {', '.join(missing)}, which "
            "the given profiles lack; give the profiles it ran with (--profiles)"
        )
    return {name: profiles[name] for name in offered}


async def _close_model(model: ChatModel) -> None:
    aclose = getattr(model, "aclose", None)
    if aclose is not None:
        await aclose()


def open_session(
    config: SessionConfig | str,
    *,
    bus: Bus | None = None,
    model: ChatModel | None = None,
    tools: Sequence[Tool] = (),
    subagent_models: ModelFactory | None = None,
    **settings: object,
) -> Session:
    """A :class:`Session` from a config, or from a task and config fields as keywords.

    Keywords are validated exactly as :class:`SessionConfig` fields are (an unknown key, a
    negative timeout or an unknown approve mode is refused): a bad one raises
    :class:`~baton.base_errors.ConfigError` naming the field.
    """
    if isinstance(config, SessionConfig) and not settings:
        return Session(config, bus=bus, model=model, tools=tools, subagent_models=subagent_models)
    if isinstance(config, str):
        fields: dict[str, object] = {"task": config}
    else:  # the fields it was given (and its id: a new one would be drawn), then the keywords;
        # only those count as set, which a resume's config relies on (_resumed_config)
        given = config.model_fields_set | {"session_id"}
        fields = {name: getattr(config, name) for name in given}
    try:
        config = SessionConfig.model_validate({**fields, **settings})
    except ValidationError as exc:
        raise ConfigError(f"bad session setting: {describe_validation(exc)}") from exc
    return Session(config, bus=bus, model=model, tools=tools, subagent_models=subagent_models)


__all__ = [
    "ApproveMode",
    "Session",
    "SessionConfig",
    "SessionResult",
    "new_session_id",
    "open_session",
]
