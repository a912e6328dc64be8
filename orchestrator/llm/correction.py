"""The retry after a parse error: what the model is told, and which ``tool_choice`` it gets.

Small models asked to call tools often write the call as text — a JSON object, a code fence, a
profile name as if it were a tool — and servers that parse calls themselves (llama.cpp) reject
that output. Asking again unchanged mostly gets the same output, so the retry's request carries
one extra user message saying what went wrong and naming the valid tools, and, when the call let
the model choose (``tool_choice`` None or ``"auto"``), it asks for ``"required"`` — the one
setting such servers enforce with a grammar. The caller's own message list is never changed: the
correction exists only in the request of the retry.
"""

from __future__ import annotations

from collections.abc import Sequence

from baton.llm.types import ToolChoice, ToolSchema

_DETAIL_CHARS = 200
# How every correction opens; a reply that repeats it is the model parroting the correction
# (a 1.5B lead "answered" with it), never an answer: see :func:`echoes_correction`.
CORRECTION_OPENING = "Your last reply could not be used"


def tool_names(tools: Sequence[ToolSchema]) -> list[str]:
    return [tool["function"]["name"] for tool in tools]


def retry_tool_choice(tool_choice: ToolChoice | None, *, escalate: bool) -> ToolChoice | None:
    """The ``tool_choice`` of a retry after a parse error: ``"required"`` when escalating from a
    free choice, otherwise the call's own."""
    if escalate and tool_choice in (None, "auto"):
        return "required"
    return tool_choice


def correction_message(detail: str, names: Sequence[str], *, required: bool) -> str:
    """The user message appended to a retry after the server could not parse the output."""
    said = detail.strip()[:_DETAIL_CHARS]
    problem = f"{CORRECTION_OPENING}: the server could not parse it"
    problem += f" ({said})." if said else "."
    if not names:
        return f"{problem} No tools are available here: answer in plain text."
    listed = ", ".join(names)
    ask = (
        f"The only tools you can call are: {listed}. Call them through the tools interface "
        "(a function call with JSON arguments), not written out as text, JSON or a code fence, "
        "and use no other tool names."
    )
    if not required:
        ask += " If no tool is needed, answer in plain text instead."
    return f"{problem} {ask}"


def echoes_correction(text: str) -> bool:
    """Whether ``text`` repeats a correction message: small models parrot the last user message
    when confused, and such a reply must not reach anyone as an answer or a result."""
    return CORRECTION_OPENING.casefold() in text.casefold()
