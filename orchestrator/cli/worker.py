"""``baton worker``: host sub-agents for sessions on a shared bus until stopped.

The worker reads the same settings as every other command (:func:`~baton.cli.options.
settings_from`: ``--bus``/``BATON_BUS``/``REDIS_URL``, ``--prefix``/``BATON_PREFIX``, the model
and its request settings (``--temperature``, ``--max-tokens``, …), profiles and media directory,
``--config``/``BATON_CONFIG``, ``--pool``/``BATON_POOL``), so a ``baton run`` and the
workers started beside it meet on the same bus and keys. A worker claims only the spawn requests
routed to its pool (default ``default``) for the profiles it knows; the rest stay queued for a
worker that knows them. Only its own knobs (concurrency, leases, the drain timeout, ``--check``,
``--health-file``) are flags of this command alone. The sub-agent machinery
(~1.5 s of imports) loads when the command runs, so ``baton worker --help`` stays fast.

Stopping: the first SIGTERM/SIGINT drains (running rounds finish, the rest is given back to the
bus) and the process ends within ``--shutdown-timeout`` whatever the bus does; a second one gives
every agent back at once and ends it within :data:`~baton.subagents.worker.GIVE_BACK_GRACE_S`.
What a worker could not hand back (the bus was down) another worker resumes once its lease lapses.

Health: ``--health-file PATH`` makes a serving worker touch PATH every :data:`HEALTH_BEAT_S`
seconds once its bus answers a ping, and remove it when it stops; ``--check --health-file PATH``
passes only while PATH is younger than :data:`HEALTH_STALE_S`. That checks the worker itself (its
process, event loop and bus connection, not draining), where a plain ``--check`` only asks whether
the bus answers. The compose file's health check uses it.

Exit codes (:class:`~baton.errors.ExitCode`): 0 after a clean stop (first SIGTERM/SIGINT:
drain) or a passing ``--check``; 1 after a forced stop (second signal) or a ``--check`` whose
health file is missing or stale; 2 for a bad option, setting or profile file; 3 when the bus is
unreachable.
"""

from __future__ import annotations

import logging
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from baton.bus.errors import redact_url
from baton.cli.options import (
    BUS,
    OUTPUT,
    BaseUrlOpt,
    BusOpt,
    ConfigOpt,
    ExtraBodyOpt,
    ImageModelOpt,
    MaxTokensOpt,
    MediaDirOpt,
    MediaOpt,
    ModelOpt,
    ModelRetriesOpt,
    ModelTimeoutOpt,
    ParallelToolCallsOpt,
    PoolOpt,
    PrefixOpt,
    ProfilesOpt,
    Setting,
    TemperatureOpt,
    TopPOpt,
    settings_from,
)
from baton.errors import ExitCode

if TYPE_CHECKING:
    from contextlib import AbstractAsyncContextManager

    import anyio

    from baton.bus.base import Bus
    from baton.settings import BatonSettings
    from baton.subagents.profiles import Profile
    from baton.subagents.worker import Worker

log = logging.getLogger("baton.worker")

COMMAND = "baton worker"

WHY_SHARED = "a worker serves the sessions of other processes (`baton run --no-local-workers`)"
"""Why ``baton worker`` refuses ``memory://`` (:mod:`baton.cli.sharedbus`): nobody reaches it."""

HEALTH_BEAT_S = 5.0
"""Seconds between two touches of ``--health-file`` (each after a bus ping that answered)."""
HEALTH_STALE_S = 30.0
"""A health file older than this fails ``--check``: several beats missed, not one slow ping."""

WORKER_HELP = "Host sub-agents for sessions on a shared bus until stopped (SIGTERM drains)."
WORKER_EXAMPLES = """Examples:

\b
  baton worker --bus redis://localhost:6379/0 --concurrency 200
  baton worker --bus redis://localhost:6379/0 --pool gpu --profiles gpu.toml
  baton worker --bus redis://localhost:6379/0 --check      # health check: exit 0 or 3
  baton worker --health-file /tmp/worker.health &          # the worker beats into the file
  baton worker --check --health-file /tmp/worker.health    # that worker is alive: exit 0 or 1
  REDIS_URL=redis://redis:6379/0 BATON_PREFIX=team-a baton worker   # meets `baton run` there

Needs a shared bus (Redis): on memory:// nobody could reach it (exit 2). Exit codes: 0 clean
stop (first SIGTERM drains), 1 forced stop (second signal), 2 bad option, setting or profile
file, 3 bus unreachable."""


@dataclass(frozen=True, slots=True)
class WorkerOptions:
    """What ``baton worker`` was told beyond the shared settings."""

    concurrency: int = 100
    shutdown_timeout_s: float = 30.0
    lease_s: float = 30.0
    health_file: Path | None = None


def worker_command(
    ctx: typer.Context,
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    temperature: TemperatureOpt = None,
    top_p: TopPOpt = None,
    max_tokens: MaxTokensOpt = None,
    model_timeout: ModelTimeoutOpt = None,
    model_retries: ModelRetriesOpt = None,
    parallel_tool_calls: ParallelToolCallsOpt = None,
    extra_body: ExtraBodyOpt = None,
    profiles: ProfilesOpt = None,
    bus: BusOpt = None,
    prefix: PrefixOpt = None,
    pool: PoolOpt = None,
    concurrency: Annotated[
        int,
        typer.Option(
            "--concurrency",
            "-c",
            metavar="N",
            min=1,
            help="most sub-agents hosted at once",
            rich_help_panel=BUS,
        ),
    ] = 100,
    lease: Annotated[
        float,
        typer.Option(
            "--lease",
            metavar="SECONDS",
            min=0.1,
            help="lease seconds of claims and deliveries",
            rich_help_panel=BUS,
        ),
    ] = 30.0,
    shutdown_timeout: Annotated[
        float,
        typer.Option(
            "--shutdown-timeout",
            metavar="SECONDS",
            min=0,
            help="seconds a stop on SIGTERM may take, whatever the bus does: running rounds "
            "finish, the rest is given back",
            rich_help_panel=BUS,
        ),
    ] = 30.0,
    health_file: Annotated[
        Path | None,
        typer.Option(
            "--health-file",
            metavar="FILE",
            help=f"touch this file every {HEALTH_BEAT_S:.0f} s while serving and the bus answers "
            "(removed on stop); --check reads it",
            show_default=False,
            rich_help_panel=BUS,
        ),
    ] = None,
    check: Annotated[
        bool,
        typer.Option(
            "--check",
            help="exit 0 if the bus is reachable, else 3; with --health-file: 0 if the worker "
            "beating into it is alive, else 1",
            rich_help_panel=BUS,
        ),
    ] = False,
    media: MediaOpt = None,
    media_dir: MediaDirOpt = None,
    image_model: ImageModelOpt = None,
    log_level: Annotated[
        str | None,
        typer.Option(
            "--log-level",
            metavar="LEVEL",
            help="log level on stderr (or BATON_LOG_LEVEL)",
            show_default="INFO",
            rich_help_panel=OUTPUT,
        ),
        Setting("log_level"),
    ] = None,
    config: ConfigOpt = None,
) -> None:
    """Claim spawn requests from the bus and host their sub-agents until stopped."""
    settings = settings_from(ctx)
    options = WorkerOptions(
        concurrency=concurrency,
        shutdown_timeout_s=shutdown_timeout,
        lease_s=lease,
        health_file=health_file,
    )
    raise typer.Exit(run_worker(settings, options, check=check))


def run_worker(settings: BatonSettings, options: WorkerOptions, *, check: bool = False) -> int:
    """Run ``--check`` or the worker itself; returns the exit code.

    Both go through :func:`~baton.cli.exits.run_async`, like every command: an error (a bus that
    is unreachable or goes away, a bad profiles file) ends it as one line and the error's own code,
    even when it surfaces from the worker's task group.
    """
    from baton.cli.exits import fail, run_async
    from baton.cli.logs import quiet_http_loggers
    from baton.cli.sharedbus import require_shared_bus
    from baton.errors import ConfigError

    # A worker says what it does (ready, draining) unless told otherwise: INFO by default, where
    # the interactive commands keep quiet.
    level = settings.log_level if "log_level" in settings.model_fields_set else "INFO"
    try:
        logging.basicConfig(
            level=level.upper(),
            stream=sys.stderr,
            format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        )
    except ValueError:
        fail(f"bad setting log_level: unknown level {level!r}", command=COMMAND)
    quiet_http_loggers(level)
    if check and options.health_file is not None:
        return check_health(options.health_file)  # reads a file, not the bus
    try:
        require_shared_bus(settings.bus, WHY_SHARED)
    except ConfigError as exc:
        fail(str(exc), exc.exit_code, command=COMMAND)
    if check:
        return run_async(check_bus, settings, options, command=COMMAND)
    return run_async(serve, settings, options, command=COMMAND)


def worker_profiles(settings: BatonSettings) -> dict[str, Profile]:
    """The built-in profiles, with those of the profiles file (if any) added or replacing them."""
    from baton.subagents.profiles import builtin_profiles, load_profiles, merge_profiles

    loaded = builtin_profiles()
    if settings.profiles is not None:
        loaded = merge_profiles(loaded, load_profiles(settings.profiles))
    return loaded


def _open_bus(settings: BatonSettings, options: WorkerOptions) -> AbstractAsyncContextManager[Bus]:
    from baton.bus.base import BusOptions
    from baton.bus.connect import open_bus

    bus_options = BusOptions(
        lease_s=options.lease_s, signing_key=settings.signing_key, outage_s=settings.bus_outage
    )
    return open_bus(settings.bus, bus_options, prefix=settings.prefix)


async def check_bus(settings: BatonSettings, options: WorkerOptions) -> int:
    """``--check``: 0 when the bus answers; an unreachable one raises (exit 3, one line)."""
    async with _open_bus(settings, options) as bus:
        await bus.ping()
    typer.echo(f"bus {redact_url(settings.bus)} is reachable (prefix {settings.prefix})")
    return ExitCode.OK


def check_health(path: Path, *, stale_s: float = HEALTH_STALE_S) -> int:
    """``--check --health-file``: 0 while the worker beating into ``path`` is alive, else 1."""
    from baton.cli.exits import fail

    try:
        age = time.time() - path.stat().st_mtime
    except FileNotFoundError:
        fail(f"no health file {path}: the worker has not started or has stopped",
             ExitCode.FAILED, command=COMMAND)  # fmt: skip
    if age > stale_s:
        fail(f"health file {path} is {age:.0f} s old (stale after {stale_s:.0f} s): the worker "
             "is stuck or cannot reach the bus", ExitCode.FAILED, command=COMMAND)  # fmt: skip
    typer.echo(f"worker alive: {path} beat {max(age, 0.0):.0f} s ago")
    return ExitCode.OK


async def beat_health(bus: Bus, worker: Worker, path: Path) -> None:
    """Touch ``path`` every :data:`HEALTH_BEAT_S` while ``worker`` serves and ``bus`` answers;
    remove it when the worker stops (or this task is cancelled), so a check fails at once."""
    import anyio

    from baton.bus.errors import BusError

    beats = 0
    try:
        while not worker.stopping:
            answered = False
            with anyio.move_on_after(HEALTH_BEAT_S):
                try:
                    await bus.ping()
                    answered = True
                except BusError as exc:
                    log.warning("health: the bus did not answer: %s", exc)
            if answered and not worker.stopping:
                await anyio.Path(path).touch()
                if not beats:
                    log.info("health: beating into %s every %.0f s", path, HEALTH_BEAT_S)
                beats += 1
            await anyio.sleep(HEALTH_BEAT_S)
    finally:
        with anyio.CancelScope(shield=True):
            await anyio.Path(path).unlink(missing_ok=True)


async def serve(settings: BatonSettings, options: WorkerOptions) -> int:
    """Run a worker until SIGTERM/SIGINT; the first drains, a second stops at once."""
    import anyio

    from baton.settings import image_generator, media_store, model_settings
    from baton.subagents.heap import HeapKeeper
    from baton.subagents.loop import AgentParts
    from baton.subagents.models import ProfileModels
    from baton.subagents.worker import Worker, WorkerLimits

    profiles = worker_profiles(settings)
    base = model_settings(settings)
    media = media_store(settings)  # a bucket without the s3 extra: a usage error now
    async with _open_bus(settings, options) as bus, ProfileModels(base) as models:
        models.check(profiles.values())  # a profile's missing key: a usage error now, not later
        worker = Worker(
            bus,
            profiles,
            models,
            pool=settings.pool,
            parts=AgentParts(
                media_dir=settings.media_dir, media=media, images=image_generator(settings)
            ),
            limits=WorkerLimits(
                concurrency=options.concurrency, shutdown_timeout_s=options.shutdown_timeout_s
            ),
        )
        forced = False
        async with anyio.create_task_group() as group:
            await group.start(worker.run)
            if options.health_file is not None:
                group.start_soon(beat_health, bus, worker, options.health_file)
            # The process is the worker's: its settled heap leaves the collector's full passes.
            group.start_soon(HeapKeeper().run, lambda: worker.hosted)
            typer.echo(
                f"baton worker {worker.name} ready: bus={redact_url(settings.bus)} "
                f"prefix={settings.prefix} pool={settings.pool} "
                f"concurrency={options.concurrency} "
                f"profiles={','.join(profiles)} model={models.label}",
                err=True,
            )
            with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                async for signum in signals:
                    name = signal.Signals(signum).name
                    if not forced and not worker.stopping:
                        log.info("%s: draining (up to %.0f s)", name,
                                 options.shutdown_timeout_s)  # fmt: skip
                        worker.drain()
                        group.start_soon(_stop_when_done, worker, group.cancel_scope)
                    else:
                        log.warning("%s again: giving every agent back now", name)
                        forced = True
                        worker.give_back_now()
        if not forced:
            return ExitCode.OK
        typer.echo(
            f"{COMMAND}: stopped by force (a second signal): the agents it hosted were given "
            "back unfinished; another worker resumes them once their lease lapses",
            err=True,
        )
        return ExitCode.FAILED


async def _stop_when_done(worker: Worker, scope: anyio.CancelScope) -> None:
    await worker.stopped.wait()
    scope.cancel()  # ends the signal loop; the worker itself has finished draining
