"""The repetition detector and the hold-back rules of streamed text, in isolation."""

from __future__ import annotations

from pathlib import Path

import pytest

from baton.bus.events import Event, TextRetracted
from baton.engine.visible import (
    RUN_CHARS,
    RepetitionDetector,
    RunawayText,
    VisibleText,
    classify,
    is_runaway,
)

ROOT = Path(__file__).resolve().parents[2]


def streamed(text: str, size: int = 9) -> bool:
    """Whether the detector fires on ``text`` fed in deltas of ``size`` characters."""
    detector = RepetitionDetector()
    return any(detector.feed(text[i : i + size]) for i in range(0, len(text), size))


TABLE = "| city | temperature | sky |\n|---|---|---|\n" + "".join(
    f"| city{n} | {n % 7 + 10} C | {'rain' if n % 3 else 'sun'} |\n" for n in range(120)
)
NUMBERED = "".join(
    f"{n}. Paint the {animal} in watercolour.\n"
    for n, animal in enumerate(
        ["fox", "heron", "cat", "owl", "whale", "bee", "crab", "deer", "frog", "hare"] * 8, 1
    )
)
CODE = "\n".join(
    f"def handler_{n}(event):\n    if event is None:\n        return None\n    return event.{n}\n"
    for n in range(60)
)


@pytest.mark.parametrize(
    "path", ["README.md", "docs/protocol.md", "orchestrator/engine/loop.py", "bus/redis/bus.py"]
)
def test_real_prose_docs_and_code_never_look_like_a_runaway(path: str) -> None:
    text = (ROOT / path).read_text()
    assert len(text) > 5 * RUN_CHARS
    assert not streamed(text)


RULED = "".join(
    f"{'-' * 80}\n{n}. The {animal} is painted in {colour} at {n % 12 + 1} o'clock.\n"
    for n, (animal, colour) in enumerate(
        zip(
            ["fox", "heron", "cat", "owl", "whale", "bee", "crab", "deer", "frog"] * 2,
            ["red", "grey", "ochre", "blue", "green", "gold"] * 3,
            strict=True,
        )
    )
)
"""Long separator lines between varied lines: repetitive characters, no repeating unit."""


@pytest.mark.parametrize("text", [TABLE, NUMBERED, CODE, RULED])
def test_tables_lists_and_repetitive_code_are_not_runaways(text: str) -> None:
    assert len(text) > 2 * RUN_CHARS  # long enough for the detector to look at all
    assert not streamed(text)


def test_one_word_said_for_longer_than_the_run_after_a_separator_is_a_runaway() -> None:
    # this was once listed as "not a runaway" at 581 characters, too short to be looked at; made
    # longer than RUN_CHARS, one word said over and over is exactly the loop the detector is for
    assert streamed("-" * 80 + "\n" + "word " * (2 * RUN_CHARS // 5))


@pytest.mark.parametrize(
    "unit",
    [
        "I will paint the fox now. ",
        "ha",
        "| fox | red |\n",
        "The painter is working on it and will send the picture when it is done. " * 3 + "\n\n",
    ],
)
def test_one_unit_said_over_and_over_is_a_runaway(unit: str) -> None:
    assert streamed("Sure. " + unit * (4 * RUN_CHARS // len(unit) + 5))


def test_a_loop_that_varies_only_its_whitespace_is_still_caught() -> None:
    text = "".join(f"Let me try again.{' ' * (n % 3)}\n" for n in range(200))
    assert streamed(text)


def test_the_detector_fires_soon_after_the_loop_starts() -> None:
    prose = (ROOT / "README.md").read_text()[:3000]
    detector = RepetitionDetector()
    fed = 0
    for piece in [prose] + ["Still painting. "] * 1000:
        fed += len(piece)
        if detector.feed(piece):
            break
    assert fed - len(prose) < 2 * RUN_CHARS


def test_is_runaway_needs_enough_repeats_of_a_long_unit() -> None:
    paragraph = (ROOT / "README.md").read_text()[:700]
    assert not is_runaway(paragraph * 2)  # twice is quoting, not a loop
    assert is_runaway(paragraph * 5)


@pytest.mark.parametrize(
    ("held", "mode"),
    [
        ("", "UNDECIDED"),
        ("  \n", "UNDECIDED"),
        ("`", "UNDECIDED"),
        ("``", "UNDECIDED"),
        ("```json", "UNDECIDED"),
        ("```json\n", "UNDECIDED"),
        ("```json\n{", "UNDECIDED"),
        ('```json\n{"', "MAYBE_CALL"),
        ("```\n [{", "MAYBE_CALL"),
        ("```python\nimport os", "PROSE"),
        ("\n{", "UNDECIDED"),
        ('\n{ "name"', "MAYBE_CALL"),
        ("{}", "MAYBE_CALL"),
        ("[{", "MAYBE_CALL"),
        ("[\n  [", "MAYBE_CALL"),
        ("[1] Smith et al.", "PROSE"),
        ("[Click here](https://example.org)", "PROSE"),
        ("{x} is a set", "PROSE"),
        ("<tool", "UNDECIDED"),
        ("<tool_call>{", "MAYBE_CALL"),
        ("<b>bold", "PROSE"),
        ("`x` is a name", "PROSE"),
        ("Hello", "PROSE"),
    ],
)
def test_classify(held: str, mode: str) -> None:
    assert classify(held).name == mode


class Sink:
    def __init__(self) -> None:
        self.events: list[Event] = []
        self.texts: list[str] = []

    async def __call__(self, event: Event) -> None:
        self.events.append(event)

    async def on_text(self, delta: str) -> None:
        self.texts.append(delta)


async def test_visible_text_holds_a_possible_call_and_drops_it_when_it_was_one() -> None:
    sink = Sink()
    visible = VisibleText("s", "a", sink, sink.on_text)
    for delta in ["\n", '{"name"', ': "x"}']:
        await visible.feed(delta)
    assert sink.events == [] and visible.text == '\n{"name": "x"}'
    await visible.keep_only("")
    assert sink.events == [] and sink.texts == []


async def test_keep_only_takes_back_the_call_after_shown_prose_and_keeps_the_prose() -> None:
    sink = Sink()
    visible = VisibleText("s", "a", sink, sink.on_text)
    for delta in ["\n\nI will ", "call it. ", '{"name": "x"}']:
        await visible.feed(delta)
    await visible.keep_only("I will call it.")
    assert isinstance(sink.events[-1], TextRetracted)
    assert sink.events[-1].chars == len(' {"name": "x"}') and visible.shown == 17
    assert "".join(sink.texts) == '\n\nI will call it. {"name": "x"}'  # on_text has no take-back


async def test_visible_text_retract_reports_what_was_shown_and_starts_over() -> None:
    sink = Sink()
    visible = VisibleText("s", "a", sink, sink.on_text)
    await visible.feed("Hello ")
    await visible.feed("there")
    await visible.retract()
    assert [e.type for e in sink.events] == ["text.delta", "text.delta", "text.retracted"]
    assert isinstance(sink.events[-1], TextRetracted) and sink.events[-1].chars == 11
    await visible.feed("{")  # a fresh attempt is classified afresh
    assert len(sink.events) == 3 and visible.shown == 0


async def test_visible_text_raises_runaway_from_the_sink() -> None:
    visible = VisibleText("s", "a", Sink(), None)
    with pytest.raises(RunawayText) as caught:
        for _ in range(1000):
            await visible.feed("again and again ")
    assert caught.value.text.startswith("again and again") and len(caught.value.text) < 2000


def test_a_run_of_blank_lines_is_a_runaway_whatever_its_deltas() -> None:
    answer = "Paris is the capital of France."
    assert streamed(answer + "\n" * 40, size=1)
    assert streamed(answer + "\n \n" * 20, size=5)  # spaces between the breaks change nothing
    assert streamed(answer + " " * RUN_CHARS, size=50)  # nor a run of spaces alone


def test_blank_lines_between_parts_are_not_a_runaway() -> None:
    # prose, markdown and code leave one or two blank lines between parts, even many times over
    parts = [f"## Part {n}\n\nThe fox is painted in ochre.\n\n\n" for n in range(60)]
    assert not streamed("".join(parts), size=3)
    assert not streamed((ROOT / "README.md").read_text(), size=1)
