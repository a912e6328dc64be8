"""``baton serve``: the HTTP API, SSE and the live pages of :mod:`baton.server`.

The server package is a library (it never reads flags or the environment); this command gives it
the settings every command shares (:func:`~baton.cli.options.settings_from`) plus its own
listening options. Starlette and uvicorn load only when it runs, so they stay off every other
command's start-up.
"""

from __future__ import annotations

from typing import Annotated

import typer

from baton.cli.options import (
    SERVER,
    BaseUrlOpt,
    BudgetCallsOpt,
    BudgetTokensOpt,
    BusOpt,
    BusOutageOpt,
    ConfigOpt,
    ExtraBodyOpt,
    ImageModelOpt,
    LeadPolicyOpt,
    MaxTokensOpt,
    MediaDirOpt,
    MediaOpt,
    ModelOpt,
    ModelRetriesOpt,
    ModelTimeoutOpt,
    ParallelToolCallsOpt,
    PrefixOpt,
    ProfilesOpt,
    ProfileToolsOpt,
    RetentionOpt,
    ServerApproveOpt,
    TemperatureOpt,
    ToolChoiceOpt,
    TopPOpt,
    settings_from,
)

SERVER_EXTRA_MODULES = frozenset({"starlette", "sse_starlette", "uvicorn"})
"""What ``pip install 'baton-orchestrator[server]'`` brings (pyproject.toml): without it,
``baton serve`` says which extra to install instead of a ``ModuleNotFoundError``; every other
command, and ``baton serve --help``, never imports them."""

SERVED = ("retention_s", "lead_mcp")
"""The session fields ``baton serve`` gives every session from its settings beyond the lead's
(:data:`baton.cli.run.LEAD_FIELDS`); the rest the server holds itself (the bus, the model, the
profiles, the media, the timeout) or each request says (the task, the approvals: within the
server's policy, ``--approve``)."""

SERVE_HELP = "Serve the HTTP API, Server-Sent Events and the live pages (see docs/http.md)."
SERVE_EXAMPLES = """Examples:

\b
  baton serve                                   # http://127.0.0.1:8321/, in-process bus
  baton serve --bus redis://localhost:6379/0 --port 8080
  BATON_TOKEN=$(openssl rand -hex 16) baton serve --host 0.0.0.0 --bus redis://redis:6379/0

Binding to anything but loopback needs a token (--token or BATON_TOKEN); with a token, every
request needs it: 'Authorization: Bearer TOKEN', or ?token=TOKEN on a page or EventSource URL.

Sessions and event streams ride out a bus outage of up to --bus-outage seconds (a session then
fails; the server keeps running). Exit codes: 0 stopped by a signal, 2 usage or configuration
error (e.g. no token off loopback), 3 bus unreachable at start.

With the a2a extra (pip install 'baton-orchestrator[a2a]') it is also an A2A 1.0 server: the
agent card at /.well-known/agent-card.json, JSON-RPC at /a2a/jsonrpc, HTTP+JSON under /a2a/rest
(docs/a2a.md). It speaks AG-UI 1.0 at POST /ag-ui (a thread per conversation, sub-agents as
subagent invocations, questions as interrupts; docs/ag-ui.md)."""


def serve_command(
    ctx: typer.Context,
    host: Annotated[
        str,
        typer.Option("--host", metavar="HOST", help="address to bind", rich_help_panel=SERVER),
    ] = "127.0.0.1",
    port: Annotated[
        int,
        typer.Option(
            "--port", metavar="PORT", min=0, max=65535, help="TCP port", rich_help_panel=SERVER
        ),
    ] = 8321,
    token: Annotated[
        str | None,
        typer.Option(
            "--token",
            metavar="TOKEN",
            envvar="BATON_TOKEN",
            help="bearer token (or BATON_TOKEN; required off loopback)",
            show_default="none",
            show_envvar=False,
            rich_help_panel=SERVER,
        ),
    ] = None,
    cors_origin: Annotated[
        list[str] | None,
        typer.Option(
            "--cors-origin",
            metavar="ORIGIN",
            help="allow this browser origin (repeatable)",
            show_default="none",
            rich_help_panel=SERVER,
        ),
    ] = None,
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
    tool_choice: ToolChoiceOpt = None,
    lead_policy: LeadPolicyOpt = None,
    profile_tools: ProfileToolsOpt = None,
    budget_tokens: BudgetTokensOpt = None,
    budget_calls: BudgetCallsOpt = None,
    approve: ServerApproveOpt = None,
    bus: BusOpt = None,
    prefix: PrefixOpt = None,
    bus_outage: BusOutageOpt = None,
    retention: RetentionOpt = None,
    media: MediaOpt = None,
    media_dir: MediaDirOpt = None,
    image_model: ImageModelOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Serve the HTTP API, Server-Sent Events and the live pages (see docs/http.md)."""
    from baton.cli.exits import fail, run_async
    from baton.cli.run import LEAD_FIELDS, configure_logging

    settings = settings_from(ctx)
    from baton.errors import ConfigError, ExitCode, install_hint

    try:
        from baton.server import ServerConfig, serve
        from baton.settings import image_generator, media_store, model_settings, session_fields
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] not in SERVER_EXTRA_MODULES:
            raise
        fail(
            f"the HTTP server needs the 'server' extra ({exc.name} is not installed): "
            + install_hint("server"),
            ExitCode.USAGE,
            command="baton serve",
        )

    configure_logging(settings.log_level)
    try:
        server_config = ServerConfig(
            host=host,
            port=port,
            bus_url=settings.bus,
            prefix=settings.prefix,
            signing_key=settings.signing_key,
            token=token,
            model=model_settings(settings),
            session_defaults=session_fields(settings, (*LEAD_FIELDS, *SERVED)),
            profiles=settings.profiles,
            media_dir=settings.media_dir,
            media=media_store(settings),
            images=image_generator(settings),
            cors_origins=tuple(cors_origin or ()),
            upload_max_bytes=settings.upload_max_bytes,
            session_timeout_s=settings.session_timeout,
            bus_outage_s=settings.bus_outage,
            approve=settings.approve,
            log_level=settings.log_level.lower()
            if settings.log_level != "CRITICAL"
            else "critical",
        )
    except ConfigError as exc:
        fail(str(exc), exc.exit_code, command="baton serve")
    raise typer.Exit(run_async(serve, server_config, command="baton serve"))
