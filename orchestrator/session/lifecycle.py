"""A session's life: opening it (its bus, then the parts :mod:`baton.session.build` wires), running
its lead to an outcome, and ending it — the last event, the spawn queue, the keys' lifetime, the
inboxes — whether it finished, was cancelled, lost its bus or was taken over by another lead.
The package docstring (:mod:`baton.session`) says what a user sees of it.

:class:`Session` is the public surface and decides what happens when; the steps are modules of
their own: :mod:`~baton.session.beginning` (the start on the bus), :mod:`~baton.session.tail` (the
other agents' events to the viewers), :mod:`~baton.session.ending` (the end on the bus) and
:mod:`~baton.session.answers` (what :meth:`Session.answer` accepts).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from contextlib import AsyncExitStack
from functools import partial
from pathlib import Path
from types import TracebackType

import anyio
from anyio.abc import TaskGroup
from pydantic import ValidationError

from baton.bus.base import Bus
from baton.bus.errors import BusOutage
from baton.bus.lifecycle import Service
from baton.bus.messages import MessageType, make_envelope
from baton.engine import Tool
from baton.engine.questions import (
    OpenQuestion,
    Reply,
    answer_question,
    open_questions,
    upload_file,
)
from baton.errors import ConfigError
from baton.lead.agent import LeadOutcome
from baton.lead.keeper import LeadTakenOver
from baton.lead.prompt import LEAD_NAME
from baton.lead.stream import EventFanout, EventStream
from baton.llm.types import ChatModel
from baton.media import MediaStore, open_store
from baton.session.answers import reply_of
from baton.session.beginning import begin
from baton.session.build import Built, Given, Hooks, build_session
from baton.session.config import SessionConfig, SessionResult
from baton.session.ending import SessionEnd
from baton.session.setup import session_bus
from baton.session.tail import ViewerTail
from baton.session.validation import describe_validation
from baton.subagents.models import ModelFactory

log = logging.getLogger(__name__)

WORKER_STOP_S = 5.0
"""Bound on stopping the in-process worker at the end of a session."""
TAIL_DRAIN_S = 2.0
"""How long the end of a session waits for the event tail to catch up with the log."""
CANCEL_SLACK_S = 5.0
"""Leaving the block of a running session waits for its graceful end at most the shutdown grace,
the worker's and the tail's bounds and this much more (the bus's own retries of the last writes);
past that its tasks are cancelled outright."""


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
        self._given = Given(bus, model, list(tools), subagent_models)
        self._group: TaskGroup | None = None
        self._fanout = EventFanout()
        self._built: Built | None = None
        """The session's parts, once opened (:mod:`baton.session.build`)."""
        self._bus: Bus | None = None
        self._end: SessionEnd | None = None
        """Its end on the bus, once opened (:mod:`baton.session.ending`)."""
        self._tail: ViewerTail | None = None
        """Its viewers' tail of its log, once opened (:mod:`baton.session.tail`)."""
        self._started = False
        self._done = anyio.Event()
        self._result: SessionResult | None = None
        self._error: BaseException | None = None
        self._bus_lost: BusOutage | None = None

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
        config = _validated({**settings, "session_id": session_id, "resume": True})
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
        stack.callback(self._fanout.close_viewers)  # unwound last, whatever failed before it
        bus = self._bus = await session_bus(stack, self.config, self._given.bus)
        end = self._end = SessionEnd(bus, self.id, self._fanout)
        stack.push_async_callback(end.release_inboxes)  # taken over, or failed to start
        hooks = Hooks(give_up=self._cancelling, on_outage=self._lose_bus)
        built = await build_session(stack, self.config, bus, self._given, self._fanout, hooks)
        self.config, self._built = built.config, built
        self._tail = ViewerTail(bus, self.id, self._fanout, outage_s=self.config.bus_outage_s,
                                on_outage=self._lose_bus)  # fmt: skip
        self._group = await stack.enter_async_context(anyio.create_task_group())
        stack.push_async_exit(self._stop)  # unwound first: end the session, then its parts
        await self._group.start(built.router.run_flusher)
        await self._group.start(built.watch.run)
        await self._group.start(partial(built.keeper.keep, on_lost=self._taken_over))
        if built.worker is not None:
            await self._group.start(built.worker.run)

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
            if self._built is not None and self._built.worker is not None:
                self._built.worker.give_back_now()
            if self._group is not None:
                self._group.cancel_scope.cancel()
            self._fanout.close()
        return False

    def _taken_over(self, exc: LeadTakenOver) -> None:
        """Another lead took the session's lease: this one stops and leaves the session alone."""
        log.error("%s", exc)
        self._error = exc
        if self._built is not None:
            self._built.lead.abandon(exc)

    def _cancelling(self) -> bool:
        """Whether the lead was cancelled: the event log's writes then stop retrying the bus."""
        return self._built is not None and self._built.lead.cancelled

    def _lose_bus(self, exc: BusOutage) -> None:
        """The bus has been gone longer than ``bus_outage_s``: the session fails with that
        (the first report wins), and the lead, still waiting for the bus, is cancelled."""
        if self._bus_lost is None:
            log.error("session %s: %s", self.id, exc)
            self._bus_lost = exc
            if self._given.bus is None and self._bus is not None:  # its own: nobody else's ops
                self._bus.fail_fast()  # its last writes try once each, not 1.7 s each
        self.cancel()

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
        """Put a message on the bus for the lead (a follow-up) or a sub-agent; returns its id.

        Once the session runs, only while it does (``send_if_running``): after the lead's last
        read (it answered and closed, ``docs/protocol.md``) it raises ``SessionNotRunning`` and
        sends nothing, so a message is either read or refused, never dropped unseen. Before
        the session starts, a message waits in the inbox for the lead's first read."""
        envelope = make_envelope(
            session=self.id, sender=sender, recipient=to, type=type, content=content
        )
        if self._built is not None and self._built.keeper.began:
            return await self.bus.inboxes.send_if_running(envelope)
        return await self.bus.inboxes.send(envelope)

    async def answer(
        self,
        question_id: str,
        reply: bool | Reply | Path | None = None,
        reason: str = "",
        *,
        approved: bool | None = None,
        nobody: bool = False,
    ) -> str:
        """Answer an open question of this session (:meth:`questions`); returns the agent that
        asked. ``reply`` by kind: for an approval ``True``/``False`` (``reason`` says why) or a
        :class:`~baton.engine.questions.Decision`; for a file or an image a ``Path`` (stored in
        the session's media store first, within its size limit and the types the question
        accepts), a :class:`~baton.engine.questions.Provided` URL, or
        :class:`~baton.engine.questions.Cancelled`. ``nobody``: no person could be asked, so an
        approval is declined on the runtime's behalf.

        Raises ``QuestionNotFound`` (unknown, answered, expired) or ``AnswerRefused`` (the reply
        does not fit the question); ``ApprovalNotFound`` for a ``bool`` to no open approval.
        ``approved=`` is the same as a ``bool`` reply (the older spelling)."""
        reply = reply_of(reply, reason, approved=approved, nobody=nobody)
        if isinstance(reply, Path):
            agent, _ = await upload_file(
                self._media_store(), self.bus, self.id, question_id, reply,
                self.config.upload_max_bytes,
            )  # fmt: skip
            return agent
        return await answer_question(self.bus, self.id, question_id, reply)

    async def questions(self) -> list[OpenQuestion]:
        """The questions of this session that wait for a person now: approvals, files, images."""
        return await open_questions(self.bus, self.id)

    def _media_store(self) -> MediaStore:
        return self.config.media or open_store(self.config.media_dir)

    def cancel(self) -> None:
        """Cancel the session: its lead stops, its sub-agents are told to shut down."""
        if self._built is not None:
            self._built.lead.cancel()

    # -- the session's own task -----------------------------------------------------------------

    async def _main(self) -> None:
        assert self._built is not None and self._group is not None and self._end is not None
        built = self._built
        lead = built.lead
        outcome = LeadOutcome("failed", "")
        resumed = built.record
        try:
            cursor = await begin(self.bus, built, give_up=self._cancelling)
            if self._bus_lost is not None:
                raise self._bus_lost
            assert self._tail is not None
            await self._group.start(self._tail.run, cursor)
            if resumed is not None and resumed.outcome is not None:
                outcome = resumed.outcome  # decided before the lead died: logged now, once
            elif resumed is not None and resumed.restorable:
                outcome = await lead.run(None, time_left=built.time_left)
            else:
                outcome = await lead.run(
                    self.config.task, context=self.config.context, time_left=built.time_left
                )
            if self._bus_lost is not None:  # the lead was cancelled for it
                raise self._bus_lost
        except LeadTakenOver as exc:  # another lead runs the session now: leave it alone
            with anyio.CancelScope(shield=True):
                await self._end.wind_down(built, within_s=WORKER_STOP_S)
            self._leave(exc)
            return
        except anyio.get_cancelled_exc_class():
            if isinstance(self._error, LeadTakenOver):
                self._leave(self._error)
                raise
            with anyio.CancelScope(shield=True):
                await self._end.wind_down(built, within_s=WORKER_STOP_S)
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
            await self._end.wind_down(built, within_s=WORKER_STOP_S)
            await self._finish(outcome)

    def _leave(self, exc: LeadTakenOver) -> None:
        """End this copy of a session taken over: no last event (the session is another's)."""
        self._error = exc
        self._fanout.close()
        self._done.set()

    async def _finish(self, outcome: LeadOutcome) -> None:
        """Write ``SessionFinished`` last (after the tail caught up), end the viewers' streams
        (:class:`~baton.session.ending.SessionEnd`)."""
        assert self._built is not None and self._end is not None and self._tail is not None
        await self._end.release_inboxes()  # first: whoever sees the end sees them unsubscribed
        result = self._result = self._end.result(self._built, outcome)
        await self._end.record(
            self._built, outcome, result, tail=self._tail.done, within_s=TAIL_DRAIN_S,
            bus_lost=lambda: self._bus_lost is not None,
        )  # fmt: skip
        self._done.set()
        log.info("session %s %s", self.id, result.status)


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
    :class:`~baton.errors.ConfigError` naming the field.
    """
    if isinstance(config, SessionConfig) and not settings:
        return Session(config, bus=bus, model=model, tools=tools, subagent_models=subagent_models)
    if isinstance(config, str):
        fields: dict[str, object] = {"task": config}
    else:  # the fields it was given (and its id: a new one would be drawn), then the keywords;
        # only those count as set, which a resume's config relies on (setup.resumed_config)
        given = config.model_fields_set | {"session_id"}
        fields = {name: getattr(config, name) for name in given}
    config = _validated({**fields, **settings})
    return Session(config, bus=bus, model=model, tools=tools, subagent_models=subagent_models)


def _validated(fields: dict[str, object]) -> SessionConfig:
    """``fields`` as a config, validated as :class:`SessionConfig` validates its fields."""
    try:
        return SessionConfig.model_validate(fields)
    except ValidationError as exc:
        raise ConfigError(f"bad session setting: {describe_validation(exc)}") from exc
