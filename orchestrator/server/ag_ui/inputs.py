"""A run's input: the ``RunAgentInput`` body, read and checked before any stream opens.

Everything that can be wrong with a request is found here and answered as an HTTP error with the
server's one-line JSON body (``{"detail": ..., "errors": [...]}``) and no stream, as the HTTP
binding requires of input refused before the run starts: a body that is not JSON or not a
``RunAgentInput`` (422, naming the first bad field), too large (413), not JSON at all (415), a
user message baton cannot read, options it does not know, a ``Last-Event-ID`` it never sent.

baton's own options travel in ``forwardedProps.baton`` (the protocol's pass-through for the
application): ``cancel`` (stop the thread's session; docs/ag-ui.md, *Cancelling*) and
``lastEventId`` (as the header, for a client that cannot set headers).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ag_ui.core import Message, RunAgentInput, TextPart, UserMessage
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.exceptions import HTTPException
from starlette.requests import Request

from baton.server.ag_ui.wire import Resumption, read_last_event_id
from baton.server.security import BodyInvalid, read_model

MAX_BODY_BYTES = 8 * 1024 * 1024
"""The largest run input: a thread's whole history travels in every run, and a file answered
inline (a ``data:`` URL in ``resume``) with it; anything larger is 413."""
MAX_TEXT = 20_000
"""The most text a user message may carry (a task or a follow-up, as the HTTP API)."""


class BatonOptions(BaseModel):
    """``forwardedProps.baton``."""

    model_config = ConfigDict(defer_build=True, extra="forbid", frozen=True, populate_by_name=True)

    cancel: bool = Field(False, description="stop the thread's running session")
    last_event_id: str | None = Field(None, alias="lastEventId", max_length=300)


@dataclass(frozen=True, slots=True)
class RunInput:
    """A checked request: the protocol's input, baton's options, and where the client stopped."""

    run: RunAgentInput
    options: BatonOptions
    resumption: Resumption | None


async def read_input(request: Request) -> RunInput:
    """The request's run input, checked; raises the HTTP error that says what is wrong."""
    run = await read_model(request, RunAgentInput, MAX_BODY_BYTES)
    options = _options(run.forwarded_props)
    given = request.headers.get("last-event-id") or options.last_event_id
    resumption = None
    if given:
        try:
            resumption = read_last_event_id(given)
        except ValueError as exc:
            raise HTTPException(400, str(exc)) from exc
    return RunInput(run, options, resumption)


def _options(forwarded: object) -> BatonOptions:
    if not isinstance(forwarded, dict) or "baton" not in forwarded:
        return BatonOptions()
    try:
        return BatonOptions.model_validate(forwarded["baton"])
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        detail = f"forwardedProps.baton.{where}: {first['msg']}" if where else first["msg"]
        raise BodyInvalid(f"{detail} (baton reads cancel and lastEventId there)", []) from exc


def trailing_user_messages(messages: Sequence[Message]) -> list[tuple[int, UserMessage]]:
    """The user messages the input ends with (after its last message of another role), with
    their indexes: what the user said since the agent last spoke."""
    found: list[tuple[int, UserMessage]] = []
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if not isinstance(message, UserMessage):
            break
        found.append((index, message))
    return found[::-1]


def text_of(index: int, message: UserMessage) -> str:
    """A user message's text; 422 for one that is blank, too long, or carries a part other than
    text (baton reads text: it would otherwise drop the part without a word)."""
    where = f"messages[{index}].content"
    if isinstance(message.content, str):
        text = message.content
    else:
        texts = []
        for number, part in enumerate(message.content):
            if not isinstance(part, TextPart):
                raise HTTPException(
                    422,
                    f"{where}[{number}]: baton reads text only, not a {part.type} part; give a "
                    "file as a URL in the text, or answer an agent's question for it",
                )
            texts.append(part.text)
        text = "\n".join(texts)
    if not text.strip():
        raise HTTPException(422, f"{where}: the message is blank")
    if len(text) > MAX_TEXT:
        raise HTTPException(422, f"{where}: at most {MAX_TEXT} characters, not {len(text)}")
    return text


def transcript(messages: Sequence[Message]) -> str:
    """Earlier messages of a conversation baton did not see, as a note for a new session's lead
    (the text of each user, assistant and tool message, oldest first)."""
    lines = []
    for message in messages:
        content = getattr(message, "content", None)
        if isinstance(content, str) and content.strip():
            lines.append(f"{message.role}: {content.strip()}")
        elif isinstance(content, list):
            words = " ".join(p.text for p in content if isinstance(p, TextPart)).strip()
            if words:
                lines.append(f"{message.role}: {words}")
    return "\n".join(lines)
