"""``baton run``: one whole session through the :class:`~baton.session.Session` API.

The command is a viewer of the session's event stream, plus two duties a viewer cannot leave to
anyone else: answering approvals when asked to (``--approve ask``: inline on a terminal, else
as :mod:`baton.cli.approvals` says), and Ctrl-C. The
first Ctrl-C cancels the session gracefully — the lead tells every sub-agent to shut down and the
session ends ``cancelled`` — and the command exits 130; a second one stops at once.

Approval questions are answered in their own task, so a person thinking about one does not stop
the view (or other sub-agents' events) from being read.

A bus outage longer than ``--bus-outage`` fails the session with a ``BusOutage``; the command
then ends as any command the bus failed: one line saying "bus unreachable", exit 3.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream
from pydantic import ValidationError

from baton.bus.errors import BusUnreachable
from baton.bus.events import (
    ApprovalRequested,
    QuestionAnswered,
    QuestionAsked,
    SessionFinished,
    SessionStarted,
    ToolCallInfo,
)
from baton.cli.approvals import ApprovalRouter, approval_route, stdin_is_tty
from baton.cli.catchup import standing_of
from baton.cli.exits import is_tty
from baton.cli.logs import quiet_http_loggers
from baton.cli.render import JsonRenderer, PlainRenderer, Renderer, ending_line
from baton.cli.sharedbus import in_process, require_shared_bus
from baton.errors import ConfigError, ExitCode
from baton.session.validation import describe_validation
from baton.session.view import LEAD_NAME
from baton.settings import BatonSettings, model_label, profile_set, session_fields

Asked = ApprovalRequested | QuestionAsked
"""What the person at the terminal is asked: an approval, or a question for a file or image."""

if TYPE_CHECKING:
    from baton.engine.questions import Reply
    from baton.session import Session, SessionResult
    from baton.subagents.profiles import Profile

log = logging.getLogger("baton.run")

NO_LOCAL_WORKERS = "--no-local-workers leaves the sub-agents to `baton worker`s in other processes"
"""Why ``run --no-local-workers`` refuses ``memory://``: no worker could claim its requests."""


@dataclass(frozen=True, slots=True)
class RunOptions:
    """What ``baton run`` was told beyond the shared settings."""

    task: str
    as_json: bool = False
    local_workers: bool = True
    session: str | None = None
    only: tuple[str, ...] = ()


async def run_session(settings: BatonSettings, options: RunOptions) -> int:
    """Run the session to its end; returns the exit code (:data:`EXIT_CODES`)."""
    from baton.session import Session, SessionConfig

    configure_logging(settings.log_level)
    if not options.local_workers:
        require_shared_bus(settings.bus, NO_LOCAL_WORKERS)
    fields: dict[str, object] = {
        **session_fields(settings),
        "task": options.task,
        "profiles": select_profiles(settings, options.only),
        "local_workers": options.local_workers,
    }
    if options.session:
        fields["session_id"] = options.session
    try:
        config = SessionConfig.model_validate(fields)
    except ValidationError as exc:
        raise ConfigError(f"bad session setting: {describe_validation(exc)}") from exc
    session = Session(config)
    interrupted, finished = await view_session(session, settings, as_json=options.as_json)
    if interrupted:
        return interrupted_exit(interrupted, finished, "baton run")
    if isinstance(session.error, BusUnreachable):  # the bus failed, not the work: exit 3
        raise session.error
    return exit_for(finished, session.result)


async def view_session(
    session: Session, settings: BatonSettings, *, as_json: bool, command: str = "baton run"
) -> tuple[str, SessionFinished | None]:
    """Run ``session`` to its end with its events shown and its approvals routed (inline,
    remote, nobody, or by a resumed session's new policy); ``baton run`` and ``baton resume``
    share it. Returns the signal that interrupted it (its name, ``SIGINT`` or ``SIGTERM``; ""
    when none did), and its ``session.finished`` (None when it never logged one)."""
    renderer = make_renderer(as_json, model_label(settings))
    finished: SessionFinished | None = None
    signals = SignalWatch()
    try:
        with signals.scope:
            async with session, anyio.create_task_group() as group:
                questions_send, questions = anyio.create_memory_object_stream[Asked](64)
                terminal = stdin_is_tty() and not as_json
                route = approval_route(settings, as_json=as_json, stdin_tty=terminal,
                                       resumed=session.config.resume)  # fmt: skip
                closings = Closings()
                if terminal:
                    group.start_soon(answer_questions, session, renderer, questions, closings)
                else:
                    questions.close()
                group.start_soon(signals.run, session)
                router = ApprovalRouter(route, session, questions_send, settings.approve, command)
                router.terminal, router.shared = terminal, not in_process(settings.bus)
                finished = await show_events(session, renderer, router, closings)
                group.cancel_scope.cancel()
    finally:
        renderer.close()
    return signals.interrupted, finished


async def show_events(
    session: Session, renderer: Renderer, router: ApprovalRouter, closings: Closings
) -> SessionFinished | None:
    """Feed the session's events to the renderer; route approval requests (cli/approvals.py),
    and tell the terminal's prompt when a question it asks closed elsewhere (``closings``).
    A resumed session is first shown as it stood when its lead died (:func:`join_resumed`)."""
    finished: SessionFinished | None = None
    with session.events() as events:
        async with router.questions:
            async for event in events:
                renderer.show(event)
                if isinstance(event, SessionStarted) and event.resumed:
                    for request in await join_resumed(session, renderer, event, router):
                        await router(request)
                elif isinstance(event, ApprovalRequested | QuestionAsked):
                    await router(request=event)
                elif isinstance(event, QuestionAnswered):
                    closings.close(event.question_id)
                elif isinstance(event, SessionFinished):
                    finished = event
    return finished


async def join_resumed(
    session: Session, renderer: Renderer, started: SessionStarted, router: ApprovalRouter
) -> list[Asked]:
    """Show a resumed session as its log stood before ``started`` (its sub-agents, what waits:
    :mod:`baton.cli.catchup`), note its older sub-agents on ``router``, and return the
    approval requests and the questions for files of those that still wait. The dead lead's
    own are left out: the resumed lead runs its cut turn again and asks anew."""
    from baton.cli.busops import logged_so_far

    logged = [entry.event for entry in await logged_so_far(session.bus.log, session.id)]
    starts = [i for i, e in enumerate(logged) if isinstance(e, SessionStarted) and e.resumed]
    history = logged[: starts[-1]] if starts else logged  # ours is the latest resumed start
    standing = standing_of(history, with_start=False)

    def void(event: object) -> bool:  # a question of the dead lead: it will ask anew
        return isinstance(event, ApprovalRequested | QuestionAsked) and event.agent == LEAD_NAME

    renderer.join(history, [event for event in standing.present if not void(event)])
    renderer.view.apply(started)  # the resumed start is the session's own: the dead lead's
    router.older.update(name for name in standing.view.agents if name != LEAD_NAME)  # waits go
    asked: list[Asked] = [*standing.waiting, *standing.asking]
    return [request for request in asked if not void(request)]


class Closings:
    """The questions the terminal asks that closed elsewhere meanwhile (answered by another
    process, expired, withdrawn): each wakes the prompt that still waits on it."""

    def __init__(self) -> None:
        self._closed: dict[str, anyio.Event] = {}

    def of(self, question_id: str) -> anyio.Event:
        return self._closed.setdefault(question_id, anyio.Event())

    def close(self, question_id: str) -> None:
        self.of(question_id).set()


async def answer_questions(
    session: Session,
    renderer: Renderer,
    questions: MemoryObjectReceiveStream[Asked],
    closings: Closings,
) -> None:
    """Ask the person at the terminal about each question, one at a time: approvals, and the
    files and images agents ask for."""
    from baton.cli.render_live import LiveRenderer
    from baton.engine.bus_channel import ApprovalNotFound

    async with questions:
        async for request in questions:
            if isinstance(request, QuestionAsked):
                await _answer_here(session, renderer, request, closings.of(request.question_id))
                continue
            pending = [
                c for c in request.calls if (request.agent, c.call_id) in renderer.view.pending
            ]
            if not pending:
                continue  # already decided elsewhere (baton approve, a timeout)
            ask = renderer.ask if isinstance(renderer, LiveRenderer) else _plain_ask
            approved = await ask(request.agent, pending)
            for call in pending:
                try:
                    await session.answer(call.call_id, approved)
                except ApprovalNotFound:
                    log.info("approval of %s was decided meanwhile", call.call_id)


async def _answer_here(
    session: Session, renderer: Renderer, question: QuestionAsked, closed: anyio.Event
) -> None:
    """A path (uploaded), a URL, or nothing (cancelled), typed at the terminal; an answer that
    does not fit is said in one line and the question is asked again. The prompt goes away
    when the question expires or closes elsewhere, so the next line typed never goes to a
    question nobody waits on."""
    from baton.engine.questions import QuestionNotFound
    from baton.errors import BatonError

    while not closed.is_set() and question.question_id in renderer.view.questions:
        typed = await _typed_while_open(renderer, question, closed)
        if typed is None:
            print(f"baton run: question {question.question_id} closed", file=sys.stderr,
                  flush=True)  # fmt: skip
            return
        try:
            await session.answer(question.question_id, _typed_reply(typed))
            return
        except QuestionNotFound as exc:
            print(f"baton run: {exc}", file=sys.stderr, flush=True)
            return
        except BatonError as exc:  # refused, unreadable, a store that failed: ask again
            print(f"baton run: {exc}; try again", file=sys.stderr, flush=True)


async def _typed_while_open(
    renderer: Renderer, question: QuestionAsked, closed: anyio.Event
) -> str | None:
    """The line typed for ``question``, or None when it expired or closed first."""
    from baton.bus.events import utc_now
    from baton.cli.render_live import UPLOAD_PROMPT, LiveRenderer, read_line
    from baton.session.view import describe_question

    typed: str | None = None
    left = (question.expires_at - utc_now()).total_seconds()
    with anyio.move_on_after(max(left, 0.0)):
        async with anyio.create_task_group() as group:

            async def give_up_when_closed() -> None:
                await closed.wait()
                group.cancel_scope.cancel()

            group.start_soon(give_up_when_closed)
            if isinstance(renderer, LiveRenderer):
                typed = await renderer.ask_for(question)
            else:
                print(f"{question.agent} asks for {describe_question(question)}", flush=True)
                print(UPLOAD_PROMPT, end=" ", flush=True)
                typed = (await read_line()).strip()
            group.cancel_scope.cancel()
    return typed


def _typed_reply(typed: str) -> Reply | Path:
    """What a line typed in answer to a question for a file means: nothing, a cancel; an
    http(s) or data: URL, itself; anything else, the path of a file to upload."""
    from baton.engine.questions import Cancelled, Provided

    if not typed:
        return Cancelled()
    if typed.startswith(("http://", "https://", "data:")):
        return Provided(url=typed)
    return Path(os.path.expanduser(typed))


async def _plain_ask(agent: str, calls: list[ToolCallInfo]) -> bool:
    from baton.cli.render_live import read_line

    print(f"approve {agent}'s call? [y/n] ", end="", flush=True)
    return (await read_line()).strip().lower() in {"y", "yes"}


class SignalWatch:
    """First SIGINT/SIGTERM: cancel the session gracefully. Second: cancel ``scope`` (all).

    ``interrupted`` names the first signal ("" until one came)."""

    def __init__(self) -> None:
        self.scope = anyio.CancelScope()
        self.interrupted = ""

    async def run(self, session: Session) -> None:
        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as received:
            async for signum in received:
                name = signal.Signals(signum).name
                if self.interrupted:
                    log.warning("%s again: stopping now", name)
                    self.scope.cancel()
                    return
                self.interrupted = name
                session.cancel()


def interrupted_exit(signal_name: str, finished: SessionFinished | None, command: str) -> int:
    """Exit 130 after a signal, with the one stderr line every non-zero exit has: which signal,
    and how the session ended (``cancelled``, its sub-agents told to stop), or that a second
    signal stopped everything before it could end."""
    if finished is None:  # a second signal stopped everything at once
        said = f"{command}: stopped at once by a second signal (after {signal_name}), before the "
        said += "session could finish"
    else:
        said = ending_line(command, finished.status, f"interrupted by {signal_name}")
    print(said, file=sys.stderr, flush=True)
    return ExitCode.INTERRUPTED


EXIT_CODES: dict[str, ExitCode] = {
    "completed": ExitCode.OK,
    "incomplete": ExitCode.INCOMPLETE,
    "failed": ExitCode.FAILED,
    "timed_out": ExitCode.FAILED,
    "cancelled": ExitCode.INTERRUPTED,
}
"""How each session status ends ``baton run`` (README, "Exit codes")."""


def exit_for(
    finished: SessionFinished | None, result: SessionResult | None, command: str = "baton run"
) -> int:
    """The exit code of the session's status; for any but ``completed``, one stderr line
    (``command``'s) saying why (a session that never finished counts as failed)."""
    status = finished.status if finished is not None else "failed"
    code = EXIT_CODES.get(status, ExitCode.FAILED)
    if code is not ExitCode.OK:
        reason = " ".join(why_not_completed(status, finished, result).split())
        print(ending_line(command, status, reason), file=sys.stderr, flush=True)
    return code


def why_not_completed(
    status: str, finished: SessionFinished | None, result: SessionResult | None
) -> str:
    """The error the session recorded, else what its status and its answer's check say."""
    if result is not None and result.error:
        return result.error
    invented = finished.invented_urls if finished is not None else []
    if status == "incomplete":
        if invented:
            return f"the answer cites URLs that no tool produced: {', '.join(invented)}"
        return "work was delegated, but no sub-agent delivered a result"
    return status.replace("_", " ")


def make_renderer(as_json: bool, model_label: str = "") -> Renderer:
    """JSON lines with ``--json``, the live view on a terminal, plain lines otherwise; the
    header of the latter two names ``model_label`` (the model and its endpoint)."""
    if as_json:
        return JsonRenderer()
    if is_tty():
        from baton.cli.render_live import LiveRenderer

        return LiveRenderer(model_label=model_label)
    return PlainRenderer(model_label=model_label)


LEAD_FIELDS = ("tool_choice", "unclaimed_s", "budget", "profile_tools", "delegation", "lead_policy")
"""The session's fields about its lead and its sub-agents' spawns (and a resume keeps its own)."""


def session_settings(settings: BatonSettings) -> dict[str, object]:
    """The :class:`~baton.session.SessionConfig` fields of :data:`LEAD_FIELDS` the settings set
    (unset: the config's own defaults)."""
    return session_fields(settings, LEAD_FIELDS)


def select_profiles(settings: BatonSettings, only: tuple[str, ...]) -> dict[str, Profile]:
    """The profiles the lead may start: from the profiles file (or built-in), narrowed by
    ``--profile``; an unknown name is a ``ConfigError`` listing the known ones."""
    profiles: Mapping[str, Profile] = profile_set(settings)
    unknown = [name for name in only if name not in profiles]
    if unknown:
        known = ", ".join(sorted(profiles))
        raise ConfigError(f"unknown profile {unknown[0]!r} (known: {known})")
    return {name: profiles[name] for name in only} if only else dict(profiles)


def configure_logging(level: str) -> None:
    """Log lines on stderr as ``baton: message``; tracebacks only at DEBUG.

    A user sees a log record as one line; a traceback is for someone debugging baton itself.
    """
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_OneLine())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    try:
        root.setLevel(level.upper())
    except ValueError as exc:
        raise ConfigError(f"bad setting log_level: unknown level {level!r}") from exc
    quiet_http_loggers(level)


class _OneLine(logging.Formatter):
    def __init__(self) -> None:
        super().__init__("baton: %(message)s")

    def formatException(self, ei: object) -> str:
        return ""

    def format(self, record: logging.LogRecord) -> str:
        if logging.getLogger().level <= logging.DEBUG:
            return super().format(record)
        record.exc_info, record.exc_text = None, None
        text = super().format(record)
        return " ".join(text.split())
