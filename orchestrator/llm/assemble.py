"""Assembly of streamed Chat Completions chunks into one :class:`ModelReply`.

Works on the raw parsed chunk dicts (no SDK objects: building those costs ~140 µs a chunk).
Tool-call deltas are keyed by their ``index``, through a normaliser for the habits of
OpenAI-compatible servers, each seen in the wild:

* no tool-call ``id`` at all → one is synthesised (``call_<hex>``), unique per call;
* ``id``/``type``/``name`` repeated on every chunk → kept once, never concatenated;
* the same ``index`` reused for a second call that carries a new ``id`` → a new slot is opened;
* no ``index`` at all → a new ``id`` opens a slot, otherwise the delta extends the latest one;
* ``""`` (or blank) arguments → ``"{}"``; arguments sent as a JSON object → serialised;
* no usage chunk → ``usage`` is None.

Malformed argument JSON is passed through untouched: answering it is the engine's job.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from baton.llm.types import ModelReply, ToolCall, Usage

Json = dict[str, Any]


class _Slot:
    __slots__ = ("args", "id", "name")

    def __init__(self, call_id: str | None, name: str | None) -> None:
        self.id = call_id
        self.name = name or ""
        self.args: list[str] = []


class StreamAssembler:
    """Feed it parsed chunks in order with :meth:`feed`; read the result with :meth:`reply`."""

    __slots__ = ("_by_index", "_slots", "call_deltas", "finish_reason", "text_parts", "usage")

    def __init__(self, *, watch_calls: bool = False) -> None:
        self.text_parts: list[str] = []
        self.call_deltas: list[tuple[int, str, str]] | None = [] if watch_calls else None
        """With ``watch_calls``: the argument pieces fed since the caller last emptied it, as
        ``(position, name, piece)``, for a caller that shows arguments while they stream."""
        self.finish_reason: str | None = None
        self.usage: Usage | None = None
        self._slots: list[_Slot] = []
        self._by_index: dict[int, _Slot] = {}

    def feed(self, chunk: Json) -> str:
        """Take one chunk; return its text delta ("" when it has none) for the caller to forward."""
        usage = chunk.get("usage")
        if usage:
            self.usage = _usage(usage)
        choices = chunk.get("choices")
        if not choices:
            return ""
        choice = choices[0]
        if choice.get("index", 0) != 0:
            return ""  # only the first choice is ever asked for (n=1)
        finish = choice.get("finish_reason")
        if finish:
            self.finish_reason = finish
        delta = choice.get("delta")
        if not delta:
            return ""
        calls = delta.get("tool_calls")
        if calls:
            for call in calls:
                self.tool_delta(call)
        content = delta.get("content")
        if content:
            self.text_parts.append(content)
            return str(content)
        return ""

    def tool_delta(self, call: Json) -> None:
        """Merge one tool-call delta into its slot (the normaliser; see the module docstring)."""
        function = call.get("function") or {}
        call_id = call.get("id") or None
        name = function.get("name") or None
        index = call.get("index")
        slot = self._find(index, call_id)
        if slot is None:
            slot = _Slot(call_id, name)
            self._slots.append(slot)
            self._by_index[index if index is not None else -len(self._slots)] = slot
        else:
            if call_id and not slot.id:
                slot.id = call_id
            if name and not slot.name:
                slot.name = name
        args = function.get("arguments")
        if isinstance(args, str):
            piece = args
        elif args is not None:
            piece = json.dumps(args)
        else:
            return
        if piece:
            slot.args.append(piece)
            if self.call_deltas is not None:
                self.call_deltas.append((self._slots.index(slot), slot.name, piece))

    def _find(self, index: int | None, call_id: str | None) -> _Slot | None:
        """The open slot this delta continues, or None when it starts a new call."""
        if index is None:
            if not self._slots:
                return None
            latest = self._slots[-1]
            if call_id and latest.id and call_id != latest.id:
                return None
            return latest
        slot = self._by_index.get(index)
        if slot is not None and call_id and slot.id and call_id != slot.id:
            return None  # the index is reused for a second call
        return slot

    def reply(self) -> ModelReply:
        calls = tuple(
            ToolCall(
                id=slot.id or f"call_{uuid.uuid4().hex[:24]}",
                name=slot.name,
                arguments=_arguments("".join(slot.args)),
            )
            for slot in self._slots
        )
        return ModelReply(
            text="".join(self.text_parts),
            tool_calls=calls,
            finish_reason=self.finish_reason,
            usage=self.usage,
        )


def _arguments(joined: str) -> str:
    return joined if joined.strip() else "{}"


def _usage(raw: Json) -> Usage:
    prompt = int(raw.get("prompt_tokens") or 0)
    completion = int(raw.get("completion_tokens") or 0)
    total = int(raw.get("total_tokens") or prompt + completion)
    return Usage(prompt_tokens=prompt, completion_tokens=completion, total_tokens=total)
