"""What of a streamed reply observers see, and when a reply has run away.

Small local models often start a reply that is really a tool call written as text (a code fence, a
bare JSON object, Qwen's ``<tool_call>`` tag), and llama-server streams that leading text before it
fails the request as unparseable. Shown at once, such text could not be taken back, so
:class:`VisibleText` holds back leading whitespace and any start that may be a call until the reply
is clearly prose (then it flows through delta by delta) or the reply ends (then the caller decides:
a call is never shown, anything else is shown in one piece). A call that follows prose already
shown is taken back alone, so the prose stays (:meth:`VisibleText.keep_only`). What was shown of an
attempt that is retried or cut is taken back with one ``text.retracted`` event.

Every call's raw arguments pass a detector of their own, shown or not: a small model loops inside a
call too (a ``media`` URL growing one path segment at a time until ``max_tokens``).

A tool's argument that *is* the reply (``Tool.shows``: the lead's ``answer(text)``) is shown the
same way while the call's arguments stream: each piece is parsed as partial JSON (``jiter``, whose
trailing-string mode yields the string so far) and what the argument grew by is shown, through the
same runaway check. A call read from the text is shown whole once the reply has ended.

:class:`RepetitionDetector` watches every streamed character (held or shown) for a runaway: the
tail of the reply repeating one unit over and over, or a long run of blank lines. It ends the
stream early by raising :class:`RunawayText` from the text sink, which the model client propagates
unchanged. A blank run is the one runaway that says where the reply ended: small models that fail
to sample their end-of-turn token often emit line breaks until the output limit (measured: 3 of 8
first replies of a 1.5B lead, each for about a minute), after a reply that was complete. The
whitespace collapsing that lets the repetition check see through varied line breaks makes such a
tail invisible to it, so it is counted on its own (:attr:`RunawayText.ended`).
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterable, Mapping
from enum import Enum

import jiter

from baton.bus.events import TextDelta, TextRetracted
from baton.engine.calls import EventSink
from baton.llm.types import TextSink, ToolCall

_JSON_STARTS = {"{": '"}', "[": "{["}
"""A reply (after whitespace or a fence line) starting with one of these characters, followed by
one of its own, may be a tool call written as JSON (an object, or an array of objects)."""

RUN_CHARS = 600
"""Characters of exact repetition (whitespace collapsed) at the tail that make a runaway."""
MIN_REPEATS = 4
"""A runaway repeats its unit at least this many times, however long the unit."""
MAX_UNIT_CHARS = 800
"""The longest repeating unit looked for (a paragraph said again and again)."""
CHECK_EVERY = 200
"""New characters between two checks: the check is cheap but not free."""
_PROBE = 48
"""Characters at the end of the tail whose previous occurrence gives the candidate unit length."""
BLANK_LINES = 16
"""Line breaks in one run of whitespace that make a runaway: prose, markdown and code leave one or
two blank lines between parts, never a screenful."""


class RunawayText(Exception):
    """Raised by the text sink when the reply repeats itself; ends the stream early.

    ``ended``: the runaway is a run of blank lines after text, so the reply may have ended where
    the run began (``text`` is what came before it) rather than being cut: it did when that text
    is prose (``prose``: already shown as such) or holds calls written as text (the caller reads
    them); anything else (a call cut off mid-way, a lone fence) is cut.
    """

    def __init__(
        self,
        text: str,
        *,
        ended: bool = False,
        prose: bool = False,
        calls: tuple[ToolCall, ...] = (),
    ) -> None:
        why = "ended in blank lines" if ended else "kept repeating itself"
        super().__init__(f"the reply {why}")
        self.text = text
        self.ended = ended
        self.prose = prose
        self.calls = calls
        """The native calls that had streamed whole when the loop was found, in order (their
        arguments parse): a model that loops over calls wrote each one it meant before it
        looped (a 1.5B painter asked for three pictures streamed the three ``generate_image``
        calls and its result, then the two sends again and again until the output limit)."""


class RepetitionDetector:
    """Finds a tail that is one unit repeated: ``RUN_CHARS`` long and ``MIN_REPEATS`` times over,
    or a tail of whitespace with more than ``BLANK_LINES`` line breaks (or ``RUN_CHARS`` long).

    Ordinary prose, lists, tables and code repeat words, lines and separators, but not one exact
    unit for hundreds of characters; a model caught in a loop does exactly that. Whitespace is
    collapsed first, so a loop that varies only its line breaks is still caught.
    """

    __slots__ = ("_blank_breaks", "_blank_chars", "_pieces", "_size", "_unchecked")

    def __init__(self) -> None:
        self._pieces: list[str] = []
        self._size = 0
        self._unchecked = 0
        self._blank_breaks = 0
        """Line breaks in the whitespace that ends the text so far."""
        self._blank_chars = 0
        """Characters of the whitespace that ends the text so far."""

    @property
    def text(self) -> str:
        return "".join(self._pieces)

    def feed(self, delta: str) -> bool:
        """Add streamed text; True when the reply has run away."""
        self._pieces.append(delta)
        self._size += len(delta)
        self._unchecked += len(delta)
        if self._blank_run(delta):
            return True
        if self._unchecked < CHECK_EVERY or self._size < RUN_CHARS:
            return False
        self._unchecked = 0
        return is_runaway(self.text)

    @property
    def blank_tail(self) -> bool:
        """Whether the text ends in a run of blank lines long enough to be a runaway."""
        return self._blank_breaks > BLANK_LINES or self._blank_chars >= RUN_CHARS

    def _blank_run(self, delta: str) -> bool:
        kept = delta.rstrip()
        trailing = delta[len(kept) :]
        if kept:  # the run starts again after the delta's last visible character
            self._blank_breaks = self._blank_chars = 0
        self._blank_breaks += trailing.count("\n")
        self._blank_chars += len(trailing)
        return self.blank_tail

    def break_run(self) -> None:
        """What follows starts a new part (a shown argument after text): no blank run spans it."""
        self._blank_breaks = self._blank_chars = 0

    def reset(self) -> None:
        self._pieces.clear()
        self._size = 0
        self._unchecked = 0
        self.break_run()


def is_runaway(text: str) -> bool:
    """Whether the tail of ``text`` is one unit repeated (see :class:`RepetitionDetector`)."""
    window = RUN_CHARS + MAX_UNIT_CHARS * (MIN_REPEATS + 1)
    tail = " ".join(text[-window:].split())
    if len(tail) < RUN_CHARS:
        return False
    probe = tail[-_PROBE:]
    previous = tail.rfind(probe, 0, len(tail) - 1)
    if previous < 0:
        return False
    unit = len(tail) - _PROBE - previous
    if unit > MAX_UNIT_CHARS:
        return False
    run = max(RUN_CHARS, unit * MIN_REPEATS)
    if run + unit > len(tail):
        return False
    # the last ``run`` characters equal the ``run`` before them shifted by one unit: periodic
    return tail[-run:] == tail[-run - unit : -unit]


class _Mode(Enum):
    UNDECIDED = 1
    PROSE = 2
    MAYBE_CALL = 3


def classify(held: str) -> _Mode:
    """Prose, a possible call, or too early to say, from the text held so far."""
    start = held.lstrip()
    if not start:
        return _Mode.UNDECIDED
    if start.startswith("```"):
        line_end = start.find("\n")
        if line_end < 0:
            return _Mode.UNDECIDED
        start = start[line_end + 1 :].lstrip()
        if not start:
            return _Mode.UNDECIDED
    elif "```".startswith(start):
        return _Mode.UNDECIDED
    if start.startswith("<tool_call>"):
        return _Mode.MAYBE_CALL
    if "<tool_call>".startswith(start):
        return _Mode.UNDECIDED
    if start[0] in _JSON_STARTS:
        # a call is an object ({"...) or an array of them ([{...); "[1] Smith" or "{x}" is prose
        inner = start[1:].lstrip()
        if not inner:
            return _Mode.UNDECIDED
        return _Mode.MAYBE_CALL if inner[0] in _JSON_STARTS[start[0]] else _Mode.PROSE
    return _Mode.PROSE


class VisibleText:
    """The text sink the loop gives the model client for one reply (all its attempts).

    Deltas are forwarded (a ``text.delta`` event and the caller's ``on_text``) once the reply is
    clearly prose; see the module docstring for what is held back and why.
    """

    __slots__ = (
        "_agent",
        "_arguments",
        "_calls",
        "_detector",
        "_emit",
        "_held",
        "_mode",
        "_on_text",
        "_raw_calls",
        "_session",
        "_shows",
        "shown",
    )

    def __init__(
        self,
        session: str,
        agent: str,
        emit: EventSink,
        on_text: TextSink | None,
        shows: Mapping[str, str] | None = None,
    ) -> None:
        self._session = session
        self._agent = agent
        self._emit = emit
        self._on_text = on_text
        self._shows = dict(shows or {})
        """Tool name -> the argument of its calls shown as the reply (``Tool.shows``)."""
        self._arguments: dict[int, _ShownArgument] = {}
        """The shown argument of each call of this attempt, by the call's position."""
        self._detector = RepetitionDetector()
        self._calls: dict[int, tuple[str, list[str]]] = {}
        """Each call's name and raw argument pieces, by position, as they stream."""
        self._raw_calls = RepetitionDetector()
        """Every call's raw arguments as they stream, shown or not: a model can loop inside a
        call (a URL in ``media`` growing one path segment at a time until ``max_tokens``)."""
        self._held: list[str] = []
        self._mode = _Mode.UNDECIDED
        self.shown = 0
        """Characters of this attempt observers have seen."""

    @property
    def text(self) -> str:
        """Everything this attempt streamed so far (held or shown)."""
        return self._detector.text

    async def feed(self, delta: str) -> None:
        """The ``on_text`` of a model call: raises :class:`RunawayText` when the reply loops."""
        if self._detector.feed(delta):
            raise self._runaway()
        if self._mode is _Mode.PROSE:
            await self._show(delta)
            return
        self._held.append(delta)
        if self._mode is _Mode.MAYBE_CALL:
            return
        held = "".join(self._held)
        self._mode = classify(held)
        if self._mode is _Mode.PROSE:
            self._held.clear()
            await self._show(held)

    def _runaway(self) -> RunawayText:
        """The runaway of this attempt's text: ended at its blank run when that is what it is and
        text came before it (a shown argument's runaway is a cut: its call never closed)."""
        text = self._detector.text
        if self._detector.blank_tail and text.strip() and not self._arguments:
            return RunawayText(text.rstrip(), ended=True, prose=self._mode is _Mode.PROSE)
        return RunawayText(text)

    async def ended_at(self, final: str) -> None:
        """The reply ended as ``final``, its text without the blank run that followed: observers
        see exactly it (the blank lines already shown are taken back, text not shown yet is)."""
        shown = self.text[: self.shown]
        self._held.clear()
        self._mode = _Mode.PROSE
        if final.startswith(shown):
            if len(final) > len(shown):
                await self._show(final[len(shown) :])
        else:
            await self._take_back(len(shown) - len(final))

    @property
    def arguments_text(self) -> str:
        """What this attempt streamed of shown arguments (the reply a cut call was giving)."""
        return "".join(argument.text for argument in self._arguments.values())

    async def call_delta(self, position: int, name: str, piece: str) -> None:
        """The ``on_call_delta`` of a model call: the shown argument of a call grows by what the
        new piece adds to it (raises :class:`RunawayText` when it loops, as text does, or when
        any call's raw arguments do)."""
        self._calls.setdefault(position, (name, []))[1].append(piece)
        if self._raw_calls.feed(piece):
            raise RunawayText(self.text, calls=self._whole_calls())
        argument = self._arguments.get(position)
        if argument is None:
            shows = self._shows.get(name)
            if shows is None:
                return
            argument = self._arguments[position] = _ShownArgument(shows)
            self._detector.break_run()
        grown = argument.feed(piece)
        if grown:
            if self._detector.feed(grown):
                raise RunawayText(self._detector.text, calls=self._whole_calls())
            await self._show(grown)

    def _whole_calls(self) -> tuple[ToolCall, ...]:
        """The calls streamed so far whose arguments are whole JSON objects, in order."""
        calls: list[ToolCall] = []
        for position in sorted(self._calls):
            name, pieces = self._calls[position]
            raw = "".join(pieces)
            try:
                arguments = json.loads(raw or "{}")
            except ValueError:
                continue  # the call still streaming when the loop was found, or a broken one
            if isinstance(arguments, dict):
                call_id = f"looped_{secrets.token_hex(6)}"
                calls.append(ToolCall(id=call_id, name=name, arguments=raw))
        return tuple(calls)

    async def finish_calls(self, calls: Iterable[ToolCall]) -> None:
        """The reply ended with these calls: each shown argument appears whole. What streamed
        of it is completed; one that streamed otherwise than it parsed whole is taken back and
        shown again; a call read from the text (it streamed as held text) is shown now."""
        for position, call in enumerate(calls):
            shows = self._shows.get(call.name)
            if shows is None:
                continue
            whole = shown_value(call.arguments, shows)
            argument = self._arguments.get(position)
            streamed = argument.text if argument is not None else ""
            if whole.startswith(streamed):
                rest = whole[len(streamed) :]
            else:
                assert argument is not None  # only a streamed argument can differ
                await self._take_back(len(argument.text))
                rest = whole
            if rest and not streamed and self.shown:
                rest = "\n\n" + rest  # after prose already shown
            if rest:
                await self._show(rest)

    async def finish(self, *, drop_held: bool) -> None:
        """The reply ended: show what was held back, unless it is part of a call (``drop_held``)."""
        held = "".join(self._held)
        self._held.clear()
        self._mode = _Mode.PROSE
        if held and not drop_held:
            await self._show(held)

    async def keep_only(self, rest: str) -> None:
        """The reply ended and its text held tool calls: observers keep only ``rest``, the prose
        around the calls (what the history keeps as the reply's text), nothing of the calls.

        When what was shown begins with ``rest`` (prose, then the call), only the characters after
        it are taken back; otherwise all that was shown is taken back and ``rest`` shown anew.
        """
        self._held.clear()
        self._mode = _Mode.PROSE
        shown = self.text[: self.shown]
        lead = len(shown) - len(shown.lstrip())
        kept = lead + len(rest)
        if not (rest and shown[lead:kept] == rest):
            kept = 0
        dropped = self.shown - kept
        if dropped:
            await self._emit(TextRetracted(session=self._session, agent=self._agent, chars=dropped))
            self.shown = kept
        if rest and not kept:
            await self._show(rest)

    async def retract(self) -> None:
        """The ``on_retract`` of a model call: take back what this attempt showed, start over."""
        if self.shown:
            await self._emit(
                TextRetracted(session=self._session, agent=self._agent, chars=self.shown)
            )
        self.shown = 0
        self._held.clear()
        self._arguments.clear()
        self._calls.clear()
        self._mode = _Mode.UNDECIDED
        self._detector.reset()
        self._raw_calls.reset()

    async def _take_back(self, chars: int) -> None:
        if chars:
            await self._emit(TextRetracted(session=self._session, agent=self._agent, chars=chars))
            self.shown -= chars

    async def _show(self, text: str) -> None:
        self.shown += len(text)
        await self._emit(TextDelta(session=self._session, agent=self._agent, text=text))
        if self._on_text is not None:
            await self._on_text(text)


class _ShownArgument:
    """One call's shown argument as its JSON streams: the raw pieces, and the text so far (all
    of it shown: it is shown as it grows)."""

    __slots__ = ("name", "raw", "text")

    def __init__(self, name: str) -> None:
        self.name = name
        self.raw = bytearray()
        self.text = ""

    def feed(self, piece: str) -> str:
        """Add a piece of the arguments; what the argument's text grew by ("" if nothing)."""
        self.raw += piece.encode()
        try:
            parsed = jiter.from_json(bytes(self.raw), partial_mode="trailing-strings")
        except ValueError:
            return ""  # not JSON so far (a model's odd arguments): shown whole at the end, if ever
        value = parsed.get(self.name) if isinstance(parsed, dict) else None
        if not isinstance(value, str) or not value.startswith(self.text):
            return ""
        grown, self.text = value[len(self.text) :], value
        return grown


def shown_value(arguments: str, name: str) -> str:
    """The string argument ``name`` of a call's whole arguments ("" when it has none)."""
    try:
        parsed = json.loads(arguments or "{}")
    except ValueError:
        return ""
    value = parsed.get(name) if isinstance(parsed, dict) else None
    return value if isinstance(value, str) else ""
