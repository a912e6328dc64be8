"""Reading an event by its known ``type`` is as strict as reading it through the whole union."""

from __future__ import annotations

import pydantic
import pytest

from baton.bus.events import (
    EVENT_CLASSES,
    SessionStarted,
    TextDelta,
    _event_adapter,
    dump_event,
    parse_event,
)
from baton.bus.memory import MemoryBus


def test_every_event_type_names_one_class() -> None:
    assert EVENT_CLASSES["text.delta"] is TextDelta
    assert all(cls.model_fields["type"].default == kind for kind, cls in EVENT_CLASSES.items())


def test_a_known_type_reads_the_same_event_as_the_union() -> None:
    raw = dump_event(TextDelta(session="s", agent="lead", text="hi"))
    assert parse_event(raw, "text.delta") == parse_event(raw) == parse_event(raw.encode())


def test_text_of_another_type_is_refused_even_when_a_type_is_given() -> None:
    raw = dump_event(TextDelta(session="s", agent="lead", text="hi"))
    with pytest.raises(pydantic.ValidationError):
        parse_event(raw, "session.started")
    with pytest.raises(pydantic.ValidationError):
        parse_event(dump_event(SessionStarted(session="s", agent="lead", task="t"))[:-1], "x")


def test_an_unknown_type_falls_back_to_the_union() -> None:
    raw = dump_event(SessionStarted(session="s", agent="lead", task="t"))
    assert isinstance(parse_event(raw, "no.such.type"), SessionStarted)


def test_a_text_without_its_type_is_refused_even_when_a_type_is_given() -> None:
    raw = dump_event(TextDelta(session="s", agent="lead", text="hi")).replace(
        '"type":"text.delta",', ""
    )
    assert '"type"' not in raw
    with pytest.raises(pydantic.ValidationError):
        parse_event(raw, "text.delta")


async def test_the_memory_log_reads_by_type_and_never_makes_the_union() -> None:
    _event_adapter.cache_clear()
    async with MemoryBus() as bus:
        await bus.log.emit(SessionStarted(session="s", agent="lead", task="t"))
        await bus.log.emit(TextDelta(session="s", agent="lead", text="hi"))
        read = [logged.event async for logged in bus.log.tail("s", follow=False)]
    assert [type(event) for event in read] == [SessionStarted, TextDelta]
    assert _event_adapter.cache_info().currsize == 0
