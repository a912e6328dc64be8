"""The ``baton`` command line.

Heavy imports (openai, redis, the engine) are deferred into the commands that need them, so that
``baton --help`` stays fast.
"""

from __future__ import annotations

import typer

app = typer.Typer(
    name="baton",
    help="baton: a lead agent that delegates to sub-agents over a message bus.",
    no_args_is_help=True,
    add_completion=False,
)


@app.command()
def version() -> None:
    """Print baton's version."""
    from importlib.metadata import version as dist_version

    typer.echo(dist_version("baton"))


def main() -> None:
    """Console-script entry point."""
    app()
