"""The ``baton`` commands: their options, help and examples — and nothing heavy.

Only typer, the shared options (:mod:`baton.cli.options`) and the light exit helpers are imported
here; ``worker`` and ``serve`` are declared in their own modules. Each command imports what it needs
(openai, redis, the engine, sub-agents) inside its body, so ``baton --help`` stays fast. Help is
rendered by click, not rich: rich's help formatter alone costs ~190 ms to import.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from baton.cli.cancel import CANCEL_EXAMPLES, CANCEL_HELP, cancel_command
from baton.cli.clean import CLEAN_EXAMPLES, CLEAN_HELP, clean_command
from baton.cli.exits import run_async
from baton.cli.helpfmt import BatonCommand
from baton.cli.mcp_server import MCP_EXAMPLES, MCP_HELP, mcp_command
from baton.cli.options import (
    APPROVALS,
    BUS,
    SESSION,
    BaseUrlOpt,
    BudgetCallsOpt,
    BudgetTokensOpt,
    BusOpt,
    BusOutageOpt,
    ConfigOpt,
    ExtraBodyOpt,
    ImageModelOpt,
    JsonOpt,
    LeadPolicyOpt,
    MaxTokensOpt,
    MediaDirOpt,
    MediaOpt,
    ModelOpt,
    ModelRetriesOpt,
    ModelTimeoutOpt,
    ParallelToolCallsOpt,
    PoolOpt,
    PrefixOpt,
    ProfileOnlyOpt,
    ProfilesOpt,
    ProfileToolsOpt,
    RetentionOpt,
    Setting,
    TemperatureOpt,
    ToolChoiceOpt,
    TopPOpt,
    settings_from,
)
from baton.cli.serve import SERVE_EXAMPLES, SERVE_HELP, serve_command
from baton.cli.tools import TOOLS_EXAMPLES, TOOLS_HELP, tools_command
from baton.cli.worker import WORKER_EXAMPLES, WORKER_HELP, worker_command

app = typer.Typer(
    name="baton",
    help="baton: a lead agent that delegates to sub-agents over a message bus.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _print_version(value: bool) -> None:
    """``baton --version``: eager, so it answers before any command or option is looked at."""
    if value:
        from baton.errors import installed_version

        typer.echo(f"baton {installed_version()}")
        raise typer.Exit()


@app.callback()
def main(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_print_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """baton: a lead agent that delegates to sub-agents over a message bus."""


RUN_EXAMPLES = """Examples:

\b
  baton run "paint a fox and a heron, then write a haiku"
  baton run --json "paint a fox" > events.jsonl
  baton run - < long_prompt.txt                       # the task from stdin
  baton run --approve auto "publish a haiku"          # the demo tool that needs approval
  baton run --profiles my_profiles.toml "publish the report"   # docs/profiles.md
  OPENAI_API_KEY=sk-... BATON_MODEL=gpt-4o-mini baton run "paint a fox"
  OPENAI_BASE_URL=http://localhost:11434/v1 BATON_MODEL=llama3.1 \\
      baton run "paint a fox"                         # a keyless server: no Authorization
  baton run --bus redis://localhost:6379/0 --no-local-workers "paint a fox"
  baton run --bus redis://localhost:6379/0 --no-local-workers --pool gpu "paint a fox"
  baton run --tool-choice required --max-tokens 512 --budget-tokens 100000 "paint a fox"

Exit codes: 0 completed, 1 the session failed or timed out, 2 usage or configuration error,
3 bus unreachable, 4 incomplete (work was delegated and no sub-agent delivered a result, or the
answer cites URLs nobody produced), 130 interrupted or cancelled, 141 stdout closed by its
reader (`| head -1`; quietly)."""


@app.command(cls=BatonCommand, epilog=RUN_EXAMPLES)
def run(
    ctx: typer.Context,
    task: Annotated[
        str,
        typer.Argument(help="what the lead should get done; - reads it from stdin", metavar="TASK"),
    ],
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
    only: ProfileOnlyOpt = None,
    tool_choice: ToolChoiceOpt = None,
    lead_policy: LeadPolicyOpt = None,
    profile_tools: ProfileToolsOpt = None,
    session: Annotated[
        str | None,
        typer.Option(
            "--session",
            metavar="ID",
            help="session id",
            show_default="a new one",
            rich_help_panel=SESSION,
        ),
    ] = None,
    timeout: Annotated[
        float | None,
        typer.Option(
            "--timeout",
            metavar="SECONDS",
            help="seconds the session may run (or BATON_SESSION_TIMEOUT)",
            min=0.001,
            show_default="600",
            rich_help_panel=SESSION,
        ),
        Setting("session_timeout"),
    ] = None,
    budget_tokens: BudgetTokensOpt = None,
    budget_calls: BudgetCallsOpt = None,
    approve: Annotated[
        str | None,
        typer.Option(
            "--approve",
            metavar="ask|auto|deny",
            help="approvals of the lead and every sub-agent, wherever it runs: ask (inline on a "
            "terminal; else `baton approve`, which needs a shared bus), auto (approve all), "
            "deny (decline all) (or BATON_APPROVE)",
            show_default="ask",
            rich_help_panel=APPROVALS,
        ),
        Setting("approve"),
    ] = None,
    bus: BusOpt = None,
    prefix: PrefixOpt = None,
    local_workers: Annotated[
        bool,
        typer.Option(
            "--local-workers/--no-local-workers",
            help="host sub-agents here; --no-local-workers leaves them to `baton worker`s "
            "(on a shared bus)",
            rich_help_panel=BUS,
        ),
    ] = True,
    pool: PoolOpt = None,
    bus_outage: BusOutageOpt = None,
    retention: RetentionOpt = None,
    media: MediaOpt = None,
    media_dir: MediaDirOpt = None,
    image_model: ImageModelOpt = None,
    as_json: JsonOpt = False,
    config: ConfigOpt = None,
) -> None:
    """Run a whole session: the lead streams its answer and delegates to sub-agents.

    By default everything runs in this process: the in-process bus, in-process sub-agents, and
    the built-in offline model when neither an API key nor a base URL is configured, so nothing
    needs starting first (a base URL alone is a keyless server: no Authorization header).
    """
    settings = settings_from(ctx)
    from baton.cli.run import RunOptions, run_session

    options = RunOptions(
        task=task_from_stdin(command="baton run") if task == "-" else task,
        as_json=as_json,
        local_workers=local_workers,
        session=session,
        only=tuple(only or ()),
    )
    raise typer.Exit(run_async(run_session, settings, options, command="baton run"))


def task_from_stdin(*, command: str) -> str:
    """The task piped in (``baton run -``): a long or multi-line prompt needs no shell quoting."""
    import sys

    from baton.cli.exits import fail
    from baton.errors import ExitCode

    text = sys.stdin.read().strip()
    if not text:
        fail("no task on stdin (`-` reads the task from stdin)", ExitCode.USAGE, command=command)
    return text


RESUME_EXAMPLES = """Examples:

\b
  baton resume s-123 --bus redis://localhost:6379/0
  baton resume s-123 --bus redis://localhost:6379/0 --profiles my_profiles.toml --json
  baton resume s-123 --bus redis://localhost:6379/0 --timeout 300   # 300 s more, from now

Continues a session whose `baton run` process died (kill -9, a lost host) from its lead's
checkpoint on the bus: its task and settings are the session's own; give the same bus, model and
profiles. It first shows where the session stood (its sub-agents, the approvals they wait for,
with the `baton approve` line); --approve auto|deny also answers those. Refused (exit 2) for a
session that finished, one whose lead is alive (known within its 10 s lease), one the bus has no
record of, and any on a memory:// bus. Otherwise exit codes as for `baton run`."""


@app.command(cls=BatonCommand, epilog=RESUME_EXAMPLES)
def resume(
    ctx: typer.Context,
    session: Annotated[
        str, typer.Argument(help="the id of the session whose lead died", metavar="SESSION")
    ],
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
    timeout: Annotated[
        float | None,
        typer.Option(
            "--timeout",
            metavar="SECONDS",
            help="seconds the session may still run, from now (or BATON_SESSION_TIMEOUT)",
            min=0.001,
            show_default="what is left of its own",
            rich_help_panel=SESSION,
        ),
        Setting("session_timeout"),
    ] = None,
    approve: Annotated[
        str | None,
        typer.Option(
            "--approve",
            metavar="ask|auto|deny",
            help="approvals from now on, and those already waiting: ask, auto, deny "
            "(or BATON_APPROVE)",
            show_default="the session's own",
            rich_help_panel=APPROVALS,
        ),
        Setting("approve"),
    ] = None,
    bus: BusOpt = None,
    prefix: PrefixOpt = None,
    bus_outage: BusOutageOpt = None,
    retention: RetentionOpt = None,
    media: MediaOpt = None,
    media_dir: MediaDirOpt = None,
    image_model: ImageModelOpt = None,
    as_json: JsonOpt = False,
    config: ConfigOpt = None,
) -> None:
    """Resume a session whose lead process died: pick up the results that arrived meanwhile
    and carry it on to one final answer."""
    settings = settings_from(ctx)
    from baton.cli.resume import ResumeOptions, resume_session

    options = ResumeOptions(session=session, as_json=as_json)
    raise typer.Exit(run_async(resume_session, settings, options, command="baton resume"))


POST_EXAMPLES = """Examples:

\b
  baton post --session s-123 --type message "also paint a heron"   # to the lead
  baton post --session s-123 --to painter "paint a lighthouse at dusk"
  baton post --bus redis://redis:6379/0 --session s-123 --to lead "summarise so far"

Prints the envelope id. Sent as the user only (docs/protocol.md, "Who may say what"); with
signing_key set (BATON_SIGNING_KEY), signed. Only to a session that runs: an unknown or finished
one is refused (exit 2) and nothing is written. Needs a shared bus (Redis)."""


@app.command(cls=BatonCommand, epilog=POST_EXAMPLES)
def post(
    ctx: typer.Context,
    text: Annotated[str, typer.Argument(help="the message content", metavar="TEXT")],
    session: Annotated[str, typer.Option("--session", "-s", metavar="ID", help="session id")],
    to: Annotated[
        str, typer.Option("--to", metavar="AGENT", help="recipient agent: lead or a sub-agent name")
    ] = "lead",
    kind: Annotated[
        str,
        typer.Option(
            "--type",
            metavar="TYPE",
            help="task or message: what the user says (an agent's result or progress is its own)",
        ),
    ] = "task",
    sender: Annotated[
        str,
        typer.Option(
            "--from",
            metavar="NAME",
            help="only 'user', the default: baton post never speaks for an agent",
        ),
    ] = "user",
    media: Annotated[
        list[str] | None,
        typer.Option("--media", metavar="URL", help="a media URL to attach (repeatable)"),
    ] = None,
    bus: BusOpt = None,
    config: ConfigOpt = None,
    prefix: PrefixOpt = None,
) -> None:
    """Put a message on the bus as the user.

    A follow-up to a session's lead, or a task to a sub-agent; never as an agent: another --from,
    or --type result or progress, is refused (exit 2)."""
    settings = settings_from(ctx)
    from baton.cli.busops import post as do_post

    run_async(do_post, settings, session, to, kind, text, sender, media or [], command="baton post")


WATCH_EXAMPLES = """Examples:

\b
  baton watch s-123                 # where it stands, then live until the session finishes
  baton watch s-123 --from-start    # replay everything, then follow
  baton watch s-123 --json | jq -c 'select(.type == "agent.result")'
  baton watch demo --wait           # wait for a session that has not started yet

Rides out a bus outage of up to --bus-outage seconds. Exit codes: 0 the session finished,
1 its lead died before it finished (`baton resume` it), 2 no such session (without --wait),
3 bus unreachable."""


@app.command(cls=BatonCommand, epilog=WATCH_EXAMPLES)
def watch(
    ctx: typer.Context,
    session: Annotated[str, typer.Argument(help="session id", metavar="SESSION")],
    from_start: Annotated[
        bool, typer.Option("--from-start", help="replay the session's events from its start")
    ] = False,
    wait: Annotated[
        bool,
        typer.Option(
            "--wait", help="wait for a session the bus does not know yet; show it from its start"
        ),
    ] = False,
    config: ConfigOpt = None,
    as_json: JsonOpt = False,
    bus: BusOpt = None,
    prefix: PrefixOpt = None,
    bus_outage: BusOutageOpt = None,
) -> None:
    """Tail a session's events live, from any process, until the session finishes: a running
    one is first shown as it stands (its sub-agents, the approvals and files it waits for, each
    with its `baton approve` or `baton upload` line).

    An unknown session is an error (exit 2) unless --wait; a session whose lead died ends the
    watch with a line and exit 1 (`baton resume SESSION` continues it)."""
    settings = settings_from(ctx)
    from baton.cli.busops import watch as do_watch

    raise typer.Exit(run_async(do_watch, settings, session, as_json, from_start, wait,
                               command="baton watch"))  # fmt: skip


APPROVE_EXAMPLES = """Examples:

\b
  baton approve s-123 call_0_publish --yes
  baton approve s-123 call_0_publish --no --reason "not before Monday"

The call id is shown by `baton watch` (approval.requested events)."""

UPLOAD_EXAMPLES = """Examples:

\b
  baton upload s-123 5f0c9e2a notes.txt --bus redis://localhost:6379/0
  baton upload s-123 5f0c9e2a --url https://example.com/heron.png
  baton upload s-123 5f0c9e2a --cancel

The question id is shown by `baton watch` (question.asked events). The file goes into the media
store set by --media/--media-dir, which the asking agent must be able to read (docs/media.md)."""


@app.command(cls=BatonCommand, epilog=APPROVE_EXAMPLES)
def approve(
    ctx: typer.Context,
    session: Annotated[str, typer.Argument(help="session id", metavar="SESSION")],
    call_id: Annotated[str, typer.Argument(help="the tool call id asked about", metavar="CALL_ID")],
    yes: Annotated[
        bool | None, typer.Option("--yes/--no", help="approve or decline", show_default=False)
    ] = None,
    reason: Annotated[
        str, typer.Option("--reason", metavar="TEXT", help="why (shown to the agent)")
    ] = "",
    bus: BusOpt = None,
    config: ConfigOpt = None,
    prefix: PrefixOpt = None,
) -> None:
    """Answer an approval that a sub-agent (on any worker) is waiting for."""
    from baton.cli.exits import fail
    from baton.errors import ExitCode

    if yes is None:
        fail("say --yes or --no", ExitCode.USAGE, command="baton approve")
    settings = settings_from(ctx)
    from baton.cli.busops import approve as do_approve

    run_async(do_approve, settings, session, call_id, yes, reason, command="baton approve")


@app.command(cls=BatonCommand, epilog=UPLOAD_EXAMPLES)
def upload(
    ctx: typer.Context,
    session: Annotated[str, typer.Argument(help="session id", metavar="SESSION")],
    question: Annotated[
        str, typer.Argument(help="the question's id (baton watch shows it)", metavar="QUESTION")
    ],
    file: Annotated[
        Path | None,
        typer.Argument(help="the file to upload", metavar="FILE", show_default=False),
    ] = None,
    url: Annotated[
        str | None,
        typer.Option("--url", metavar="URL", help="answer with an http(s) or data: URL instead"),
    ] = None,
    cancel: Annotated[
        bool, typer.Option("--cancel", help="decline the question: the agent goes on without it")
    ] = False,
    bus: BusOpt = None,
    config: ConfigOpt = None,
    prefix: PrefixOpt = None,
    media: MediaOpt = None,
    media_dir: MediaDirOpt = None,
) -> None:
    """Answer an agent's question for a file or an image: upload FILE into the media store, give
    a URL, or cancel."""
    from baton.cli.busops import Upload
    from baton.cli.busops import upload as do_upload
    from baton.cli.exits import fail
    from baton.errors import ExitCode

    if sum((file is not None, url is not None, cancel)) != 1:
        fail("give exactly one of FILE, --url URL or --cancel", ExitCode.USAGE,
             command="baton upload")  # fmt: skip
    settings = settings_from(ctx)
    answer = Upload(path=file, url=url)
    run_async(do_upload, settings, session, question, answer, command="baton upload")


@app.command(
    cls=BatonCommand, epilog="Example:\n\n\b\n  baton sessions --bus redis://localhost:6379/0"
)
def sessions(
    ctx: typer.Context,
    as_json: JsonOpt = False,
    bus: BusOpt = None,
    config: ConfigOpt = None,
    prefix: PrefixOpt = None,
) -> None:
    """List the sessions on the bus, newest first, with their state (and, for a finished one,
    when its keys expire: see --retention and `baton clean`)."""
    settings = settings_from(ctx)
    from baton.cli.busops import sessions as do_sessions

    run_async(do_sessions, settings, as_json, command="baton sessions")


# Declared in their own modules, which import their machinery (the sub-agents, Starlette and
# uvicorn, the Redis bus) only when the command runs.
app.command("worker", cls=BatonCommand, help=WORKER_HELP, epilog=WORKER_EXAMPLES)(worker_command)
app.command("serve", cls=BatonCommand, help=SERVE_HELP, epilog=SERVE_EXAMPLES)(serve_command)
app.command("mcp", cls=BatonCommand, help=MCP_HELP, epilog=MCP_EXAMPLES)(mcp_command)
app.command("cancel", cls=BatonCommand, help=CANCEL_HELP, epilog=CANCEL_EXAMPLES)(cancel_command)
app.command("clean", cls=BatonCommand, help=CLEAN_HELP, epilog=CLEAN_EXAMPLES)(clean_command)
app.command("tools", cls=BatonCommand, help=TOOLS_HELP, epilog=TOOLS_EXAMPLES)(tools_command)


@app.command(cls=BatonCommand)
def version() -> None:
    """Print baton's version."""
    from baton.errors import installed_version

    typer.echo(installed_version())
