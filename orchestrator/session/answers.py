"""What :meth:`Session.answer <baton.session.Session.answer>` accepts, made one reply.

An embedding application answers in whatever shape is natural where it stands: ``True``/``False``
for an approval (or the older ``approved=`` keyword), a ``Path`` for a file or an image, or one of
the engine's replies. Anything else is refused here, before the bus or the media store is touched,
with a ``TypeError`` that names what is taken.
"""

from __future__ import annotations

from pathlib import Path

from baton.engine.questions import Cancelled, Decision, Provided, Reply


def reply_of(
    reply: bool | Reply | Path | None, reason: str, *, approved: bool | None, nobody: bool
) -> Reply | Path:
    """The reply ``answer()`` was given: a :class:`~baton.engine.questions.Decision` for a
    ``bool`` (``reason`` says why; ``nobody``: declined on the runtime's behalf), a ``Path`` as
    it is (a file to store first), a reply as it is."""
    if approved is not None:
        reply = approved
    if reply is None:
        raise TypeError("answer() needs a reply: True/False, a Decision, a Path, Provided")
    if isinstance(reply, bool):
        reply = Decision(approved=reply, reason=reason, nobody=nobody)
    if isinstance(reply, Path):
        return reply
    if not isinstance(reply, Decision | Provided | Cancelled):
        raise TypeError(
            f"answer() takes True/False, a Decision, a Path, Provided or Cancelled, not "
            f"{type(reply).__name__} (a file's path is a pathlib.Path)"
        )
    return reply
