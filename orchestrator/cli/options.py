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
    typer.Option("--config", help="TOML config file (or BATON_CONFIG)", show_default=False),
]
BusOpt = Annotated[
    str | None,
    typer.Option(
        "--bus",
        help="bus URL: memory:// or redis://HOST:PORT/DB (or BATON_BUS / REDIS_URL)",
        show_default=False,
    ),
]
PrefixOpt = Annotated[
    str | None,
    typer.Option("--prefix", help="Redis key prefix (or BATON_PREFIX; default baton)",
                 show_default=False),
]  # fmt: skip
ProfilesOpt = Annotated[
    Path | None,
    typer.Option("--profiles", help="TOML file of sub-agent profiles (or BATON_PROFILES)",
                 show_default=False),
]  # fmt: skip
MediaDirOpt = Annotated[
    Path | None,
    typer.Option("--media-dir", help="where sub-agents write media (or BATON_MEDIA_DIR)",
                 show_default=False),
]  # fmt: skip
JsonOpt = Annotated[bool, typer.Option("--json", help="JSON Lines on stdout, nothing else")]


def settings_from(config: Path | None, command: str, **flags: object) -> BatonSettings:
    """Load the settings (``flags`` given as None mean "not given"), or exit 2 with one line
    saying what is wrong."""
    from baton.bus.errors import ConfigError
    from baton.cli.exits import fail
    from baton.settings import load_settings

    try:
        return load_settings(config, **flags)
    except ConfigError as exc:
        fail(str(exc), exc.exit_code, command=f"baton {command}")
