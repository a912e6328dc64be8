"""``baton worker``: run a worker service from the command line.

Register it on the main typer app with ``app.command("worker")(worker_command)``; ``python -m
subagents worker ...`` runs the same command without the main CLI.

Exit codes: 0 after a clean stop (first SIGTERM/SIGINT: drain) or a passing ``--check``; 1 after a
forced stop (second signal); 2 for a bad option or profile file; 3 when the bus is unreachable.
"""

from __future__ import annotations

import logging
import signal
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import anyio
import typer

from baton.bus.base import BusOptions
from baton.bus.connect import open_bus
from baton.bus.errors import BusUnreachable, ConfigError
from baton.subagents.models import EnvModels
from baton.subagents.profiles import Profile, builtin_profiles, load_profiles, merge_profiles
from baton.subagents.worker import Worker

log = logging.getLogger("baton.worker")

EXIT_FORCED = 1
EXIT_CONFIG = 2
EXIT_UNREACHABLE = 3


def worker_command(
    bus: Annotated[
        str, typer.Option("--bus", envvar="BATON_BUS", help="bus URL: memory:// or redis://...")
    ] = "memory://",
    concurrency: Annotated[
        int, typer.Option("--concurrency", "-c", min=1, help="most sub-agents hosted at once")
    ] = 100,
    profiles: Annotated[
        Path | None,
        typer.Option("--profiles", envvar="BATON_PROFILES", help="TOML file of agent profiles"),
    ] = None,
    shutdown_timeout: Annotated[
        float,
        typer.Option("--shutdown-timeout", min=0, help="seconds running rounds get on SIGTERM"),
    ] = 30.0,
    check: Annotated[
        bool, typer.Option("--check", help="exit 0 if the bus is reachable, else 3")
    ] = False,
    media_dir: Annotated[
        Path, typer.Option("--media-dir", envvar="BATON_MEDIA_DIR", help="where tools write media")
    ] = Path("media"),
    lease: Annotated[
        float, typer.Option("--lease", min=0.1, help="lease seconds of claims and deliveries")
    ] = 30.0,
    prefix: Annotated[str, typer.Option("--prefix", help="Redis key prefix")] = "baton",
    log_level: Annotated[str, typer.Option("--log-level", envvar="BATON_LOG_LEVEL")] = "INFO",
) -> None:
    """Claim spawn requests from the bus and host their sub-agents until stopped."""
    logging.basicConfig(
        level=log_level.upper(),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        loaded = builtin_profiles()
        if profiles is not None:
            loaded = merge_profiles(loaded, load_profiles(profiles))
        settings = WorkerSettings(
            url=bus,
            options=BusOptions(lease_s=lease),
            prefix=prefix,
            profiles=loaded,
            concurrency=concurrency,
            shutdown_timeout_s=shutdown_timeout,
            media_dir=media_dir,
        )
        code = anyio.run(check_bus if check else serve, settings)
    except ConfigError as exc:
        typer.echo(f"baton worker: {exc}", err=True)
        raise typer.Exit(EXIT_CONFIG) from exc
    raise typer.Exit(code)


@dataclass(frozen=True, slots=True)
class WorkerSettings:
    """Everything ``baton worker`` was told, resolved."""

    url: str
    options: BusOptions
    prefix: str
    profiles: dict[str, Profile]
    concurrency: int
    shutdown_timeout_s: float
    media_dir: Path


async def check_bus(settings: WorkerSettings) -> int:
    """``--check``: 0 when the bus answers, else 3 with one line on stderr."""
    try:
        async with open_bus(settings.url, settings.options, prefix=settings.prefix) as bus:
            await bus.ping()
    except BusUnreachable as exc:
        typer.echo(f"baton worker: {exc}", err=True)
        return EXIT_UNREACHABLE
    typer.echo(f"bus {settings.url} is reachable")
    return 0


async def serve(settings: WorkerSettings) -> int:
    """Run a worker until SIGTERM/SIGINT; the first drains, a second stops at once."""
    try:
        async with (
            open_bus(settings.url, settings.options, prefix=settings.prefix) as bus,
            EnvModels() as models,
        ):
            worker = Worker(
                bus,
                settings.profiles,
                models,
                concurrency=settings.concurrency,
                media_dir=settings.media_dir,
                shutdown_timeout_s=settings.shutdown_timeout_s,
            )
            forced = False
            async with anyio.create_task_group() as group:
                await group.start(worker.run)
                typer.echo(
                    f"baton worker {worker.name} ready: bus={settings.url} "
                    f"concurrency={settings.concurrency} profiles={','.join(settings.profiles)} "
                    f"model={models.label}",
                    err=True,
                )
                with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                    async for signum in signals:
                        name = signal.Signals(signum).name
                        if not forced and not worker.stopping:
                            log.info("%s: draining (up to %.0f s)", name,
                                     settings.shutdown_timeout_s)  # fmt: skip
                            worker.shutdown()
                            group.start_soon(_stop_when_done, worker, group.cancel_scope)
                        else:
                            log.warning("%s again: giving every agent back now", name)
                            forced = True
                            worker.shutdown(now=True)
            return EXIT_FORCED if forced else 0
    except BusUnreachable as exc:
        typer.echo(f"baton worker: {exc}", err=True)
        return EXIT_UNREACHABLE


async def _stop_when_done(worker: Worker, scope: anyio.CancelScope) -> None:
    await worker.stopped.wait()
    scope.cancel()  # ends the signal loop; the worker itself has finished draining
