"""The command class every ``baton`` command's help is written by: panels, defaults, plain names.

Help is rendered by click, not rich (rich's formatter alone costs ~190 ms to import, and typer's
rich mode also boxes the one-line usage errors), so typer's ``rich_help_panel`` would be ignored.
:class:`BatonCommand` reads it anyway and writes one click section per panel (``Model:``,
``Bus & workers:``, …; ungrouped options, ``--help`` among them, under ``Options:``), in the
order the command declares its options. Two more things typer does its own way:

- an argument's help shows its Python type after its name (``TASK <str>``) even with a metavar,
  and the usage line wraps a required one in braces (``{TASK}``); a user reads ``TASK``,
  ``SESSION``, ``CALL_ID``, and the help text beside each says what it is;
- a default given as text (``show_default="1024"``: the settings decide the value, so the
  option's own default is None) is shown in parentheses; here it reads ``[default: 1024]``.
"""

from __future__ import annotations

from typing import Any

from typer.core import TyperArgument, TyperCommand, TyperOption

OPTIONS = "Options"
"""The section of the options no panel names (``--help``, ``--config``)."""


class PlainArgument(TyperArgument):
    """An argument whose help shows its metavar and no type, and whose usage shows it bare."""

    def display_type_rich(self, ctx: object) -> None:
        return None

    def _usage_display_name(self) -> str:
        name = self.display_name_raw
        return name if self.required else f"[{name}]"


class PlainOption(TyperOption):
    """An option whose textual default reads ``[default: 1024]``, not ``[default: (1024)]``."""

    def _get_default_string(
        self, *, ctx: Any, show_default_is_str: bool, default_value: Any
    ) -> str:
        if show_default_is_str:
            return str(self.show_default)
        return super()._get_default_string(
            ctx=ctx, show_default_is_str=show_default_is_str, default_value=default_value
        )


class BatonCommand(TyperCommand):
    """A command whose help is grouped into its options' panels (``@app.command(cls=...)``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for param in self.params:
            # typer constructs the parameters itself; the subclasses add no state, only help.
            if type(param) is TyperArgument:
                param.__class__ = PlainArgument
            elif type(param) is TyperOption:
                param.__class__ = PlainOption

    def format_options(self, ctx: Any, formatter: Any) -> None:
        # ctx and formatter are click's (typer's own copy of click, in recent typers).
        arguments: list[tuple[str, str]] = []
        panels: dict[str, list[tuple[str, str]]] = {}
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is None:
                continue
            if param.param_type_name == "argument":
                arguments.append(record)
            else:
                panel = getattr(param, "rich_help_panel", None) or OPTIONS
                panels.setdefault(panel, []).append(record)
        if arguments:
            with formatter.section("Arguments"):
                formatter.write_dl(arguments)
        for name, records in panels.items():
            with formatter.section(name):
                formatter.write_dl(records)
