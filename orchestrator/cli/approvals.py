"""Who answers the approvals of a ``baton run`` session, decided once when the run starts.

Under ``--approve auto|deny`` the session's policy answers every agent's approvals where the
agent runs (the lead's channel, and each sub-agent's spawn request: docs/protocol.md,
*Approvals*), so the command only shows them. Under ``--approve ask`` someone must answer, and
what works depends on where the run is:

- ``inline``: a person at this terminal (the live view's prompt, or ``approve? [y/n]``);
- ``remote``: no prompt here (stdin is not a terminal, or ``--json``), but the bus is shared, so
  ``baton approve`` (or ``baton serve``) in another process can answer: the command prints that
  command, with the call id, for every request;
- ``nobody``: no prompt here *and* the in-process bus (``memory://``), which no other process
  can reach. Waiting out the approval timeout would only delay the same decline, so each call is
  declined at once (fail closed), with one line saying what would work instead.

A resumed session (``baton resume``) adds one case. Its sub-agents spawned before the resume carry
the policy of *their* spawn request, and ``resume --approve auto|deny`` changes only what is
spawned from now on: so under ``enforce`` the command answers, by the new policy, every request
of such an agent — the ones already waiting when it resumed (:mod:`baton.cli.catchup` finds them)
and any they ask later. Those waiting under ``ask`` get their ``baton approve`` line (``remote``)
or are asked here (``inline``) like new ones.
"""

from __future__ import annotations

import logging
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

import anyio
from anyio.streams.memory import MemoryObjectSendStream

from baton.bus.events import ApprovalRequested, QuestionAsked, asked_for
from baton.cli.catchup import approve_line, upload_line
from baton.cli.sharedbus import in_process
from baton.settings import BatonSettings

if TYPE_CHECKING:
    from baton.session import Session

log = logging.getLogger("baton.run")

Route = Literal["policy", "enforce", "inline", "remote", "nobody"]

NOBODY_REASON = (
    "nobody can answer approvals in this run: it has no terminal to ask on, and "
    "`baton approve` cannot reach the in-process bus (memory://)"
)
NOBODY_ANSWERS = (
    "nobody can answer questions in this run: it has no terminal to ask on, and "
    "`baton upload` cannot reach the in-process bus (memory://)"
)
UPLOAD_WORKS = (
    "run it on a terminal to answer inline, or use a shared bus (--bus redis://HOST:PORT/DB) "
    "and answer with `baton upload`"
)
WHAT_WORKS = (
    "run it on a terminal to answer inline, or choose with --approve auto|deny, or use a "
    "shared bus (--bus redis://HOST:PORT/DB) and answer with `baton approve`"
)


def approval_route(
    settings: BatonSettings, *, as_json: bool, stdin_tty: bool, resumed: bool = False
) -> Route:
    """Who answers this run's approvals (see the module docstring)."""
    if settings.approve != "ask":
        return "enforce" if resumed else "policy"
    if stdin_tty and not as_json:
        return "inline"
    if in_process(settings.bus):
        return "nobody"
    return "remote"


def stdin_is_tty() -> bool:
    return sys.stdin.isatty()


async def decline_unanswerable(session: Session, request: ApprovalRequested) -> None:
    """Decline every call of ``request`` at once, saying why and what would work instead."""
    from baton.engine.bus_channel import ApprovalNotFound

    names = ", ".join(call.name for call in request.calls)
    print(
        f"baton run: declined {request.agent}'s {names}: {NOBODY_REASON}; {WHAT_WORKS}",
        file=sys.stderr,
        flush=True,
    )
    for call in request.calls:
        try:
            await session.answer(call.call_id, False, NOBODY_REASON, nobody=True)
        except ApprovalNotFound:  # decided meanwhile (it cannot have been a person)
            log.info("approval of %s was decided meanwhile", call.call_id)


async def cancel_unanswerable(session: Session, question: QuestionAsked) -> None:
    """Decline a question for a file at once: nobody here or elsewhere could answer it."""
    from baton.engine.questions import Cancelled, QuestionNotFound

    what = asked_for(question.kind)
    print(f"baton run: declined {question.agent}'s question for {what}: {NOBODY_ANSWERS}; "
          f"{UPLOAD_WORKS}", file=sys.stderr, flush=True)  # fmt: skip
    reason = NOBODY_ANSWERS
    try:
        await session.answer(question.question_id, Cancelled(reason=reason, nobody=True))
    except QuestionNotFound:
        log.info("question %s was answered meanwhile", question.question_id)


def hint_remote(session: str, request: ApprovalRequested, command: str = "baton run") -> None:
    """Say how another process answers this request (each call needs its id)."""
    for call in request.calls:
        print(approve_line(command, session, request.agent, call), file=sys.stderr, flush=True)


async def enforce_policy(session: Session, request: ApprovalRequested, mode: str) -> None:
    """Answer every call of ``request`` by the policy ``mode`` (``auto`` or ``deny``), as the
    command's own answer; a call decided meanwhile (the agent's own policy) is left as it is."""
    from baton.engine.bus_channel import ApprovalNotFound

    approved = mode == "auto"
    reason = f"{'approved' if approved else 'declined'} by `baton resume --approve {mode}`"
    for call in request.calls:
        try:
            await session.answer(call.call_id, approved, reason)
        except ApprovalNotFound:
            log.info("approval of %s was decided meanwhile", call.call_id)


@dataclass(slots=True)
class ApprovalRouter:
    """Hands each approval request to whoever answers it (see the module docstring)."""

    route: Route
    session: Session
    questions: MemoryObjectSendStream[ApprovalRequested | QuestionAsked]
    approve: str = "ask"
    command: str = "baton run"
    older: set[str] = field(default_factory=set)
    """Sub-agents spawned before a resume: their own policy is not ``approve`` (``enforce``)."""
    terminal: bool = False
    """A person is at this terminal (questions for files are asked here under any policy)."""
    shared: bool = True
    """The bus is one other processes reach (``baton upload`` can answer from elsewhere)."""

    async def __call__(self, request: ApprovalRequested | QuestionAsked) -> None:
        """The asker here, another process, or nobody (then it is declined at once); under a
        policy the agent has decided it already, unless it predates a resume (``enforce``). A
        question for a file or an image is a person's to answer under every policy."""
        if isinstance(request, QuestionAsked):
            await self._route_question(request)
        elif request.policy is not None:
            return  # the asking agent's policy answers it: nobody is asked
        elif self.route == "inline":
            try:
                self.questions.send_nowait(request)
            except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.WouldBlock):
                log.warning("cannot ask about %s's approval here; it waits for `baton approve`",
                            request.agent)  # fmt: skip
        elif self.route == "remote":
            hint_remote(self.session.id, request, self.command)
        elif self.route == "nobody":
            await decline_unanswerable(self.session, request)
        elif self.route == "enforce" and request.agent in self.older:
            await enforce_policy(self.session, request, self.approve)

    async def _route_question(self, question: QuestionAsked) -> None:
        at_terminal = self.route == "inline" or (
            self.route in ("policy", "enforce") and self.terminal
        )
        if at_terminal:
            try:
                self.questions.send_nowait(question)
                return
            except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.WouldBlock):
                log.warning("cannot ask for %s's file here", question.agent)
        if self.shared:
            print(upload_line(self.command, self.session.id, question), file=sys.stderr,
                  flush=True)  # fmt: skip
        else:
            await cancel_unanswerable(self.session, question)
