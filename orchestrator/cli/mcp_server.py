"""``baton mcp``: baton as an MCP server over stdio (:mod:`baton.server.mcp`, docs/mcp-server.md).

A desktop host starts it with one line of configuration (``"command": "baton", "args":
["mcp"]``) and speaks MCP on its stdin and stdout. It takes the settings every command shares
(:func:`~baton.cli.options.settings_from`): the model, the profiles, the bus, the media. The
``mcp`` SDK loads only when it runs; without the ``mcp`` extra it says which to install.
"""

from __future__ import annotations

import typer

from baton.cli.options import (
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

MCP_HELP = "Serve baton over MCP on stdin/stdout, for a desktop host (see docs/mcp-server.md)."
MCP_EXAMPLES = """Examples:

\b
  baton mcp                                     # in-process bus, offline model
  baton mcp --media-dir ~/baton-media --profiles ~/profiles.toml
  baton mcp --bus redis://localhost:6379/0      # sessions and tasks on a shared bus

A host's configuration (Claude Desktop's claude_desktop_config.json):

\b
  {"mcpServers": {"baton": {"command": "baton", "args": ["mcp"]}}}

Tools: run (a whole session: the answer, its media, progress as notifications, approvals asked
through the host), post, state, cancel, profiles; run may be called as a task. Only MCP goes to
stdout; logs go to stderr. The same server answers on /mcp of `baton serve` (Streamable HTTP).
Exit codes: 0 the host closed the connection or a signal stopped it, 2 usage or configuration
error, 3 bus unreachable at start."""


def mcp_command(
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
    """Serve baton over MCP on stdin/stdout, for a desktop host (see docs/mcp-server.md)."""
    from baton.cli.exits import fail, run_async
    from baton.cli.run import LEAD_FIELDS, configure_logging
    from baton.cli.serve import SERVED
    from baton.errors import ConfigError, ExitCode, install_hint

    settings = settings_from(ctx)
    try:
        from baton.server import ServerConfig
        from baton.server.mcp.stdio import serve_stdio
        from baton.settings import image_generator, media_store, model_settings, session_fields
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] not in ("mcp", "mcp_types", "starlette", "uvicorn"):
            raise
        fail(
            f"baton mcp needs the 'mcp' extra ({exc.name} is not installed): "
            + install_hint("mcp"),
            ExitCode.USAGE,
            command="baton mcp",
        )

    configure_logging(settings.log_level)  # on stderr: stdout carries the protocol
    try:
        if "media_dir" not in settings.model_fields_set:  # the host's working directory may be
            # read-only: a per-user folder then (docs/mcp-server.md)
            from baton.server.mcp.media_home import default_media_dir

            chosen = default_media_dir(settings.media_dir)
            settings = settings.model_copy(update={"media_dir": chosen})
        server_config = ServerConfig(
            bus_url=settings.bus,
            prefix=settings.prefix,
            signing_key=settings.signing_key,
            model=model_settings(settings),
            session_defaults=session_fields(settings, (*LEAD_FIELDS, *SERVED)),
            profiles=settings.profiles,
            media_dir=settings.media_dir,
            media=media_store(settings),
            images=image_generator(settings),
            session_timeout_s=settings.session_timeout,
            bus_outage_s=settings.bus_outage,
            approve=settings.approve,
        )
    except ConfigError as exc:
        fail(str(exc), exc.exit_code, command="baton mcp")
    raise typer.Exit(run_async(serve_stdio, server_config, command="baton mcp"))
