"""A run's stream: the plan's sessions, translated, from where the client stopped, then live.

``RUN_STARTED`` first (``protocolVersion`` ``1.0``), then each segment of the plan: the session's
log read from its first event through the :class:`~.mapping.Translator`, silently up to the
segment's start, then as AG-UI events; the last segment is followed live. The run ends:

- when the session ends: ``RUN_FINISHED`` (success with the answer as ``result``; the cancelled
  outcome for a cancelled session), or ``RUN_ERROR`` for a session that failed, timed out or
  ended incomplete;
- when a question has waited for a person a moment (:data:`GATHER_S`, so questions asked
  together end one run): every message is closed, every invocation finished as suspended, and
  ``RUN_FINISHED`` carries the interrupts — but for a run that cancels the session, which
  follows it to its end (its questions closed by the cancel) and finishes cancelled;
- on a failure after the stream opened (the bus gone past its outage bound, anything
  unexpected): ``RUN_ERROR``.

Every frame goes out with its ``file://`` URLs rewritten to ones the client opens, or to a
marker where the server serves no such file (:mod:`.links`).

A closed connection is not a cancel: the session runs on in its own task, and the client comes
back for what it missed (docs/ag-ui.md). Only a clean end — the terminal event written — moves
the session's ``delivered`` mark.
"""

from __future__ import annotations

import logging
import math
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence

import anyio
from ag_ui.core import (
    PROTOCOL_VERSION,
    BaseEvent,
    RunErrorEvent,
    RunFinishedCancelledOutcome,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunStartedEvent,
)
from anyio.streams.memory import MemoryObjectSendStream
from starlette.types import Receive, Scope, Send

from baton.bus.base import LoggedEvent
from baton.bus.tail import tail_events
from baton.server.ag_ui.links import Links
from baton.server.ag_ui.mapping import Translator
from baton.server.ag_ui.plan import RunPlan, Segment
from baton.server.ag_ui.state import JsonObject
from baton.server.ag_ui.threads import mark_delivered
from baton.server.ag_ui.wire import MEDIA_TYPE, after, event_id, frames
from baton.server.context import ServerContext

log = logging.getLogger(__name__)

GATHER_S = 0.25
"""How long a run goes on once a question is open, before it ends with the interrupt: questions
asked together end one run, not one each, and no busier agent keeps a person from being asked."""
LIVE_BUFFER = 256
REPLAY_CHUNK = 32 * 1024
ENDED = "the session's log stopped being followed before the session ended"
FAILED = {"failed", "timed_out", "incomplete"}

Emit = Callable[[bytes], Awaitable[None]]
MediaUrls = Callable[[str], Callable[[str], str]]
"""For a session, the function that makes its media URLs ones the client can open."""


class RunResponse:
    """The ``text/event-stream`` answer to ``POST /ag-ui``: the run writes its frames through
    ``emit``; a comment line every ``heartbeat_s`` keeps proxies from closing a quiet stream,
    and a client that goes away ends the writing (and nothing else)."""

    def __init__(self, run: Callable[[Emit], Awaitable[None]], heartbeat_s: float) -> None:
        self.run = run
        self.heartbeat_s = heartbeat_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = [
            (b"content-type", MEDIA_TYPE.encode()),
            (b"cache-control", b"no-store"),
            (b"x-accel-buffering", b"no"),
        ]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        lock = anyio.Lock()
        gone = False

        async def emit(chunk: bytes) -> None:
            async with lock:
                await send({"type": "http.response.body", "body": chunk, "more_body": True})

        async with anyio.create_task_group() as group:

            async def watch() -> None:
                nonlocal gone
                while (await receive())["type"] != "http.disconnect":
                    pass
                gone = True
                group.cancel_scope.cancel()

            async def beat() -> None:
                while True:
                    await anyio.sleep(self.heartbeat_s)
                    await emit(b": keep-alive\n\n")

            group.start_soon(watch)
            group.start_soon(beat)
            await self.run(emit)
            group.cancel_scope.cancel()
        if not gone:
            await send({"type": "http.response.body", "body": b"", "more_body": False})


class RunStream:
    """One run of a plan over the server's bus (see the module docstring)."""

    def __init__(
        self, ctx: ServerContext, plan: RunPlan, media_urls: MediaUrls, delegations: Sequence[str]
    ) -> None:
        self.ctx = ctx
        self.plan = plan
        self.media_urls = media_urls
        self.delegations = delegations
        self._emit: Emit | None = None
        self._held: list[bytes] = []
        self._held_bytes = 0
        last = plan.segments[-1].session if plan.segments else plan.thread
        self._links = Links(media_urls(last))
        """The links of the session streamed now (the run's own events: its last session's)."""

    async def __call__(self, emit: Emit) -> None:
        self._emit = emit
        plan = self.plan
        await self._send([RunStartedEvent(thread_id=plan.thread, run_id=plan.run_id,
                                          protocol_version=PROTOCOL_VERSION)])  # fmt: skip
        await self._send(plan.notes)
        try:
            for segment in plan.segments[:-1]:
                await self._replay(segment)
            await self._follow(plan.segments[-1])
        except Exception as exc:  # the stream is open: a failure is the run's RUN_ERROR
            log.warning("AG-UI run %s of thread %s failed: %s", plan.run_id, plan.thread, exc)
            message = " ".join(str(exc).split()) or type(exc).__name__
            await self._send([RunErrorEvent(message=message, code=type(exc).__name__)])

    async def _send(self, events: Sequence[BaseEvent], cursor: str | None = None) -> None:
        """Write ``events`` now, after whatever a replay still holds."""
        self._held.append(self._links.wire(frames(events, cursor)))
        await self._flush()

    async def _flush(self) -> None:
        assert self._emit is not None
        chunk, self._held, self._held_bytes = b"".join(self._held), [], 0
        if chunk:
            await self._emit(chunk)

    def _translator(self, segment: Segment) -> Translator:
        translator = Translator(
            segment.session,
            media_url=self.media_urls(segment.session),
            delegations=self.delegations,
            holdings=segment.holdings,
        )
        translator.answered = set(self.plan.answered)
        self._links = translator.links
        return translator

    async def _feed(
        self, translator: Translator, start: str | None, logged: LoggedEvent, *, replay: bool
    ) -> None:
        """One logged event's AG-UI events, written at once when live; a replay's are written
        in pieces of :data:`REPLAY_CHUNK` bytes (one write per event costs the reader more than
        the translation)."""
        if not translator.live and after(logged.cursor, start):
            self._held.append(translator.links.wire(frames(translator.begin_run())))
        events = translator.feed(logged.cursor, logged.event)
        if events:
            chunk = frames(events, event_id(translator.session, logged.cursor))
            chunk = translator.links.wire(chunk)
            self._held.append(chunk)
            self._held_bytes += len(chunk)
        if not replay or self._held_bytes >= REPLAY_CHUNK:
            await self._flush()

    async def _backlog(self, segment: Segment) -> tuple[list[LoggedEvent], str | None]:
        """The session's log as of now, and where this run starts in it."""
        backlog = [logged async for logged in self._tail(segment.session, None, follow=False)]
        return backlog, self._start(segment, backlog)

    def _start(self, segment: Segment, backlog: list[LoggedEvent]) -> str | None:
        """Where a client without a cursor stopped. The last clean run delivered through
        ``segment.after``; but a client may have let go of a stream the server finished writing:
        the content of the log it holds (its messages) is the witness. When it lacks content
        from before that mark, its stream stopped after the last content it holds whole. A
        client that sends back none of what it was sent is taken at the mark."""
        if segment.holdings is None or not segment.holdings.witness:
            return segment.after
        scan = self._translator(segment)
        for logged in backlog:
            scan.feed(logged.cursor, logged.event)
        missing = scan.missing_from
        if missing is None or (segment.after is not None and after(missing, segment.after)):
            return segment.after
        return scan.held_through

    async def _replay(self, segment: Segment) -> None:
        """An earlier session of the thread, to its end (it has ended: a later one exists)."""
        translator = self._translator(segment)
        backlog, start = await self._backlog(segment)
        for logged in backlog:
            await self._feed(translator, start, logged, replay=True)
        if translator.live:
            await self._send(translator.close(_why(translator)))
        await self._delivered(translator)

    async def _follow(self, segment: Segment) -> None:
        translator = self._translator(segment)
        backlog, start = await self._backlog(segment)
        for logged in backlog:
            await self._feed(translator, start, logged, replay=True)
        if not translator.live:
            await self._send(translator.begin_run())
        await self._flush()
        if translator.finished is None and (
            self.plan.cancelling or not translator.open_questions()
        ):
            await self._live(translator, start)
        await self._end(translator)

    async def _live(self, translator: Translator, start: str | None) -> None:
        """Follow the log past what was read, until the session ends or a question has waited
        a quiet moment."""
        send, receive = anyio.create_memory_object_stream[LoggedEvent](LIVE_BUFFER)
        failure: list[Exception] = []
        async with anyio.create_task_group() as group:
            group.start_soon(self._reader, translator.session, translator.cursor, send, failure)
            async with receive:
                deadline: float | None = None
                while translator.finished is None:
                    if self.plan.cancelling or not translator.open_questions():
                        deadline = None  # a cancelled session closes its questions as it ends
                    elif deadline is None:
                        deadline = anyio.current_time() + GATHER_S
                    wait = math.inf if deadline is None else deadline - anyio.current_time()
                    logged: LoggedEvent | None = None
                    with anyio.move_on_after(max(wait, 0)):
                        try:
                            logged = await receive.receive()
                        except anyio.EndOfStream:  # the tail failed (or, unheard of, ended)
                            if not failure:
                                failure.append(RuntimeError(ENDED))
                    if logged is None:
                        break  # a question has waited GATHER_S: the run ends with it
                    await self._feed(translator, start, logged, replay=False)
            group.cancel_scope.cancel()
        if failure:
            raise failure[0]

    async def _reader(
        self,
        session: str,
        cursor: str | None,
        send: MemoryObjectSendStream[LoggedEvent],
        failure: list[Exception],
    ) -> None:
        async with send:
            try:
                async for logged in self._tail(session, cursor, follow=True):
                    await send.send(logged)
            except Exception as exc:  # handed to the run, which ends with RUN_ERROR
                failure.append(exc)

    def _tail(
        self, session: str, cursor: str | None, *, follow: bool
    ) -> AsyncGenerator[LoggedEvent, None]:
        return tail_events(
            self.ctx.bus,
            session,
            after=cursor,
            follow=follow,
            outage_s=self.ctx.config.bus_outage_s,
        )

    async def _end(self, translator: Translator) -> None:
        """The terminal events: how the session ended, or the interrupts it waits on."""
        finished = translator.finished
        if finished is None:
            closing, interrupts = translator.suspend(translator.open_questions())
            await self._send(closing)
            await self._delivered(translator)
            await self._finish(
                translator, outcome=RunFinishedInterruptOutcome(interrupts=interrupts)
            )
            return
        await self._send(translator.close(_why(translator)))
        await self._delivered(translator)
        if finished.status == "completed":
            urls = self.media_urls(translator.session)
            result = {
                "answer": finished.answer,
                "status": finished.status,
                "mediaUrls": [urls(url) for url in finished.media_urls],
            }
            await self._finish(translator, result=result)
        elif finished.status == "cancelled":
            await self._finish(translator, outcome=RunFinishedCancelledOutcome())
        else:
            error = RunErrorEvent(
                message=_failure(translator), code=finished.status, usage=translator.usage()
            )
            await self._send([error])

    async def _finish(
        self,
        translator: Translator,
        *,
        outcome: RunFinishedInterruptOutcome | RunFinishedCancelledOutcome | None = None,
        result: JsonObject | None = None,
    ) -> None:
        plan = self.plan
        finished = RunFinishedEvent(
            thread_id=plan.thread,
            run_id=plan.run_id,
            outcome=outcome,
            result=result,
            usage=translator.usage(),
        )
        await self._send([finished])

    async def _delivered(self, translator: Translator) -> None:
        """Record how far this run delivered the session's log (before its terminal event goes
        out, so a client that answers at once finds it)."""
        if translator.cursor is None:
            return
        with anyio.CancelScope(shield=True):
            await mark_delivered(self.ctx.bus, translator.session, translator.cursor)


def _why(translator: Translator) -> str:
    finished = translator.finished
    return finished.status if finished is not None else "ended"


def _failure(translator: Translator) -> str:
    """One line saying why a session did not complete."""
    finished = translator.finished
    status = finished.status.replace("_", " ") if finished is not None else "ended"
    errors = translator.lead_errors
    reasons = (
        translator.folder.view.answer_check.reasons if translator.folder.view.answer_check else []
    )
    why = errors[-1] if errors else "; ".join(reasons)
    line = f"the session {translator.session} {status}" + (f": {why}" if why else "")
    return " ".join(line.split())[:2000]
