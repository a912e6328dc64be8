"""What every ``baton`` command shares: the options that pick the configuration, the bus, the
model and the rest, each in its help panel with its default, and :func:`settings_from`, the one
way a command turns them into :class:`~baton.settings.BatonSettings`.

Every command — ``run``, ``worker``, ``serve`` and the bus commands — resolves its settings here,
from the same flags, environment and config file (flag > environment > ``--config`` file >
default), so two commands started side by side (``baton run`` and ``baton worker``, say) meet on
the same bus and key prefix. Each option that sets a setting says which in its :class:`Setting`
marker, the one place flag and setting meet: a command lists the options it takes in its
signature and hands them on with ``settings_from(ctx)``, naming none of them again.
``tests/cli/test_declared_once.py`` checks every setting against the flags that set it (or
``baton.settings.NO_FLAG``, which says why it has none).

An option's own default is None ("not given": the environment, the file or the setting's default
decide), so the default its help shows is written out as text (``show_default``);
``tests/cli/test_help.py`` keeps each equal to the setting's. Only typer is imported at the top:
the settings' pydantic machinery loads when a command runs, so ``--help`` stays fast.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, get_args, get_origin, get_type_hints

import typer

from baton.llm.defaults import DEFAULT_IMAGE_MODEL, DEFAULT_MODEL

if TYPE_CHECKING:
    from baton.settings import BatonSettings

# The help panels, in the order a command declares its options (baton.cli.helpfmt).
MODEL = "Model"
LEAD = "Lead and sub-agents"
SESSION = "Session"
APPROVALS = "Approvals"
BUS = "Bus & workers"
MEDIA = "Media"
OUTPUT = "Output"
SERVER = "Server"


@dataclass(frozen=True, slots=True)
class Setting:
    """What an option sets: ``Annotated[int | None, typer.Option("--max-tokens", ...),
    Setting("max_tokens")]`` gives the :class:`~baton.settings.BatonSettings` field ``max_tokens``.

    The marker is the one place that ties a flag to its setting: :func:`settings_from` reads the
    markers of the command's own parameters, so a command that declares an option passes it on
    without naming it again, and ``tests/cli/test_declared_once.py`` checks every setting against
    the options that set it."""

    name: str


ConfigOpt = Annotated[
    Path | None,
    typer.Option(
        "--config", metavar="FILE", help="TOML config file (or BATON_CONFIG)", show_default=False
    ),
]
BusOpt = Annotated[
    str | None,
    typer.Option(
        "--bus",
        metavar="URL",
        help="bus URL: memory:// (this process only), redis://HOST:PORT/DB or "
        "redis+cluster://HOST:PORT,... (or BATON_BUS / REDIS_URL)",
        show_default="memory://",
        rich_help_panel=BUS,
    ),
    Setting("bus"),
]
ModelOpt = Annotated[
    str | None,
    typer.Option("--model", metavar="NAME", help="model name (or BATON_MODEL)",
                 show_default=DEFAULT_MODEL, rich_help_panel=MODEL),
    Setting("model"),
]  # fmt: skip
BaseUrlOpt = Annotated[
    str | None,
    typer.Option("--base-url", metavar="URL",
                 help="OpenAI-compatible endpoint (or OPENAI_BASE_URL); without OPENAI_API_KEY, "
                      "a keyless server (llama.cpp, Ollama, vLLM): no Authorization header; "
                      "neither: the built-in offline model",
                 show_default=False, rich_help_panel=MODEL),
    Setting("openai_base_url"),
]  # fmt: skip
PrefixOpt = Annotated[
    str | None,
    typer.Option("--prefix", metavar="PREFIX", help="Redis key prefix (or BATON_PREFIX)",
                 show_default="baton", rich_help_panel=BUS),
    Setting("prefix"),
]  # fmt: skip
PoolOpt = Annotated[
    str | None,
    typer.Option("--pool", metavar="NAME",
                 help="worker pool: the one `baton worker` serves, or where `baton run "
                 "--no-local-workers` sends sub-agents (or BATON_POOL)",
                 show_default="default", rich_help_panel=BUS),
    Setting("pool"),
]  # fmt: skip
ProfilesOpt = Annotated[
    Path | None,
    typer.Option("--profiles", metavar="FILE",
                 help="TOML file of sub-agent profiles (or BATON_PROFILES; docs/profiles.md)",
                 show_default="the built-in painter, writer, helper, publisher",
                 rich_help_panel=LEAD),
    Setting("profiles"),
]  # fmt: skip
MediaOpt = Annotated[
    str | None,
    typer.Option("--media", metavar="DIR|s3://BUCKET/PREFIX",
                 help="where tools put media: a directory or an S3-compatible bucket "
                      "(or BATON_MEDIA; docs/media.md)",
                 show_default="./media", rich_help_panel=MEDIA),
    Setting("media"),
]  # fmt: skip
MediaDirOpt = Annotated[
    Path | None,
    typer.Option("--media-dir", metavar="DIR", hidden=True,
                 help="the older spelling of --media DIR (a directory only)"),
    Setting("media_dir"),
]  # fmt: skip
"""``--media-dir``: what ``--media`` was before it took a bucket too; hidden, still accepted."""
ImageModelOpt = Annotated[
    str | None,
    typer.Option("--image-model", metavar="NAME",
                 help="what generate_image asks of the endpoint's Images API; demo: the built-in "
                      "demo painter, for chat-only servers (or BATON_IMAGE_MODEL)",
                 show_default=DEFAULT_IMAGE_MODEL, rich_help_panel=MEDIA),
    Setting("image_model"),
]  # fmt: skip
JsonOpt = Annotated[
    bool,
    typer.Option("--json", help="JSON Lines on stdout, nothing else", rich_help_panel=OUTPUT),
]
BusOutageOpt = Annotated[
    float | None,
    typer.Option("--bus-outage", metavar="SECONDS", min=0.001,
                 help="seconds of bus outage to ride out before stopping with 'bus unreachable' "
                      "(exit 3) (or BATON_BUS_OUTAGE)", show_default="120",
                 rich_help_panel=BUS),
    Setting("bus_outage"),
]  # fmt: skip

ServerApproveOpt = Annotated[
    str | None,
    typer.Option("--approve", metavar="ask|auto|deny",
                 help="the approval policy: the loosest approvals a client may ask for the "
                      "sessions it starts (a stricter one it always may; deny > ask > auto) "
                      "(or BATON_APPROVE)", show_default="ask", rich_help_panel=APPROVALS),
    Setting("approve"),
]  # fmt: skip
"""``baton serve`` and ``baton mcp``: the server's policy, a ceiling on its clients' requests
(:mod:`baton.server.approval_policy`), not the answer to every approval as ``run --approve``."""

RetentionOpt = Annotated[
    float | None,
    typer.Option("--retention", metavar="SECONDS", min=0.001,
                 help="seconds a finished session's keys stay on Redis; `baton clean` removes "
                      "them sooner (or BATON_RETENTION)", show_default="604800 (7 days)",
                 rich_help_panel=BUS),
    Setting("retention"),
]  # fmt: skip


def settings_from(ctx: typer.Context) -> BatonSettings:
    """The settings of the command that ``ctx`` runs: each of its options marked with a
    :class:`Setting` (None: not given) over the environment, its ``--config`` file and the
    defaults; or exit 2 with one line saying what is wrong."""
    from baton.cli.exits import fail
    from baton.errors import ConfigError
    from baton.settings import load_settings

    callback = ctx.command.callback
    assert callback is not None, "a command without a callback has no options"
    given = {
        marker.name: ctx.params.get(param) for param, marker in setting_options(callback).items()
    }
    try:
        return load_settings(ctx.params.get("config"), **given)
    except ConfigError as exc:
        fail(str(exc), exc.exit_code, command=f"baton {ctx.info_name}")


def setting_options(command: Callable[..., Any]) -> dict[str, Setting]:
    """The parameters of a command function (typer's wrapper or the function itself) that set a
    setting, with their markers, in the order the command declares them."""
    function = inspect.unwrap(command)
    hints = get_type_hints(function, include_extras=True)
    found: dict[str, Setting] = {}
    for name in inspect.signature(function).parameters:
        hint = hints.get(name)
        if get_origin(hint) is Annotated:
            found.update((name, mark) for mark in get_args(hint)[1:] if isinstance(mark, Setting))
    return found


# -- the model's request settings (run, worker, serve) ---------------------------------------------

TemperatureOpt = Annotated[
    float | None,
    typer.Option("--temperature", metavar="T", min=0, max=2,
                 help="sampling temperature (or BATON_TEMPERATURE)",
                 show_default="not sent", rich_help_panel=MODEL),
    Setting("temperature"),
]  # fmt: skip
TopPOpt = Annotated[
    float | None,
    typer.Option("--top-p", metavar="P", min=0, max=1, help="nucleus sampling (or BATON_TOP_P)",
                 show_default="not sent", rich_help_panel=MODEL),
    Setting("top_p"),
]  # fmt: skip
MaxTokensOpt = Annotated[
    int | None,
    typer.Option("--max-tokens", metavar="N", min=0,
                 help="most tokens of one model reply; 0: none sent (or BATON_MAX_TOKENS)",
                 show_default="1024", rich_help_panel=MODEL),
    Setting("max_tokens"),
]  # fmt: skip
ModelTimeoutOpt = Annotated[
    float | None,
    typer.Option("--model-timeout", metavar="SECONDS", min=0.001,
                 help="seconds a model request may read nothing (or BATON_MODEL_TIMEOUT)",
                 show_default="60", rich_help_panel=MODEL),
    Setting("model_timeout"),
]  # fmt: skip
ModelRetriesOpt = Annotated[
    int | None,
    typer.Option("--model-retries", metavar="N", min=0,
                 help="retries of a failed model request (or BATON_MODEL_RETRIES)",
                 show_default="3", rich_help_panel=MODEL),
    Setting("model_retries"),
]  # fmt: skip
ParallelToolCallsOpt = Annotated[
    bool | None,
    typer.Option("--parallel-tool-calls/--no-parallel-tool-calls",
                 help="allow or forbid several tool calls in one reply "
                      "(or BATON_PARALLEL_TOOL_CALLS)", show_default="not sent",
                 rich_help_panel=MODEL),
    Setting("parallel_tool_calls"),
]  # fmt: skip
ExtraBodyOpt = Annotated[
    str | None,
    typer.Option("--extra-body", metavar="JSON",
                 help="JSON object merged into every model request (or BATON_EXTRA_BODY), "
                      'e.g. \'{"cache_prompt": true}\'', show_default="{}",
                 rich_help_panel=MODEL),
    Setting("extra_body"),
]  # fmt: skip

# -- the lead and the session (run, serve) ---------------------------------------------------------

ProfileOnlyOpt = Annotated[
    list[str] | None,
    typer.Option("--profile", metavar="NAME",
                 help="offer only these profiles to the lead (repeatable)",
                 show_default="every profile", rich_help_panel=LEAD),
]  # fmt: skip
ToolChoiceOpt = Annotated[
    str | None,
    typer.Option("--tool-choice", metavar="auto|required|none",
                 help="the lead's tool_choice: required (it then answers through an answer "
                      "tool), auto or none (or BATON_TOOL_CHOICE); sub-agents take theirs from "
                      "their profile", show_default="required", rich_help_panel=LEAD),
    Setting("tool_choice"),
]  # fmt: skip
LeadPolicyOpt = Annotated[
    str | None,
    typer.Option("--lead-policy", metavar="auto|structural|guided",
                 help="what judges the lead's answers: structural (structure only), guided "
                      "(English aids for small models, docs/small-models.md), auto (guided for "
                      "models named at most 4B) (or BATON_LEAD_POLICY)",
                 show_default="auto", rich_help_panel=LEAD),
    Setting("lead_policy"),
]  # fmt: skip
ProfileToolsOpt = Annotated[
    bool | None,
    typer.Option("--profile-tools/--no-profile-tools",
                 help="offer the lead one delegation tool per profile (or BATON_PROFILE_TOOLS)",
                 show_default="no-profile-tools", rich_help_panel=LEAD),
    Setting("profile_tools"),
]  # fmt: skip
BudgetTokensOpt = Annotated[
    int | None,
    typer.Option("--budget-tokens", metavar="N", min=1,
                 help="tokens the whole session may spend, every agent together "
                      "(or BATON_BUDGET_TOKENS)", show_default="no cap", rich_help_panel=SESSION),
    Setting("budget_tokens"),
]  # fmt: skip
BudgetCallsOpt = Annotated[
    int | None,
    typer.Option("--budget-calls", metavar="N", min=1,
                 help="model calls the whole session may make, every agent together "
                      "(or BATON_BUDGET_CALLS)", show_default="no cap", rich_help_panel=SESSION),
    Setting("budget_calls"),
]  # fmt: skip
