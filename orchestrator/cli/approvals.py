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
"""

from __future__ import annotations

import logging
import sys
from typing import TYPE_CHECKING, Literal

from baton.bus.events import ApprovalRequested
from baton.cli.sharedbus import in_process
from baton.settings import BatonSettings

if TYPE_CHECKING:
    from baton.session import Session

log = logging.getLogger("baton.run")

Route = Literal["policy", "inline", "remote", "nobody"]

NOBODY_REASON = (
    "nobody can answer approvals in this run: it has no terminal to ask on, and "
    "`baton approve` cannot reach the in-process bus (memory://)"
)
WHAT_WORKS = (
    "run it on a terminal to answer inline, or choose with --approve auto|deny, or use a "
    "shared bus (--bus redis://HOST:PORT/DB) and answer with `baton approve`"
)


def approval_route(settings: BatonSettings, *, as_json: bool, stdin_tty: bool) -> Route:
    """Who answers this run's approvals (see the module docstring)."""
    if settings.approve != "ask":
        return "policy"
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
            await session.answer(call.call_id, False, NOBODY_REASON)
        except ApprovalNotFound:  # decided meanwhile (it cannot have been a person)
            log.info("approval of %s was decided meanwhile", call.call_id)


def hint_remote(session: str, request: ApprovalRequested) -> None:
    """Say how another process answers this request (each call needs its id)."""
    for call in request.calls:
        print(
            f"baton run: {request.agent} waits for approval of {call.name}: answer with "
            f"`baton approve {session} {call.call_id} --yes|--no` from any process on this "
            "bus (declined if nobody answers before its approval timeout, 120 s by default)",
            file=sys.stderr,
            flush=True,
        )
