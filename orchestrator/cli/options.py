"""What every ``baton`` command shares: the options that pick the configuration and the bus, and
:func:`settings_from`, the one way a command turns them into :class:`~baton.settings.BatonSettings`.

Every command — ``run``, ``worker``, ``serve`` and the bus commands — resolves its settings here,
from the same flags, environment and config file (flag > environment > ``--config`` file >
default), so two commands started side by side (``baton run`` and ``baton worker``, say) meet on
the same bus and key prefix. Only typer is imported at the top: the settings' pydantic machinery
loads when a command runs, so ``--help`` stays fast.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from baton.settings import BatonSettings

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
        help="bus URL: memory:// or redis://HOST:PORT/DB (or BATON_BUS / REDIS_URL)",
        show_default=False,
    ),
]
ModelOpt = Annotated[
    str | None,
    typer.Option("--model", metavar="NAME", help="model name (or BATON_MODEL)",
                 show_default=False),
]  # fmt: skip
BaseUrlOpt = Annotated[
    str | None,
    typer.Option("--base-url", metavar="URL",
                 help="OpenAI-compatible endpoint (or OPENAI_BASE_URL); without OPENAI_API_KEY, "
                      "a keyless server: no Authorization header"),
]  # fmt: skip
PrefixOpt = Annotated[
    str | None,
    typer.Option("--prefix", metavar="PREFIX",
                 help="Redis key prefix (or BATON_PREFIX; default baton)",
                 show_default=False),
]  # fmt: skip
PoolOpt = Annotated[
    str | None,
    typer.Option("--pool", metavar="NAME",
                 help="worker pool: the one `baton worker` serves, or where `baton run "
                 "--no-local-workers` sends sub-agents (or BATON_POOL; default default)",
                 show_default=False),
]  # fmt: skip
ProfilesOpt = Annotated[
    Path | None,
    typer.Option("--profiles", metavar="FILE",
                 help="TOML file of sub-agent profiles (or BATON_PROFILES)",
                 show_default=False),
]  # fmt: skip
MediaDirOpt = Annotated[
    Path | None,
    typer.Option("--media-dir", metavar="DIR",
                 help="where sub-agents write media (or BATON_MEDIA_DIR)",
                 show_default=False),
]  # fmt: skip
MediaOpt = Annotated[
    str | None,
    typer.Option("--media", metavar="DIR|s3://BUCKET/PREFIX",
                 help="where tools put media: a directory or an S3-compatible bucket "
                      "(or BATON_MEDIA; docs/media.md)",
                 show_default=False),
]  # fmt: skip
JsonOpt = Annotated[bool, typer.Option("--json", help="JSON Lines on stdout, nothing else")]
BusOutageOpt = Annotated[
    float | None,
    typer.Option("--bus-outage", metavar="SECONDS", min=0.001,
                 help="seconds of bus outage to ride out before stopping with 'bus unreachable' "
                      "(exit 3) (or BATON_BUS_OUTAGE; default 120)", show_default=False),
]  # fmt: skip

RetentionOpt = Annotated[
    float | None,
    typer.Option("--retention", metavar="SECONDS", min=0.001,
                 help="seconds a finished session's keys stay on Redis; `baton clean` removes "
                      "them sooner (or BATON_RETENTION; default 604800, 7 days)",
                 show_default=False),
]  # fmt: skip


def settings_from(config: Path | None, command: str, **flags: object) -> BatonSettings:
    """Load the settings (``flags`` given as None mean "not given"), or exit 2 with one line
    saying what is wrong."""
    from baton.base_errors import ConfigError
    from baton.cli.exits import fail
    from baton.settings import load_settings

    try:
        return load_settings(config, **flags)
    except ConfigError as exc:
        fail(str(exc), exc.exit_code, command=f"baton {command}")


# -- the model's request settings (run, worker, serve) ---------------------------------------------

TemperatureOpt = Annotated[
    float | None,
    typer.Option("--temperature", metavar="T", min=0, max=2,
                 help="sampling temperature (or BATON_TEMPERATURE)",
                 show_default=False),
]  # fmt: skip
TopPOpt = Annotated[
    float | None,
    typer.Option("--top-p", metavar="P", min=0, max=1, help="nucleus sampling (or BATON_TOP_P)",
                 show_default=False),
]  # fmt: skip
MaxTokensOpt = Annotated[
    int | None,
    typer.Option("--max-tokens", metavar="N", min=0,
                 help="most tokens of one model reply (or BATON_MAX_TOKENS; default 1024; "
                      "0: none sent)", show_default=False),
]  # fmt: skip
ModelTimeoutOpt = Annotated[
    float | None,
    typer.Option("--model-timeout", metavar="SECONDS", min=0.001,
                 help="seconds a model request may read nothing (or BATON_MODEL_TIMEOUT; "
                      "default 60)", show_default=False),
]  # fmt: skip
ModelRetriesOpt = Annotated[
    int | None,
    typer.Option("--model-retries", metavar="N", min=0,
                 help="retries of a failed model request (or BATON_MODEL_RETRIES; default 3)",
                 show_default=False),
]  # fmt: skip
ParallelToolCallsOpt = Annotated[
    bool | None,
    typer.Option("--parallel-tool-calls/--no-parallel-tool-calls",
                 help="allow or forbid several tool calls in one reply "
                      "(or BATON_PARALLEL_TOOL_CALLS; default: not sent)", show_default=False),
]  # fmt: skip
ExtraBodyOpt = Annotated[
    str | None,
    typer.Option("--extra-body", metavar="JSON",
                 help="JSON object merged into every model request (or BATON_EXTRA_BODY), "
                      'e.g. \'{"cache_prompt": true}\'', show_default=False),
]  # fmt: skip

# -- the lead and the session (run, serve) ---------------------------------------------------------

ToolChoiceOpt = Annotated[
    str | None,
    typer.Option("--tool-choice", metavar="auto|required|none",
                 help="the lead's tool_choice: auto, required (it then answers through an "
                      "answer tool; the default) or none (or BATON_TOOL_CHOICE); "
                      "sub-agents take theirs from their profile", show_default=False),
]  # fmt: skip
BudgetTokensOpt = Annotated[
    int | None,
    typer.Option("--budget-tokens", metavar="N", min=1,
                 help="tokens the whole session may spend, every agent together "
                      "(or BATON_BUDGET_TOKENS; default no cap)", show_default=False),
]  # fmt: skip
BudgetCallsOpt = Annotated[
    int | None,
    typer.Option("--budget-calls", metavar="N", min=1,
                 help="model calls the whole session may make, every agent together "
                      "(or BATON_BUDGET_CALLS; default no cap)", show_default=False),
]  # fmt: skip
ProfileToolsOpt = Annotated[
    bool | None,
    typer.Option("--profile-tools/--no-profile-tools",
                 help="offer the lead one delegation tool per profile (or BATON_PROFILE_TOOLS)",
                 show_default=False),
]  # fmt: skip
