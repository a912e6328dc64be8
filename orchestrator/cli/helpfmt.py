"""A typer command class whose help names an argument the way its options are named.

typer writes an argument's Python type after its name in help (``TASK <str>``) even when the
argument has a metavar, and offers no setting or hook to stop it (it builds every argument itself);
options already show only their metavar. A user reads ``TASK``, ``SESSION``, ``CALL_ID``: the help
text beside each says what it is.
"""

from __future__ import annotations

from typing import Any

from typer.core import TyperArgument, TyperCommand


class PlainArgument(TyperArgument):
    """An argument whose help shows its metavar and no type."""

    def display_type_rich(self, ctx: object) -> None:
        return None


class PlainArgumentsCommand(TyperCommand):
    """A command whose arguments are :class:`PlainArgument`: ``@app.command(cls=...)``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for param in self.params:
            if type(param) is TyperArgument:
                # typer constructs the arguments itself; the subclass adds no state, only help.
                param.__class__ = PlainArgument
