"""The table of every setting in docs/settings.md, made from the settings themselves.

Each row is one :class:`~baton.settings.BatonSettings` field: its flags (found on the commands, as
``tests/cli/test_declared_once.py`` finds them), its environment variables, its default and its
description. ``tests/cli/test_docs.py`` fails when the page's table is not this one; rewrite it
with ``python -m tests.support.settings_table`` from the checkout.
"""

from __future__ import annotations

import sys
from pathlib import Path

import typer
from pydantic import AliasChoices
from pydantic.fields import FieldInfo

from baton.cli.app import app
from baton.cli.options import setting_options
from baton.settings import BatonSettings

PAGE = Path(__file__).parents[2] / "docs" / "settings.md"
START = "<!-- generated: every setting (python -m tests.support.settings_table) -->\n"
END = "<!-- /generated -->\n"


def _flags() -> dict[str, set[str]]:
    commands = typer.main.get_command(app).commands  # type: ignore[attr-defined]
    found: dict[str, set[str]] = {}
    for command in commands.values():
        options = {param.name: param.opts for param in command.params}
        callback = command.callback
        if callback is None:
            continue
        for param, mark in setting_options(callback).items():
            long = [opt for opt in options.get(param, []) if opt.startswith("--")]
            found.setdefault(mark.name, set()).update(long[:1])
    return found


def _variables(name: str, field: FieldInfo) -> list[str]:
    alias = field.validation_alias
    if isinstance(alias, AliasChoices):
        upper = [str(choice) for choice in alias.choices if str(choice).isupper()]
        if upper:
            return upper
    return [f"BATON_{name.upper()}"]


def _default(field: FieldInfo) -> str:
    if field.default_factory is not None:
        return f"`{field.default_factory()}`"  # type: ignore[call-arg]
    if field.default is None:
        return "unset"
    return f"`{field.default}`"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def table() -> str:
    flags = _flags()
    rows = ["| setting | flag | environment | default | meaning |", "|---|---|---|---|---|"]
    for name, field in BatonSettings.model_fields.items():
        flag = ", ".join(f"`{f}`" for f in sorted(flags.get(name, ()))) or "—"
        variables = ", ".join(f"`{v}`" for v in _variables(name, field))
        rows.append(
            f"| `{name}` | {flag} | {variables} | {_default(field)} | "
            f"{_cell(field.description or '')} |"
        )
    return "\n".join(rows) + "\n"


def generated(page: str) -> str:
    """The generated part of ``page`` (empty when it has none)."""
    if START not in page:
        return ""
    return page.split(START, 1)[1].split(END, 1)[0]


def main() -> None:
    page = PAGE.read_text()
    before, rest = page.split(START, 1)
    after = rest.split(END, 1)[1]
    PAGE.write_text(before + START + table() + END + after)
    print(f"rewrote the table of {PAGE}", file=sys.stderr)


if __name__ == "__main__":
    main()
