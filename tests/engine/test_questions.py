"""The question book and the checks every surface shares (baton.engine.questions), and the
``answer`` payload on the wire (docs/protocol.md, *Questions*)."""

from __future__ import annotations

from datetime import timedelta
from typing import Literal

import pytest

from baton.bus.errors import InvalidEnvelope
from baton.bus.events import (
    AgentClaimed,
    AgentExited,
    ApprovalDecided,
    ApprovalRequested,
    QuestionAnswered,
    QuestionAsked,
    SessionFinished,
    SessionStarted,
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
    media_type_of,
    sniff_image,
    upload_name,
)
from baton.session.view import SessionView

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


def test_an_approval_the_policy_answers_is_never_open_anywhere() -> None:
    """Under ``auto`` or ``deny`` the agent logs what it asked its policy: no surface shows it,
    asks anyone about it, or takes an answer for it."""
    call = ToolCallInfo(call_id="p1", name="publish", arguments="{}")
    policies: tuple[Literal["auto", "deny"], ...] = ("auto", "deny")
    for policy in policies:
        book, view = QuestionBook(), SessionView()
        requested = ApprovalRequested(session=S, agent="publisher", calls=[call], policy=policy)
        book.fold(requested)
        view.apply(requested)
        assert book.open() == [] and view.pending == {}
        with pytest.raises(QuestionNotFound, match="already answered"):
            book.find(S, "p1")
        decided = ApprovalDecided(session=S, agent="publisher", call_id="p1",
                                  approved=policy == "auto", policy=policy)  # fmt: skip
        view.apply(decided)
        assert view.decisions[-1].startswith("publisher: publish ")  # named, as when asked


def test_an_agent_that_left_or_was_taken_over_waits_for_nothing() -> None:
    """Its questions close with it: an exit, another worker's claim (the old instance is dead),
    a resumed lead. Both folds agree: the book every surface answers from, and the view."""
    call = ToolCallInfo(call_id="p1", name="publish", arguments="{}")
    for ending in (
        AgentExited(session=S, agent="reviewer", reason="error"),
        AgentClaimed(session=S, agent="reviewer", profile="reviewer", worker="w-2"),
        SessionFinished(session=S, agent="lead", status="cancelled"),  # nobody is left to wait
    ):
        book, view = QuestionBook(), SessionView()
        for event in (ApprovalRequested(session=S, agent="reviewer", calls=[call]), _asked("q1"),
                      _asked("q2"), ending):  # fmt: skip
            book.fold(event)
            view.apply(event)
        assert book.open() == [] and view.pending == {} and view.questions == {}
        with pytest.raises(QuestionNotFound, match="already answered"):
            book.find(S, "q1")
    book = QuestionBook()
    book.fold(QuestionAsked(session=S, agent="lead", question_id="q3", kind="upload",
                            call_id="c", expires_at=utc_now() + timedelta(minutes=1)))  # fmt: skip
    book.fold(_asked("q4"))
    book.fold(SessionStarted(session=S, agent="lead", task="t", resumed=True))
    assert [q.id for q in book.open()] == ["q4"]  # the resumed lead asks anew; others wait


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
    with pytest.raises(AnswerRefused, match=r"asks for an image a model can look at .*text/plain"):
        check_reply(_question("image"), Provided(url="https://h/a.txt"))
    check_reply(_question("image"), Provided(url="https://h/a.png"))
    check_reply(_question(), Cancelled())


def test_a_data_url_is_typed_by_what_it_declares() -> None:
    png = Provided(url="data:image/png;base64,iVBORw0KGgo=")
    check_reply(_question(accept=["image/png"]), png)  # its own type, not its (absent) suffix
    check_reply(_question("image"), png)
    for url in ("data:text/html,<b>hi</b>", "data:,plain", "data:image/svg+xml,<svg/>"):
        with pytest.raises(AnswerRefused, match="a model can look at"):
            check_reply(_question("image"), Provided(url=url))
    assert media_type_of("data:,x") == "text/plain" and media_type_of("data:IMAGE/GIF;x,y") == (
        "image/gif"
    )


def test_a_url_over_the_wire_s_limit_is_refused_not_sent() -> None:
    with pytest.raises(AnswerRefused, match="upload the file instead"):
        check_reply(_question(), Provided(url="data:text/plain," + "x" * 9000))


@pytest.mark.parametrize(
    ("data", "kind"),
    [
        (b"\x89PNG\r\n\x1a\n....", "image/png"),
        (b"\xff\xd8\xff\xe0JFIF", "image/jpeg"),
        (b"GIF89a....", "image/gif"),
        (b"RIFF\x00\x00\x00\x00WEBPVP8 ", "image/webp"),
        (b"<svg xmlns='http://www.w3.org/2000/svg'/>", ""),
        (b"", ""),
    ],
)
def test_an_uploaded_image_is_typed_by_its_first_bytes(data: bytes, kind: str) -> None:
    assert sniff_image(data) == kind


def test_an_image_upload_is_stored_under_its_type_s_extension() -> None:
    assert upload_name(S, _question("image"), "heron", "image/png").endswith("-heron.png")
    assert upload_name(S, _question("image"), "fox.txt", "image/jpeg").endswith("-fox.jpg")
    assert upload_name(S, _question("image"), "fox.JPEG", "image/jpeg").endswith("-fox.JPEG")


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
