"""Tool calls written as text: what small models send when they do not use the tools interface.

Offered tools and answered with text like ``{"name": "painter", "arguments": {...}}`` — fenced in
```` ```json ````, bare, in Qwen's ``<tool_call>`` tags, several in an array or one per line — a
small model meant to call a tool. The loop parses such text (only when tools were offered and no
native call came) and runs the calls it finds, but only calls the agent may make: a name that is an
offered tool, or one the loop's call rewriter maps (a profile name used as a tool). Anything else
stays text. Accepted calls get synthetic ids, and the history records them as real tool calls, so
the model's next request looks as if it had used the interface.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass

from baton.llm.types import ToolCall

ARGUMENT_KEYS = ("arguments", "parameters", "args", "input")
"""Where models put a call's arguments (``{"name": .., "arguments": {..}}`` and its variants)."""
NAME_KEYS = ("name", "tool", "tool_name")
_NOT_ARGUMENTS = frozenset({*NAME_KEYS, "type", "id", "function"})
_OPENERS = re.compile(r"[{\[]")
_LEFTOVERS = re.compile(
    r"```[\w-]*\s*```|```[\w-]*\s*$|<tool_call>\s*</tool_call>|<tool_call>\s*$|</?tool_call>"
)

Resolve = Callable[[ToolCall], ToolCall | None]
"""The call to run for a call found in text, or None when the agent may not make it."""

_decoder = json.JSONDecoder()


@dataclass(frozen=True, slots=True)
class TextCalls:
    calls: tuple[ToolCall, ...]
    rest: str
    """The text with the calls (and their fences or tags) taken out, stripped."""


def parse_text_calls(text: str, resolve: Resolve) -> TextCalls | None:
    """The calls written in ``text``, or None when it has none the agent may make.

    Every JSON value in the text is looked at, left to right; one that reads as a call (or a list
    of calls) is accepted when ``resolve`` accepts every call in it.
    """
    if "{" not in text:
        return None
    calls: list[ToolCall] = []
    kept: list[str] = []
    position = 0
    scan = 0
    while (opener := _OPENERS.search(text, scan)) is not None:
        start = opener.start()
        try:
            value, end = _decoder.raw_decode(text, start)
        except ValueError:
            scan = start + 1
            continue
        found = _accepted(value, resolve)
        if found:
            calls.extend(found)
            kept.append(text[position:start])
            position = end
        scan = end
    if not calls:
        return None
    kept.append(text[position:])
    rest = _LEFTOVERS.sub("", "".join(kept)).strip()
    return TextCalls(tuple(calls), rest)


def _accepted(value: object, resolve: Resolve) -> list[ToolCall]:
    """The calls of one JSON value when every one of them reads as a call the agent may make."""
    if isinstance(value, dict) and isinstance(value.get("tool_calls"), list):
        value = value["tool_calls"]
    items = value if isinstance(value, list) else [value]
    if not items:
        return []
    calls: list[ToolCall] = []
    for item in items:
        read = _read_call(item)
        if read is None:
            return []
        name, arguments = read
        call = ToolCall(
            id=f"text_call_{secrets.token_hex(6)}",
            name=name,
            arguments=json.dumps(arguments, ensure_ascii=False),
        )
        resolved = resolve(call)
        if resolved is None:
            return []
        calls.append(resolved)
    return calls


def _read_call(item: object) -> tuple[str, dict[str, object]] | None:
    """Name and arguments of one call-shaped object, in any of the shapes models write."""
    if not isinstance(item, dict):
        return None
    function = item.get("function")
    if isinstance(function, dict):  # {"type": "function", "function": {"name", "arguments"}}
        item = function
    name = next((item[key] for key in NAME_KEYS if isinstance(item.get(key), str)), None)
    if name is None and isinstance(function, str):
        name = function
    if not name:
        return None
    key = next((key for key in ARGUMENT_KEYS if key in item), None)
    if key is None:  # flat: {"name": "painter", "task": "a fox"}
        return name, {k: v for k, v in item.items() if k not in _NOT_ARGUMENTS}
    raw = item[key]
    if raw is None:
        return name, {}
    if isinstance(raw, str):
        try:
            raw = json.loads(raw) if raw.strip() else {}
        except ValueError:
            return None
    return (name, raw) if isinstance(raw, dict) else None
