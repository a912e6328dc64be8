"""``baton cancel SESSION``: cancel a session that another process runs (a ``baton run`` in
another shell, ``baton serve``), by the path every canceller shares.

A session's lead cancels the session when it reads a ``shutdown`` from someone who is not one of
its agents (``docs/protocol.md``, *How agents and sessions end*): the same end as Ctrl-C on
``baton run``, ``Session.cancel()`` or a stopping server — every sub-agent is told to shut down,
and the session ends ``cancelled``. This command puts that ``shutdown`` in the lead's inbox as the
user, through :meth:`~baton.bus.parts.inboxes.Inboxes.send_if_running` (the look at the session
and the write in one step: an unknown or finished session gets nothing), then follows the
session's log until it ends. The lead reads its inbox between its turns and while it waits for
its sub-agents, so a model reply or an approval wait in progress delays the end by as long as it
takes.

Refused (exit 2, one line, nothing written): an unknown session, a finished one, one whose lead
died (nothing would read the cancel; ``baton resume`` continues it), and any on ``memory://``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from baton.cli.options import BusOpt, ConfigOpt, PrefixOpt, settings_from

if TYPE_CHECKING:
    from baton.settings import BatonSettings

CANCEL_HELP = """Cancel a session that another process runs: its lead tells every sub-agent to shut
down and the session ends 'cancelled', as on Ctrl-C in the `baton run` that started it."""
CANCEL_EXAMPLES = """Examples:

\b
  baton cancel s-123 --bus redis://localhost:6379/0
  baton cancel s-123 --no-wait          # send the cancel, do not wait for the end
  baton cancel s-123 --timeout 120      # an approval wait may hold the lead that long

The lead reads the cancel between its turns and while it waits for its sub-agents. Exit codes:
0 the session ended (or, with --no-wait, the cancel was sent), 1 it did not end within --timeout
(the cancel stays in its inbox), 2 no such session, it finished, or its lead died (`baton
resume` it), 3 bus unreachable."""


def cancel_command(
    ctx: typer.Context,
    session: Annotated[str, typer.Argument(help="the session to cancel", metavar="SESSION")],
    wait: Annotated[
        bool,
        typer.Option("--wait/--no-wait", help="wait for the session to end (see --timeout)"),
    ] = True,
    timeout: Annotated[
        float,
        typer.Option("--timeout", metavar="SECONDS", min=0.001, help="seconds to wait for the end"),
    ] = 30.0,
    bus: BusOpt = None,
    config: ConfigOpt = None,
    prefix: PrefixOpt = None,
) -> None:
    settings = settings_from(ctx)
    from baton.cli.exits import run_async

    raise typer.Exit(
        run_async(cancel, settings, session, timeout if wait else None, command="baton cancel")
    )


async def cancel(settings: BatonSettings, session: str, wait_s: float | None) -> int:
    """Send the session's lead a ``shutdown`` as the user; then, unless ``wait_s`` is None,
    follow its log until ``session.finished`` (exit 0) or ``wait_s`` passes (exit 1)."""
    import sys
    from contextlib import aclosing

    import anyio

    from baton.bus.events import SessionFinished
    from baton.bus.messages import make_envelope
    from baton.bus.tail import tail_events
    from baton.bus.user_post import USER
    from baton.cli.busops import (
        last_cursor,
        lead_lost_line,
        refuse_other_keys,
        send_to_running,
        shared_bus,
    )
    from baton.errors import ConfigError, ExitCode
    from baton.lead.keeper import lead_lost
    from baton.session.view import LEAD_NAME, describe_status

    shutdown = make_envelope(session=session, sender=USER, recipient=LEAD_NAME, type="shutdown",
                             content="cancelled by `baton cancel`")  # fmt: skip
    async with shared_bus(settings) as bus:
        if await lead_lost(bus, session):
            raise ConfigError(f"{lead_lost_line(session)}; nothing runs it to cancel")
        after, _ = await last_cursor(bus.log, session)  # the end is looked for after this
        await refuse_other_keys(bus, session, "this baton cancel")
        await send_to_running(bus, shutdown, settings)
        if wait_s is None:
            print(f"session {session}: cancel sent; its lead acts on it at its next look")
            return ExitCode.OK
        events = tail_events(bus, session, after=after, outage_s=settings.bus_outage)
        with anyio.move_on_after(wait_s):
            async with aclosing(events):
                async for logged in events:
                    if isinstance(logged.event, SessionFinished):
                        status = logged.event.status
                        late = "" if status == "cancelled" else " (before the cancel took effect)"
                        print(f"session {session} {describe_status(status)}{late}", flush=True)
                        return ExitCode.OK
    print(
        f"baton cancel: session {session} did not end within {wait_s:g} s of the cancel: its "
        "lead reads it between turns, so a model reply or an approval wait in progress holds "
        "it; the cancel stays in its inbox (`baton watch` shows the end)",
        file=sys.stderr,
        flush=True,
    )
    return ExitCode.FAILED
