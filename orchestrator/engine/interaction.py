"""The one interface through which the engine asks a human something.

Approvals, upload requests and image requests all go through :class:`InteractionChannel`, so the
CLI, the bus and the HTTP server can each answer them without the engine knowing which. Questions
and answers are pydantic models: they travel as JSON when the answer comes from another process.

The engine bounds every wait itself (``anyio.fail_after`` at the call site) and fails closed, so a
channel needs no timeouts of its own; it must only make ``cancel_pending()`` release every wait.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from baton.bus.events import ToolCallInfo


class _Question(BaseModel):
    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    id: str = Field(description="unique id of the question; answers name it")
    session: str
    agent: str


class ApprovalQuestion(_Question):
    """One batched question per round: may these calls run? Answered per call id."""

    kind: Literal["approval"] = "approval"
    calls: tuple[ToolCallInfo, ...]


class UploadQuestion(_Question):
    """The model asked the user to upload a file (``request_file_upload``)."""

    kind: Literal["upload"] = "upload"
    call_id: str
    prompt: str
    accept: tuple[str, ...] = ()


class ImageQuestion(_Question):
    """The model wants to look at an image it could not resolve by itself (``describe_image``)."""

    kind: Literal["image"] = "image"
    call_id: str
    prompt: str
    reference: str = ""


Question = Annotated[ApprovalQuestion | UploadQuestion | ImageQuestion, Field(discriminator="kind")]


class QuestionClosed(BaseModel):
    """Published when a question stops waiting unanswered (cancelled, timed out, withdrawn), so
    whoever shows it as a dialog can close that dialog."""

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    kind: Literal["closed"] = "closed"
    id: str
    reason: str


class ApprovalDecision(BaseModel):
    """A decision on one gated call: a person's, or (``policy`` set) the session's policy's."""

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    approved: bool
    reason: str = ""
    policy: Literal["auto", "deny", "nobody"] | None = None
    """``nobody``: no person could be asked, so the runtime declined (never an approval)."""


class ProvidedMedia(BaseModel):
    """A file or image the user supplied; ``url`` is http(s), data: or file:."""

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    url: str
    name: str = ""
    media_type: str = ""


class InteractionChannel(Protocol):
    """Asks a human and returns the answer.

    Guarantees expected of an implementation:

    - each method blocks until an answer, ``cancel_pending()`` or the caller's cancellation; the
      caller applies the timeout;
    - ``ask_approval`` returns decisions keyed by tool call id; a missing id counts as declined;
    - ``request_upload`` / ``request_image`` return None when the user cancelled;
    - raises an ``InteractionError`` (``baton.engine.errors``) when the question cannot be
      asked or was cancelled; the engine treats any error as a decline (fail closed);
    - ``cancel_pending()`` is synchronous, idempotent, releases every pending wait (they raise
      ``InteractionCancelled``) and closes every open dialog.
    """

    async def ask_approval(self, question: ApprovalQuestion) -> Mapping[str, ApprovalDecision]: ...

    async def request_upload(self, question: UploadQuestion) -> ProvidedMedia | None: ...

    async def request_image(self, question: ImageQuestion) -> ProvidedMedia | None: ...

    def cancel_pending(self) -> None: ...
