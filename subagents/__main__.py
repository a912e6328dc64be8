"""``python -m baton.subagents worker ...``: the ``baton worker`` command without the main CLI."""

from __future__ import annotations

import typer

from baton.subagents.cli import worker_command

app = typer.Typer(name="subagents", no_args_is_help=True, add_completion=False)
app.command("worker")(worker_command)


@app.callback()
def _main() -> None:
    """baton sub-agent worker service."""


if __name__ == "__main__":
    app()
