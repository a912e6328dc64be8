"""The commands that only talk to the bus: ``post``, ``watch``, ``approve``, ``sessions``.

Each is a coroutine run by :func:`baton.cli.exits.run_async`; they raise baton's errors and
let that one place turn them into a line and an exit code. They refuse ``memory://``: an in-process
bus lives and dies inside one process, so another process has nothing to post to or watch.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import aclosing, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import anyio

from baton.bus.base import Bus, BusOptions
from baton.bus.connect import open_bus
from baton.bus.errors import BusError, SessionNotRunning, redact_url
from baton.bus.events import (
    ApprovalRequested,
    Event,
    QuestionAsked,
    SessionFinished,
    SessionStarted,
)
from baton.bus.messages import Envelope, make_envelope
from baton.bus.parts.log import EventLog, LoggedEvent
from baton.bus.tail import tail_events
from baton.bus.user_post import user_post_problem
from baton.cli.catchup import approve_line, standing_of, upload_line
from baton.cli.exits import is_tty
from baton.cli.render import JsonRenderer, PlainRenderer, Renderer
from baton.cli.sharedbus import require_shared_bus
from baton.errors import ConfigError, ExitCode
from baton.lead.keeper import has_events, lead_lost
from baton.settings import BatonSettings, media_store

log = logging.getLogger("baton.watch")

LEAD_LOST = "lead lost"
"""``baton sessions``' state of a session whose lead died (``baton resume`` continues it)."""


@asynccontextmanager
async def shared_bus(settings: BatonSettings) -> AsyncIterator[Bus]:
    """The configured bus, started and pinged; refuses the in-process one."""
    require_shared_bus(settings.bus)
    # what it posts is signed with the key; its start rides out a failover as long as a session
    options = BusOptions(signing_key=settings.signing_key, outage_s=settings.bus_outage)
    async with open_bus(settings.bus, options, prefix=settings.prefix) as bus:
        await bus.ping()
        yield bus


async def post(
    settings: BatonSettings,
    session: str,
    to: str,
    kind: str,
    text: str,
    sender: str,
    media: Sequence[str],
) -> None:
    """Put one envelope from the user on ``to``'s inbox in ``session``; prints its id.

    Only what a person says goes out (:mod:`baton.bus.user_post`): another sender, or an agent's
    type, is a ``ConfigError`` before the bus is even opened, so nothing is sent. Only to a
    session that runs (:func:`send_to_running`): an unknown or finished one is a ``ConfigError``
    (exit 2) and nothing is written."""
    problem = user_post_problem(sender, kind)
    if problem is not None:
        raise ConfigError(problem)
    envelope = make_envelope(
        session=session,
        sender=sender,
        recipient=to,
        type=kind,
        content=text,
        media_urls=list(media),
    )
    async with shared_bus(settings) as bus:
        await refuse_other_keys(bus, session, "this baton post")
        await send_to_running(bus, envelope, settings)
    print(envelope.id, flush=True)


async def refuse_other_keys(bus: Bus, session: str, sender: str) -> None:
    """A ``ConfigError`` (exit 2) when ``session`` signs its envelopes and this command has no
    signing key, or another one: what it sent would be dead-lettered unread while it reported
    success (docs/protocol.md, *Signed envelopes*)."""
    problem = await bus.key_problem(session, sender=sender)
    if problem is not None:
        raise ConfigError(f"nothing sent to session {session}: {problem}")


async def send_to_running(bus: Bus, envelope: Envelope, settings: BatonSettings) -> None:
    """Send ``envelope`` only if its session runs, the look and the write in one step
    (:meth:`~baton.bus.parts.inboxes.Inboxes.send_if_running`); else a ``ConfigError`` saying
    why, nothing written (as the HTTP API answers 404 and 409)."""
    session = envelope.session
    try:
        await bus.inboxes.send_if_running(envelope)
    except SessionNotRunning as exc:
        if not exc.status:
            raise ConfigError(unknown_session(session, settings)) from exc
        if exc.status == "closing":
            raise ConfigError(
                f"session {session} is ending: its lead gave its answer and reads no more "
                "messages; start a new session for a follow-up"
            ) from exc
        _, last = await last_cursor(bus.log, session)
        ended = last.event.status if last and isinstance(last.event, SessionFinished) else ""
        raise ConfigError(
            f"session {session} has finished{f' ({ended})' if ended else ''}: nothing reads "
            "its messages any more; start a new session for a follow-up"
        ) from exc


def unknown_session(session: str, settings: BatonSettings) -> str:
    """What every command says of a session id the bus does not know."""
    return (
        f"no session {session} on this bus ({redact_url(settings.bus)}, prefix {settings.prefix}): "
        "check the id (`baton sessions` lists them), --bus and --prefix"
    )


async def last_cursor(log: EventLog, session: str) -> tuple[str | None, LoggedEvent | None]:
    """The cursor of the newest event of a session's log, and that event (None when empty)."""
    last: LoggedEvent | None = None
    async for logged in log.tail(session, follow=False):
        last = logged
    return (last.cursor if last else None), last


async def session_known(bus: Bus, session: str) -> bool:
    """Whether the bus knows the session: it has a lead record or an event log."""
    return bool(await bus.records.lead(session)) or await has_events(bus, session)


def lead_lost_line(session: str) -> str:
    """What ``watch`` says of a session whose lead died (``sessions`` shows ``lead lost``)."""
    return (
        f"session {session}: its lead is gone (its lease lapsed) and the session did not "
        f"finish; `baton resume {session}` continues it"
    )


async def watch(
    settings: BatonSettings, session: str, as_json: bool, from_start: bool, wait: bool = False
) -> int:
    """Tail a session's events until it finishes; from now on, or from its first event.

    A session the bus does not know is a ``ConfigError`` (exit 2), unless ``wait``: then the
    tail waits for it to appear and shows it from its first event (a session started just
    before this process could read the bus would otherwise lose its beginning, or everything
    if it then went quiet). Followed from now on, a running session is first shown as it
    stands (:mod:`baton.cli.catchup`: its sub-agents, the approvals and files it waits for), and
    every approval it waits for, then or later, gets the ``baton approve`` line on stderr (a
    question for a file or an image, the ``baton upload`` line). A session
    whose lead died ends the tail with one line and exit 1 (``baton resume`` continues it). The
    tail rides out a bus outage of up to ``bus_outage`` seconds, then carries on at its cursor;
    a longer one ends it with ``BusOutage`` (exit 3, "bus unreachable")."""
    from baton.cli.run import configure_logging

    configure_logging(settings.log_level)  # as in ``baton run``: its retries log alike
    renderer: Renderer = JsonRenderer() if as_json else _plain_or_live()
    try:
        async with shared_bus(settings) as bus:
            if not wait and not await session_known(bus, session):
                raise ConfigError(
                    f"{unknown_session(session, settings)}; --wait waits for it to start"
                )
            after: str | None = None
            live_after: str | None = None  # approvals after this cursor are waited on now
            if from_start:
                live_after, _ = await last_cursor(bus.log, session)
            elif not wait:  # waited for: shown from its start, even if the session beat this
                history = await logged_so_far(bus.log, session)  # process up to it
                if history and isinstance(history[-1].event, SessionFinished):
                    print(
                        f"session {session} already {history[-1].event.status}; "
                        "use --from-start to see its events",
                        file=sys.stderr,
                    )
                    return 0
                after = live_after = history[-1].cursor if history else None
                catch_up(renderer, session, [logged.event for logged in history])
            if await _follow(
                bus, session, after, renderer, settings.bus_outage, live_after, settings.lead_lease
            ):
                return 0
            print(f"baton watch: {lead_lost_line(session)}", file=sys.stderr, flush=True)
            return ExitCode.FAILED
    finally:
        renderer.close()


async def logged_so_far(log: EventLog, session: str) -> list[LoggedEvent]:
    """Every event the session's log holds now, oldest first."""
    events = log.tail(session, follow=False)
    try:
        return [logged async for logged in events]
    finally:
        aclose = getattr(events, "aclose", None)
        if aclose is not None:  # a Redis log holds a reader until closed
            await aclose()


def catch_up(renderer: Renderer, session: str, history: list[Event]) -> None:
    """Show where a session joined in mid-course stands, and how to answer what waits."""
    standing = standing_of(history)
    renderer.join(history, standing.present)
    for request in standing.waiting:
        hint_approvals(session, request)
    for question in standing.asking:
        print(upload_line("baton watch", session, question), file=sys.stderr, flush=True)


def hint_approvals(session: str, request: ApprovalRequested) -> None:
    """The ``baton approve`` line of each call of ``request``, on stderr."""
    for call in request.calls:
        print(approve_line("baton watch", session, request.agent, call), file=sys.stderr,
              flush=True)  # fmt: skip


async def _follow(
    bus: Bus,
    session: str,
    after: str | None,
    renderer: Renderer,
    outage_s: float,
    live_after: str | None,
    lead_lease_s: float,
) -> bool:
    """Show the session's events after ``after`` until its ``session.finished`` (True), or
    until its lead is found dead (False; what it logged before that is shown first). An
    approval asked after ``live_after`` (the end of the log when the watch began; None: from
    the start) gets its ``baton approve`` line. The lead is looked at every third of
    ``lead_lease_s`` (the ``lead_lease`` setting, which the session's own should match)."""
    cursor = after
    lost = False
    live = live_after is None or live_after == after

    async def lead_watch(scope: anyio.CancelScope) -> None:
        nonlocal lost
        while True:
            await anyio.sleep(lead_lease_s / 3)  # as often as a live lead renews it
            try:
                lost = await lead_lost(bus, session)
            except BusError as exc:  # the tail decides about outages
                log.debug("session %s: lead not checked: %s", session, exc)
                continue
            if lost:
                scope.cancel()
                return

    async with anyio.create_task_group() as group:
        group.start_soon(lead_watch, group.cancel_scope)
        events = tail_events(bus, session, after=after, outage_s=outage_s)
        async with aclosing(events):
            async for logged in events:
                renderer.show(logged.event)
                cursor = logged.cursor
                if live and isinstance(logged.event, ApprovalRequested):
                    if logged.event.policy is None:  # else the agent's policy answers it
                        hint_approvals(session, logged.event)
                elif live and isinstance(logged.event, QuestionAsked):
                    print(upload_line("baton watch", session, logged.event), file=sys.stderr,
                          flush=True)  # fmt: skip
                live = live or cursor == live_after
                if isinstance(logged.event, SessionFinished):
                    group.cancel_scope.cancel()
                    return True
    async for logged in bus.log.tail(session, after=cursor, follow=False):  # its last words
        renderer.show(logged.event)
        if isinstance(logged.event, SessionFinished):
            return True
    return not lost


def _plain_or_live() -> Renderer:
    if not is_tty():
        return PlainRenderer()
    from baton.cli.render_live import LiveRenderer

    return LiveRenderer()


async def approve(
    settings: BatonSettings, session: str, call_id: str, approved: bool, reason: str
) -> None:
    """Answer an approval a sub-agent waits for, wherever it runs."""
    from baton.engine.bus_channel import answer_approval

    async with shared_bus(settings) as bus:
        await refuse_other_keys(bus, session, "this baton approve")
        agent = await answer_approval(bus, session, call_id, approved, reason=reason)
    verdict = "approved" if approved else "declined"
    print(f"{call_id} {verdict} (asked by {agent} in session {session})", flush=True)


@dataclass(frozen=True, slots=True)
class Upload:
    """What ``baton upload`` answers with: a file, a URL, or (neither) a cancel."""

    path: Path | None = None
    url: str | None = None


async def upload(settings: BatonSettings, session: str, question_id: str, answer: Upload) -> None:
    """Answer a question for a file or an image that an agent waits for, wherever it runs: the
    file goes into the media store this process is set to (``--media``), which must be the one
    the asking agent can read (docs/media.md), and the agent gets its URL."""
    from baton.engine.questions import Cancelled, Provided, answer_question, upload_file

    async with shared_bus(settings) as bus:
        await refuse_other_keys(bus, session, "this baton upload")
        if answer.path is not None:
            agent, url = await upload_file(
                media_store(settings), bus, session, question_id, answer.path,
                settings.upload_max_bytes,
            )  # fmt: skip
            said = f"uploaded {answer.path.name} as {url}"
        elif answer.url is not None:
            agent = await answer_question(bus, session, question_id, Provided(url=answer.url))
            said = f"answered with {answer.url}"
        else:
            agent = await answer_question(bus, session, question_id, Cancelled())
            said = "cancelled"
    print(f"{question_id} {said} (asked by {agent} in session {session})", flush=True)


async def sessions(settings: BatonSettings, as_json: bool) -> None:
    """List sessions, newest first, with their state and task (``lead lost``: its lead died
    before it finished, see :func:`~baton.lead.keeper.lead_lost`), and for a finished one the
    time its keys have left (``expires_in``, seconds; None: no expiry, ``baton clean`` removes
    it)."""
    rows: list[dict[str, str | float | None]] = []
    async with shared_bus(settings) as bus:
        for session in await bus.log.sessions():
            rows.append(await _session_row(bus, session))
    if as_json:
        for row in rows:
            print(json.dumps(row), flush=True)
        return
    if not rows:
        print("no sessions on this bus", file=sys.stderr)
        return
    width = max(len(str(row["session"])) for row in rows)
    for row in rows:
        print(f"{row['session']:<{width}}  {row['state']:<10}  {_expiry(row):<17}  {row['task']}")
    lost = [row["session"] for row in rows if row["state"] == LEAD_LOST]
    if lost:
        print(f"{LEAD_LOST}: the lead process died before the session finished; "
              f"`baton resume {lost[0]}` continues it", file=sys.stderr)  # fmt: skip


async def _session_row(bus: Bus, session: str) -> dict[str, str | float | None]:
    state, task, started, finished = "unknown", "", "", False
    async for logged in bus.log.tail(session, follow=False):
        event = logged.event
        if isinstance(event, SessionStarted):
            state, task, started = "running", event.task, event.ts.isoformat()
        elif isinstance(event, SessionFinished):
            state, finished = event.status, True
    if state in ("running", "unknown") and await lead_lost(bus, session):
        state = LEAD_LOST
    expires_in = await bus.retention.expiry(session) if finished else None
    return {
        "session": session,
        "state": state,
        "task": " ".join(task.split()),
        "started": started,
        "finished": finished,
        "expires_in": expires_in,
    }


def _expiry(row: dict[str, str | float | None]) -> str:
    """When a finished session's keys go ("expires in 6d 23h"); blank while it runs."""
    if not row["finished"]:
        return ""
    left = row["expires_in"]
    if not isinstance(left, float | int):
        return "no expiry"  # its end was logged, its lifetime was not set: `baton clean` it
    return f"expires in {duration(float(left))}"


def duration(seconds: float) -> str:
    """A time left, to its two largest units: ``6d 23h``, ``5h 2m``, ``4m 3s``, ``12s``."""
    left = max(0, round(seconds))
    parts: list[str] = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if left >= size or (unit == "s" and not parts):
            parts.append(f"{left // size}{unit}")
            left %= size
        if len(parts) == 2:
            break
    return " ".join(parts)
