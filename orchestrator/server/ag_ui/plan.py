"""What a run does before it streams: find the thread, act on the input, say what to stream.

Acting comes first, so that anything the request cannot do is refused as an HTTP error with no
stream, and the stream that follows shows the effect:

- a **new thread** starts a session (the newest user message is its task; earlier messages and
  the input's ``context`` a note ahead of it), on the server's bus — its sub-agents on the
  server's own worker or on ``baton worker``\\ s, as the server is configured;
- a **new user message** on a live session is a follow-up to its lead; on a thread whose session
  has ended it starts the thread's next session (:mod:`.threads`);
- **``resume``** answers the open questions it names (:mod:`.interrupts`); entries for questions
  no longer open — of any session of the thread — are reported in the stream with how they
  ended, not refused;
- **``forwardedProps.baton.cancel``** cancels the thread's session (a session this server runs);
- **nothing new** (the same history, no resume): the client comes back for what it missed.

What to stream is a list of :class:`Segment`: one per session, from where the client stopped —
after its ``Last-Event-ID``, or after what the thread's last clean run delivered, leaving out
what the client's messages show it holds — the last followed live.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ag_ui.core import BaseEvent, CustomEvent, ResumeEntry
from starlette.exceptions import HTTPException

from baton.bus.errors import InvalidEnvelope, SessionNotRunning
from baton.bus.messages import make_envelope
from baton.bus.user_post import USER
from baton.engine.bus_channel import ApprovalNotFound
from baton.engine.questions import (
    AnswerRefused,
    QuestionNotFound,
    answer_question,
    store_upload,
)
from baton.lead.keeper import SessionExists
from baton.media import DirectoryStore, MediaError, MediaStore
from baton.server.ag_ui.holdings import Holdings
from baton.server.ag_ui.inputs import RunInput, text_of, trailing_user_messages, transcript
from baton.server.ag_ui.interrupts import Answer, ResumeRefused, Upload, read_resume
from baton.server.ag_ui.ledger import interrupt_id, ledger_of, split_interrupt_id
from baton.server.ag_ui.threads import (
    Thread,
    delivered,
    exchange_of,
    find_thread,
    session_config,
    take,
    taken,
    thread_problem,
)
from baton.server.context import ServerContext
from baton.server.routes import refuse_other_keys

IGNORED = "baton.resume.ignored"


@dataclass(frozen=True, slots=True)
class Said:
    """What the user said that no run took yet: the messages' ids, and their text."""

    ids: list[str]
    text: str
    first: int
    """The index of its first message in the input (what comes before is history)."""


@dataclass(frozen=True, slots=True)
class Segment:
    """One session of the run's stream: its events after ``after`` (None: all of them), less
    the content ``holdings`` says the client has."""

    session: str
    after: str | None
    holdings: Holdings | None = None


@dataclass(slots=True)
class RunPlan:
    thread: str
    run_id: str
    segments: list[Segment]
    answered: set[str] = field(default_factory=set)
    """The interrupts this run answered: not asked again while their answer travels."""
    notes: list[BaseEvent] = field(default_factory=list)
    """``CUSTOM`` reports the run opens with (resume entries that answered nothing)."""
    cancelling: bool = False
    """The run cancels the session: it follows the session to its end, not stopping for the
    questions still open (the cancel closes them)."""


async def plan_run(ctx: ServerContext, given: RunInput) -> RunPlan:
    """Act on the input (see the module docstring) and say what to stream; raises the HTTP
    error that refuses the request, having done nothing, when it cannot be done."""
    run = given.run
    problem = thread_problem(run.thread_id)
    if problem is not None:
        raise HTTPException(422, f"threadId: {problem}")
    thread = await find_thread(ctx, run.thread_id)
    user = await _said(ctx, thread, given)
    holdings = Holdings.of(run.messages)
    plan = RunPlan(thread.id, run.run_id, [])
    if not thread.sessions:
        if user is None:
            raise HTTPException(
                422, f"thread {thread.id!r} is new: send a user message to start it"
            )
        plan.notes = _ignored_all(run.resume or [], "no session of this thread asked it")
        await _start(ctx, thread.id, user, _history(given, user), thread.id)
        plan.segments.append(Segment(thread.id, None))
        return plan
    plan.segments = await _segments(ctx, thread, given, holdings)
    if given.options.cancel:
        plan.cancelling = _cancel(ctx, thread)
        why = "the run cancels the session: nothing is answered"
        plan.notes = _ignored_all(run.resume or [], why)
        return plan
    plan.answered, plan.notes = await _resume(ctx, thread, run.resume or [])
    if user is not None:
        started = await _follow_up(ctx, thread, user)
        if started is not None:
            plan.segments.append(Segment(started, None, holdings))
    return plan


async def _said(ctx: ServerContext, thread: Thread, given: RunInput) -> Said | None:
    """The user messages the input ends with that no run of the thread took (all of them on a
    new thread), oldest first, as one request; None when there are none."""
    fresh = []
    for index, message in reversed(trailing_user_messages(given.run.messages)):
        if thread.sessions and await taken(ctx.bus, thread.sessions[-1], message.id):
            break
        fresh.append((index, message))
    if not fresh:
        return None
    fresh.reverse()
    text = "\n\n".join(text_of(index, message) for index, message in fresh)
    return Said([message.id for _, message in fresh], text, fresh[0][0])


async def _segments(
    ctx: ServerContext, thread: Thread, given: RunInput, holdings: Holdings
) -> list[Segment]:
    """Where the client stopped: after its ``Last-Event-ID`` exactly, else after the last clean
    run's end, skipping content it holds."""
    current = thread.sessions[-1]
    resumption = given.resumption
    if resumption is None:
        return [Segment(current, await delivered(ctx.bus, current), holdings)]
    if resumption.cursor is None:  # "0": the whole thread
        return [Segment(session, None) for session in thread.sessions]
    session = resumption.session or current
    if session not in thread.sessions:
        raise HTTPException(
            400, f"Last-Event-ID names session {session!r}, which is not of thread {thread.id!r}"
        )
    later = thread.sessions[thread.sessions.index(session) + 1 :]
    return [Segment(session, resumption.cursor), *(Segment(s, None) for s in later)]


def _cancel(ctx: ServerContext, thread: Thread) -> bool:
    """Cancel the thread's live session; whether one was cancelled (False: it had ended, and
    the stream shows how)."""
    if not thread.live:
        return False
    current = thread.sessions[-1]
    if not ctx.host.cancel(current):
        raise HTTPException(
            409,
            f"session {current!r} runs in another process (baton run, another server): cancel "
            "it there; nothing was cancelled",
        )
    return True


async def _resume(
    ctx: ServerContext, thread: Thread, entries: Sequence[ResumeEntry]
) -> tuple[set[str], list[BaseEvent]]:
    """Answer the questions of the live session ``entries`` name; every entry is checked before
    any is sent. An entry for a question of an earlier session, or of one that has ended, is
    reported with how the question ended (each session named is read from its log)."""
    if not entries:
        return set(), []
    session = thread.sessions[-1]
    named = {split_interrupt_id(entry.interrupt_id, session)[0] for entry in entries}
    ledgers = {s: await ledger_of(ctx.bus, s) for s in thread.sessions if s in named}
    try:
        answers, ignored = read_resume(entries, ledgers, session, live=thread.live)
    except ResumeRefused as exc:
        raise HTTPException(422, f"{exc}; nothing was answered") from exc
    if answers:
        await refuse_other_keys(ctx, session)
    for answer in answers:
        await _answer(ctx, session, answer)
    notes: list[BaseEvent] = [
        CustomEvent(
            name=IGNORED, value={"interruptId": i.interrupt_id, "why": i.why, "expired": i.expired}
        )
        for i in ignored
    ]
    return {interrupt_id(session, answer.question.id) for answer in answers}, notes


async def _answer(ctx: ServerContext, session: str, answer: Answer) -> None:
    question, reply = answer.question, answer.reply
    try:
        if isinstance(reply, Upload):
            await store_upload(
                _media_store(ctx), ctx.bus, session, question.id, data=reply.data,
                filename=reply.name, media_type=reply.media_type,
            )  # fmt: skip
        else:
            await answer_question(ctx.bus, session, question.id, reply)
    except (QuestionNotFound, ApprovalNotFound) as exc:  # answered or expired meanwhile
        raise HTTPException(409, str(exc)) from exc
    except (AnswerRefused, InvalidEnvelope) as exc:
        raise HTTPException(422, str(exc)) from exc
    except MediaError as exc:
        raise HTTPException(503, f"the file could not be stored: {exc}") from exc


def _media_store(ctx: ServerContext) -> MediaStore:
    return ctx.config.media or DirectoryStore(ctx.media_root)


def _ignored_all(entries: Sequence[ResumeEntry], why: str) -> list[BaseEvent]:
    return [
        CustomEvent(
            name=IGNORED, value={"interruptId": e.interrupt_id, "why": why, "expired": False}
        )
        for e in entries
    ]


def _history(given: RunInput, said: Said) -> str:
    """What a new session's lead is told came before its task: the client's earlier messages
    and the input's context entries."""
    run = given.run
    earlier = transcript(run.messages[: said.first])
    context = "\n".join(f"{c.description}: {c.value}" for c in run.context or ())
    parts = []
    if earlier:
        parts.append(f"Earlier in this conversation (before baton joined it):\n{earlier}")
    if context:
        parts.append(f"Context from the application:\n{context}")
    return "\n\n".join(parts)


async def _start(ctx: ServerContext, session: str, user: Said, context: str, thread: str) -> None:
    if ctx.host.stopping:
        raise HTTPException(503, "the server is stopping: run the thread on another one")
    try:
        await ctx.host.start(session_config(ctx, session, user.text, context))
    except SessionExists as exc:  # another run started it a moment ago
        raise HTTPException(409, f"thread {thread!r}: {exc}; run again to join it") from exc
    await take(ctx.bus, session, *user.ids)


async def _follow_up(ctx: ServerContext, thread: Thread, user: Said) -> str | None:
    """What the user said: to the live session's lead, or the thread's next session when the
    newest has ended (its id returned)."""
    current = thread.sessions[-1]
    if thread.live:
        await refuse_other_keys(ctx, current)
        try:
            envelope = make_envelope(session=current, sender=USER, recipient="lead",
                                     type="task", content=user.text)  # fmt: skip
            await ctx.bus.inboxes.send_if_running(envelope)
        except InvalidEnvelope as exc:
            raise HTTPException(422, exc.reason) from exc
        except SessionNotRunning:
            if thread.status == "pending":  # starting: no lead record yet, nor a read inbox
                await ctx.bus.inboxes.send(envelope)
            else:  # it ended a moment ago: the thread's next session takes the message
                return await _next(ctx, thread, user)
        await take(ctx.bus, current, *user.ids)
        return None
    return await _next(ctx, thread, user)


async def _next(ctx: ServerContext, thread: Thread, user: Said) -> str:
    session = thread.next_session()
    note = await exchange_of(ctx, thread.id, thread.sessions)
    await _start(ctx, session, user, note, thread.id)
    return session
