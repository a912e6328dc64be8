"""``baton clean``: remove finished sessions' keys from Redis now.

A finished session's keys expire by themselves after the retention (``--retention``, 7 days by
default; ``docs/bus.md``, *Retention*); this command removes them sooner, or removes those of
sessions that never got a lifetime (their process died right after the end, or the bus was gone
then). It looks at every session with keys under the prefix (one ``SCAN``) and removes a session
only once it is finished: a running session, and one whose lead died (``baton resume`` may still
continue it), are never touched. One line per session removed, then the count.

Only typer and the shared options are imported at the top, like every command module, so
``baton --help`` stays fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from baton.cli.options import BusOpt, ConfigOpt, PrefixOpt, settings_from

if TYPE_CHECKING:
    from baton.bus.redis.retention import SessionKeys
    from baton.settings import BatonSettings

CLEAN_HELP = """Remove finished sessions' keys from Redis now, one line each, then the count.

Finished sessions expire by themselves after --retention (7 days by default); this removes them
sooner. A running session, and one whose lead died (`baton resume` may continue it), is never
touched."""
CLEAN_EXAMPLES = """Examples:

\b
  baton clean --bus redis://localhost:6379/0    # every finished session, now
  baton clean --older-than 86400                # those that finished over a day ago
  baton clean --dry-run                         # say what would go; delete nothing

Also removes leftover keys of no session (written after a session's keys expired), except with
--older-than, whose age they cannot show. Needs a shared bus (Redis)."""


def clean_command(
    ctx: typer.Context,
    older_than: Annotated[
        float | None,
        typer.Option(
            "--older-than",
            metavar="SECONDS",
            min=0,
            help="only sessions that finished at least this long ago (default: every finished "
            "session)",
            show_default=False,
        ),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="say what would be removed; delete nothing")
    ] = False,
    bus: BusOpt = None,
    config: ConfigOpt = None,
    prefix: PrefixOpt = None,
) -> None:
    settings = settings_from(ctx)
    from baton.cli.exits import run_async

    run_async(clean, settings, older_than, dry_run, command="baton clean")


async def clean(settings: BatonSettings, older_than: float | None, dry_run: bool) -> None:
    """Remove (or with ``dry_run`` only name) the finished sessions, oldest first."""
    import time

    from baton.bus.errors import redact_url
    from baton.bus.redis import RedisBus
    from baton.cli.busops import shared_bus
    from baton.errors import ConfigError

    async with shared_bus(settings) as bus:
        if not isinstance(bus, RedisBus):  # shared_bus refuses memory://; a bus of another kind
            raise ConfigError(f"baton clean needs a Redis bus, not {redact_url(bus.url)}")
        now = time.time()
        chosen = [s for s in await bus.retention.survey() if _removable(s, older_than, now)]
        chosen.sort(key=lambda s: (s.state != "finished", s.ended_at or 0.0, s.session))
        keys = 0
        for found in chosen:
            gone = len(found.keys) if dry_run else await bus.retention.remove(found)
            keys += gone
            what = found.status if found.state == "finished" else "leftover keys"
            verb = "would remove" if dry_run else "removed"
            print(f"{verb} {found.session} ({what}, {_count(gone, 'key')})", flush=True)
        if not dry_run:
            await bus.retention.prune_index()  # ids of sessions whose keys expired meanwhile
    verb = "would remove" if dry_run else "removed"
    tail = "; nothing was deleted (--dry-run)" if dry_run else ""
    print(f"{verb} {_count(len(chosen), 'session')} ({_count(keys, 'key')}){tail}", flush=True)


def _removable(found: SessionKeys, older_than: float | None, now: float) -> bool:
    """Finished (at least ``older_than`` seconds ago, when given), or leftover keys when no age
    is asked for: nothing else is ever removed."""
    if found.state == "leftover":
        return older_than is None
    if found.state != "finished":
        return False
    if older_than is None:
        return True
    idle = found.idle_for(now)
    return idle is not None and idle >= older_than


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")
