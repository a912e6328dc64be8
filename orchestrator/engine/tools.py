"""Typed Python functions as tools the model can call.

A tool is an ordinary function (sync or async) with type hints and a docstring. pydantic derives the
JSON schema the model sees from the signature, and validates the model's arguments against the same
model before the function runs — so a schema and its validation can never drift apart. Sync tools
run in a worker thread so they cannot stall the event loop; async tools are awaited.

Two flags change how governance treats a call, and both may depend on the arguments (a sub-agent's
``send_message`` ends its loop only when ``type == "result"``):

- ``needs_approval``: a human must approve the call before it runs;
- ``terminal``: the loop ends after the call has run.

How its calls run, and what they yield, is one frozen :class:`ToolRun` (``run=``): the time a call
may take, how much of its result the model reads, whether it produces media (pictures, files: the
lead uses it to know which profiles make media, so a session that asked for media and got none is
not "completed"), and whether a cancelled sync call's thread is left to finish.

``source`` says where a tool comes from, for telemetry (the ``hitl.decision`` counter): ``python``
for a Python function; a subclass sets its own (``mcp:<server>`` for an MCP server's tool,
``baton.subagents.mcp``).

``repeat_key`` lets a tool say which calls count as "the same" for the repeat guard beyond identical
arguments (``send_message``: its content, whatever the target), so a model cycling one task through
several targets is stopped like one repeating a call.

``shows`` names a string parameter that *is* the agent's reply (the lead's ``answer(text)``): the
engine shows it to every view token by token while the call's arguments stream, exactly as it shows
a reply written as text (:mod:`baton.engine.visible`), so a typed answer costs the user no latency.
"""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias, cast, get_type_hints, overload

import anyio.to_thread
import pydantic_core
from pydantic import BaseModel, ConfigDict, Field, create_model

from baton.engine.errors import ToolDefinitionError
from baton.llm.types import ToolSchema

Arguments: TypeAlias = Mapping[str, object]
"""Validated arguments of one call, by parameter name."""

ArgsPredicate: TypeAlias = Callable[[Arguments], bool]
"""Decides a per-call flag from the validated arguments."""

RepeatKey: TypeAlias = Callable[[Arguments], str | None]
"""What makes two calls of a tool repeats of each other, from the validated arguments (None: only
identical arguments do)."""

ToolFunction: TypeAlias = Callable[..., Any]
"""Any typed function; its return value becomes the tool's result (see :class:`ToolResult`)."""


@dataclass(frozen=True, slots=True)
class ToolRun:
    """How the calls of one tool run and what they yield (``Tool(fn, run=ToolRun(...))``).

    Apart from the flags that govern a call (approval, ending the turn, repeats), because only the
    executor and the judge of a session's outcome read these: one value, shared by every tool
    that runs alike.
    """

    timeout_s: float | None = None
    """Seconds one call may run before it is cut (None: the loop's ``tool_timeout_s``)."""
    max_result_chars: int | None = None
    """How much of a result the model reads (None: the loop's ``max_result_chars``)."""
    media: bool = False
    """Its calls produce media (pictures, files): a session that asked a profile with such a tool
    and got no media at all is not "completed"."""
    abandon_thread_on_cancel: bool = True
    """A sync function's thread is left to finish on its own when its call is cancelled (anyio's
    ``abandon_on_cancel``): the loop moves on at once instead of waiting for a function that
    cannot be interrupted."""


DEFAULT_RUN = ToolRun()
"""How a tool runs when it says nothing: the loop's limits, no media."""


@dataclass(frozen=True, slots=True, init=False)
class ToolResult:
    """What a tool returns when it has more to say than text: the media URLs it produced.

    Media URLs flow out of the engine in the turn's result, so a sub-agent can report every image
    or file its tools made without parsing tool output. ``blocked`` says the tool refused the call
    on governance grounds (a cap, a duplicate): the round counts as blocked like one a guard
    answered, so a model that keeps making only refused calls ends its turn (StopReason.BLOCKED).
    ``ends_turn`` ends the turn after this round (StopReason.NEWS): the agent has news it has not
    seen, and should decide its next step with it in view (a lead's send that found sub-agents'
    results unread).
    """

    content: str
    media_urls: tuple[str, ...]
    blocked: bool
    ends_turn: bool

    def __init__(
        self,
        content: str,
        media_urls: Iterable[str] = (),
        *,
        blocked: bool = False,
        ends_turn: bool = False,
    ) -> None:
        object.__setattr__(self, "content", content)
        object.__setattr__(self, "media_urls", tuple(media_urls))
        object.__setattr__(self, "blocked", blocked)
        object.__setattr__(self, "ends_turn", ends_turn)


_SECTION = re.compile(r"^(Args|Arguments|Parameters|Params)\s*:\s*$", re.IGNORECASE)
_PARAM_LINE = re.compile(r"^(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_OTHER_SECTION = re.compile(r"^(Returns?|Raises|Yields|Examples?|Notes?)\s*:\s*$", re.IGNORECASE)


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """Split a Google-style docstring into the tool description and per-parameter descriptions."""
    if not doc:
        return "", {}
    summary: list[str] = []
    params: dict[str, str] = {}
    section = "summary"
    current: str | None = None
    name_indent: int | None = None
    for raw in inspect.cleandoc(doc).splitlines():
        line = raw.strip()
        if _SECTION.match(line):
            section, current, name_indent = "params", None, None
        elif _OTHER_SECTION.match(line):
            section = "other"
        elif section == "summary":
            summary.append(raw)
        elif section == "params" and line:
            indent = len(raw) - len(raw.lstrip())
            name_indent = indent if name_indent is None else name_indent
            match = _PARAM_LINE.match(line)
            if match is not None and indent <= name_indent:
                current = match.group(1).lstrip("*")
                params[current] = match.group(2).strip()
            elif current is not None:
                params[current] = f"{params[current]} {line}".strip()
    return "\n".join(summary).strip(), params


def _strip_titles(schema: dict[str, Any]) -> dict[str, Any]:
    """Drop pydantic's generated ``title`` keys: noise in every prompt, no help to the model."""
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        if isinstance(prop, dict):
            prop.pop("title", None)
    return schema


class Tool:
    """One callable tool: the function, its argument model, its schema and its governance flags.

    Build one with :func:`tool` (also usable as a decorator) or :meth:`ToolRegistry.register`.
    """

    __slots__ = (
        "_approval",
        "_param_names",
        "_terminal",
        "args_model",
        "description",
        "fn",
        "is_async",
        "name",
        "repeat_key",
        "run",
        "schema",
        "shows",
        "source",
    )

    def __init__(
        self,
        fn: ToolFunction,
        *,
        name: str | None = None,
        description: str | None = None,
        needs_approval: bool | ArgsPredicate = False,
        terminal: bool | ArgsPredicate = False,
        repeat_key: RepeatKey | None = None,
        shows: str | None = None,
        run: ToolRun = DEFAULT_RUN,
    ) -> None:
        self.fn = fn
        self.source = "python"
        self.repeat_key = repeat_key
        self.run = run
        self.name = name or fn.__name__
        if not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", self.name):
            raise ToolDefinitionError(self.name, "names are 1-64 letters, digits, '_' or '-'")
        doc_summary, doc_params = parse_docstring(inspect.getdoc(fn))
        self.description = description if description is not None else doc_summary
        self.args_model = _args_model(self.name, fn, doc_params)
        self._param_names = tuple(self.args_model.model_fields)
        if shows is not None and shows not in self._param_names:
            raise ToolDefinitionError(self.name, f"shows={shows!r} names no parameter of it")
        self.shows = shows
        """The parameter shown as the agent's text while it streams (None: none)."""
        self.is_async = inspect.iscoroutinefunction(fn)
        self._approval = needs_approval
        self._terminal = terminal
        self.schema: ToolSchema = {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": _strip_titles(self.args_model.model_json_schema()),
            },
        }

    def __repr__(self) -> str:
        return f"Tool({self.name!r})"

    def bound_to(self, fn: ToolFunction, *, parameters: dict[str, Any] | None = None) -> Tool:
        """This tool running ``fn`` instead (which takes the same parameters: the same model
        validates them), its schema's ``parameters`` replaced when given. For a tool made again
        and again with another function or another ``enum`` (the lead's ``send_message``, per
        lead and per roster): building a tool builds its argument model and schema, which
        costs more than everything else a lead does before its first request."""
        copy = object.__new__(Tool)
        for slot in Tool.__slots__:
            setattr(copy, slot, getattr(self, slot))
        copy.fn = fn
        copy.is_async = inspect.iscoroutinefunction(fn)
        if parameters is not None:
            function = {**self.schema["function"], "parameters": parameters}
            copy.schema = cast(ToolSchema, {"type": "function", "function": function})
        return copy

    def parse(self, arguments: str) -> dict[str, object]:
        """Validate the model's raw JSON arguments; raises ``pydantic.ValidationError``."""
        parsed = self.args_model.model_validate_json(arguments or "{}")
        return {name: getattr(parsed, name) for name in self._param_names}

    def needs_approval(self, args: Arguments) -> bool:
        """Whether this call must be approved by a human before it runs."""
        flag = self._approval
        return flag if isinstance(flag, bool) else bool(flag(args))

    @property
    def approval(self) -> Literal["always", "never", "per call"]:
        """When its calls need a person's approval, as a listing shows it (``baton tools``)."""
        flag = self._approval
        if isinstance(flag, bool):
            return "always" if flag else "never"
        return "per call"

    def is_terminal(self, args: Arguments) -> bool:
        """Whether the loop ends once this call has run."""
        flag = self._terminal
        return flag if isinstance(flag, bool) else bool(flag(args))

    @property
    def may_end_turn(self) -> bool:
        """Whether some call of this tool is terminal (always, or for some arguments): an agent
        with such a tool ends its work with a call, even past its soft round limit."""
        return self._terminal is not False

    async def invoke(self, args: Arguments) -> ToolResult:
        """Run the function with validated arguments and normalise what it returned."""
        if self.is_async:
            value = await cast(Callable[..., Awaitable[object]], self.fn)(**args)
        else:
            value = await anyio.to_thread.run_sync(
                functools.partial(self.fn, **args),
                abandon_on_cancel=self.run.abandon_thread_on_cancel,
            )
        return as_result(value)


def as_result(value: object) -> ToolResult:
    """A tool's return value as a :class:`ToolResult`: text as is, anything else as JSON."""
    if isinstance(value, ToolResult):
        return value
    if isinstance(value, str):
        return ToolResult(value)
    if value is None:
        return ToolResult("done")
    return ToolResult(pydantic_core.to_json(value).decode())


def _args_model(name: str, fn: ToolFunction, docs: Mapping[str, str]) -> type[BaseModel]:
    """A pydantic model of the function's parameters: the schema source and the validator."""
    try:
        hints = get_type_hints(fn, include_extras=True)
    except (NameError, TypeError) as exc:
        raise ToolDefinitionError(name, f"its type hints cannot be resolved: {exc}") from exc
    fields: dict[str, Any] = {}
    for param in inspect.signature(fn).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise ToolDefinitionError(name, f"*{param.name} parameters cannot be described")
        if param.name not in hints:
            raise ToolDefinitionError(name, f"parameter {param.name!r} has no type hint")
        default = ... if param.default is param.empty else param.default
        described = param.name in docs  # else keep a description given with Annotated[..., Field]
        fields[param.name] = (
            hints[param.name],
            Field(default=default, description=docs[param.name]) if described else default,
        )
    model_name = "".join(part.capitalize() for part in re.split(r"[_-]", name)) + "Args"
    return create_model(model_name, __config__=ConfigDict(extra="forbid"), **fields)


@overload
def tool(fn: ToolFunction, /) -> Tool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    needs_approval: bool | ArgsPredicate = False,
    terminal: bool | ArgsPredicate = False,
    repeat_key: RepeatKey | None = None,
    run: ToolRun = DEFAULT_RUN,
) -> Callable[[ToolFunction], Tool]: ...


def tool(
    fn: ToolFunction | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    needs_approval: bool | ArgsPredicate = False,
    terminal: bool | ArgsPredicate = False,
    repeat_key: RepeatKey | None = None,
    run: ToolRun = DEFAULT_RUN,
) -> Tool | Callable[[ToolFunction], Tool]:
    """Make a :class:`Tool` of a function; usable bare (``@tool``) or with options
    (``@tool(needs_approval=True, run=ToolRun(timeout_s=60))``)."""

    def make(f: ToolFunction) -> Tool:
        return Tool(
            f,
            name=name,
            description=description,
            needs_approval=needs_approval,
            terminal=terminal,
            repeat_key=repeat_key,
            run=run,
        )

    return make(fn) if fn is not None else make


class ToolRegistry:
    """The tools one agent may call, by name, with their schemas computed once."""

    __slots__ = ("_schemas", "_tools")

    def __init__(self, tools: Iterable[Tool | ToolFunction] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        self._schemas: tuple[ToolSchema, ...] | None = None
        for item in tools:
            self.add(item)

    def add(self, item: Tool | ToolFunction) -> Tool:
        """Register a tool (or a plain function, with default options); names must be unique."""
        made = item if isinstance(item, Tool) else Tool(item)
        if made.name in self._tools:
            raise ToolDefinitionError(made.name, "a tool of that name is already registered")
        self._tools[made.name] = made
        self._schemas = None
        return made

    def replace(self, item: Tool) -> Tool:
        """Swap the registered tool of the same name for ``item`` (its schema may differ: the lead
        refreshes ``send_message``'s ``to`` enum as agents start and stop). The loop reads
        :attr:`schemas` per request, so the next request offers the new schema."""
        if item.name not in self._tools:
            raise ToolDefinitionError(item.name, "no tool of that name is registered to replace")
        self._tools[item.name] = item
        self._schemas = None
        return item

    def register(self, **options: Any) -> Callable[[ToolFunction], Tool]:
        """Decorator: ``@registry.register(needs_approval=True)`` registers and returns the tool."""

        def deco(fn: ToolFunction) -> Tool:
            return self.add(Tool(fn, **options))

        return deco

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    @property
    def terminal_names(self) -> tuple[str, ...]:
        """The tools whose calls may end the turn (see :attr:`Tool.may_end_turn`)."""
        return tuple(name for name, item in self._tools.items() if item.may_end_turn)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._tools)

    @property
    def shown_arguments(self) -> dict[str, str]:
        """Tool name -> the parameter the engine shows while it streams (:attr:`Tool.shows`)."""
        return {name: item.shows for name, item in self._tools.items() if item.shows is not None}

    @property
    def schemas(self) -> tuple[ToolSchema, ...]:
        """The ``tools`` parameter of a chat completion request (cached until the next ``add`` or
        ``replace``)."""
        if self._schemas is None:
            self._schemas = tuple(t.schema for t in self._tools.values())
        return self._schemas

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)
