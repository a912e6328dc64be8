"""The question book and the checks every surface shares (baton.engine.questions), and the
``answer`` payload on the wire (docs/protocol.md, *Questions*)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from baton.bus.errors import InvalidEnvelope
from baton.bus.events import (
    ApprovalDecided,
    ApprovalRequested,
    QuestionAnswered,
    QuestionAsked,
    ToolCallInfo,
    utc_now,
)
from baton.bus.messages import Envelope
from baton.bus.payloads import check_payload
from baton.engine.questions import (
    AnswerRefused,
    Cancelled,
    Decision,
    OpenQuestion,
    Provided,
    QuestionBook,
    QuestionNotFound,
    accepts,
    check_reply,
    upload_name,
)

S = "s-q"


def _asked(qid: str = "q1", *, kind: str = "upload", accept: list[str] | None = None,
           in_s: float = 60) -> QuestionAsked:  # fmt: skip
    return QuestionAsked(session=S, agent="reviewer", question_id=qid, kind=kind,
                         call_id="c1", prompt="the notes", accept=accept or [],
                         expires_at=utc_now() + timedelta(seconds=in_s))  # fmt: skip


def _question(kind: str = "upload", accept: list[str] | None = None) -> OpenQuestion:
    return OpenQuestion(id="q1", kind=kind, agent="a", call_id="c1", tool="t",
                        message="m", accept=accept or [])  # fmt: skip


@pytest.mark.parametrize(
    ("accept", "media_type", "name", "taken"),
    [
        ([], "application/zip", "x.zip", True),
        (["image/png"], "image/png", "a.png", True),
        (["image/png"], "image/png; charset=x", "a", True),
        (["image/*"], "image/webp", "a.webp", True),
        (["image/*"], "text/plain", "a.png", False),
        ([".csv"], "", "Data.CSV", True),
        ([".csv"], "text/csv", "data.txt", False),
        (["text/plain", ".md"], "text/markdown", "notes.md", True),
    ],
)
def test_accepts_types_families_and_extensions(
    accept: list[str], media_type: str, name: str, taken: bool
) -> None:
    assert accepts(accept, media_type, name) is taken


def test_the_book_lists_approvals_and_questions_until_decided_answered_or_expired() -> None:
    book = QuestionBook()
    call = ToolCallInfo(call_id="p1", name="publish", arguments='{"text": "hi"}')
    book.fold(ApprovalRequested(session=S, agent="publisher", calls=[call]))
    book.fold(_asked("q1"))
    book.fold(_asked("q2", in_s=-1))  # its agent has stopped waiting already
    assert [(q.id, q.kind) for q in book.open()] == [("p1", "approval"), ("q1", "upload")]
    with pytest.raises(QuestionNotFound, match="expired"):
        book.find(S, "q2")
    book.fold(ApprovalDecided(session=S, agent="someone-else", call_id="p1", approved=True))
    assert [q.id for q in book.open()] == ["p1", "q1"]  # only the asker's decision counts
    book.fold(ApprovalDecided(session=S, agent="publisher", call_id="p1", approved=True))
    book.fold(QuestionAnswered(session=S, agent="reviewer", question_id="q1", outcome="provided",
                               url="https://x/n.txt"))  # fmt: skip
    assert book.open() == []
    for qid in ("p1", "q1"):
        with pytest.raises(QuestionNotFound, match="already answered"):
            book.find(S, qid)
    with pytest.raises(QuestionNotFound, match="no such question"):
        book.find(S, "q9")
    assert book.asks_for_media("q1") and not book.asks_for_media("p1")


def test_replies_must_fit_their_question() -> None:
    with pytest.raises(AnswerRefused, match="approve or decline"):
        check_reply(_question("approval"), Cancelled())
    check_reply(_question("approval"), Decision(approved=False, reason="no"))
    with pytest.raises(AnswerRefused, match="answer it with a file, a URL, or cancel"):
        check_reply(_question(), Decision(approved=True))
    with pytest.raises(AnswerRefused, match="is not http"):
        check_reply(_question(), Provided(url="ftp://host/a.txt"))
    with pytest.raises(AnswerRefused, match=r"accepts \.csv; 'a.txt' is text/plain"):
        check_reply(_question(accept=[".csv"]), Provided(url="https://h/a.txt", name="a.txt"))
    check_reply(_question(accept=[".csv"]), Provided(url="https://h/d.csv"))
    with pytest.raises(AnswerRefused, match="asks for an image, not text/plain"):
        check_reply(_question("image"), Provided(url="https://h/a.txt"))
    check_reply(_question("image"), Provided(url="https://h/a.png"))
    check_reply(_question(), Cancelled())


@pytest.mark.parametrize(
    ("filename", "tail"),
    [
        ("notes.txt", "-notes.txt"),
        ("../../etc/passwd", "-passwd"),
        ("C:\\x\\ré sumé.pdf", "-r-sum-.pdf"),
        ("...", "-upload"),
    ],
)
def test_an_upload_keeps_only_a_safe_base_name(filename: str, tail: str) -> None:
    name = upload_name(S, _question(), filename)
    assert name.startswith(f"{S}/a-upload-") and name.endswith(tail)
    assert ".." not in name.split("/") and name.count("/") == 1


@pytest.mark.parametrize(
    ("meta", "problem"),
    [
        ({"question_id": "q1", "outcome": "provided"}, "a provided answer needs its url"),
        ({"question_id": "q1", "outcome": "maybe"}, "outcome"),
        ({"question_id": "", "outcome": "cancelled"}, "question_id"),
        ({"question_id": "q1", "outcome": "cancelled", "nobody": "yes"}, "nobody"),
    ],
)
def test_a_malformed_answer_is_refused_with_its_reason(
    meta: dict[str, object], problem: str
) -> None:
    envelope = Envelope(session=S, sender="user", recipient="reviewer.approvals", type="answer",
                        content="x", meta=meta)  # type: ignore[arg-type]  # fmt: skip
    with pytest.raises(InvalidEnvelope, match="invalid answer payload in meta") as caught:
        check_payload(envelope)
    assert problem in str(caught.value)
