"""How a remote agent's A2A events fold into what baton reports (no server needed: pure data)."""

from __future__ import annotations

from a2a.types import (
    Artifact,
    Message,
    Part,
    Role,
    StreamResponse,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)

from baton.subagents.a2a_events import Exchange, Step


def status(state: TaskState, text: str = "") -> StreamResponse:
    said = Message(role=Role.ROLE_AGENT, parts=[Part(text=text)]) if text else None
    update = TaskStatusUpdateEvent(
        task_id="t1", context_id="c1", status=TaskStatus(state=state, message=said)
    )
    return StreamResponse(status_update=update)


def artifact(artifact_id: str, *parts: Part, append: bool = False) -> StreamResponse:
    update = TaskArtifactUpdateEvent(
        task_id="t1",
        context_id="c1",
        artifact=Artifact(artifact_id=artifact_id, parts=list(parts)),
        append=append,
    )
    return StreamResponse(artifact_update=update)


def test_a_task_s_events_become_progress_media_and_a_result() -> None:
    exchange = Exchange()
    submitted = Task(
        id="t1", context_id="c1", status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED)
    )
    assert exchange.fold(StreamResponse(task=submitted)) is Step.GO_ON
    assert (exchange.context_id, exchange.open_task) == ("c1", "t1")
    assert exchange.fold(status(TaskState.TASK_STATE_WORKING)) is Step.GO_ON  # nothing to say
    assert exchange.fold(status(TaskState.TASK_STATE_WORKING, "sketching")) is Step.PROGRESS
    assert exchange.progress == "sketching"
    exchange.fold(artifact("a1", Part(url="https://x/fox.png"), Part(text="a fox")))
    exchange.fold(
        artifact("a2", Part(text="in the "), Part(raw=b"\x89PNG", media_type="image/png"))
    )
    exchange.fold(artifact("a2", Part(text="snow"), append=True))  # a chunk of the same artifact
    assert exchange.fold(status(TaskState.TASK_STATE_COMPLETED, "done")) is Step.DONE
    assert exchange.media == ["https://x/fox.png"]
    assert [(raw.data, raw.media_type) for raw in exchange.raw] == [(b"\x89PNG", "image/png")]
    assert exchange.text == "a fox\n\nin the snow\n\ndone"
    assert exchange.open_task == ""  # completed: a follow-up starts a new task in c1


def test_a_plain_message_is_the_whole_answer() -> None:
    exchange = Exchange()
    reply = Message(role=Role.ROLE_AGENT, context_id="c9", parts=[Part(text="42")])
    assert exchange.fold(StreamResponse(message=reply)) is Step.DONE
    assert (exchange.text, exchange.context_id) == ("42", "c9")


def test_questions_and_failures_say_what_the_remote_said() -> None:
    exchange = Exchange()
    assert exchange.fold(status(TaskState.TASK_STATE_INPUT_REQUIRED, "which size?")) is Step.ASK
    assert exchange.question == "which size?" and exchange.open_task == "t1"
    for state, words in [
        (TaskState.TASK_STATE_FAILED, "the remote agent failed: out of paint"),
        (TaskState.TASK_STATE_REJECTED, "the remote agent rejected the task: out of paint"),
    ]:
        failed = Exchange()
        assert failed.fold(status(state, "out of paint")) is Step.FAILED
        assert failed.error == words and failed.open_task == ""
    # waiting for credentials baton cannot give: an error, and the task still open on the
    # remote, so that the relay cancels it there
    locked = Exchange()
    assert locked.fold(status(TaskState.TASK_STATE_AUTH_REQUIRED, "sign in")) is Step.FAILED
    assert "asked for authentication" in locked.error and locked.open_task == "t1"


def test_a_task_snapshot_repeats_its_artifacts_without_counting_them_twice() -> None:
    """A resubscribed stream starts with the task as it stands (every artifact streamed so far):
    the result says each once, and an artifact sent whole again replaces what it said."""
    exchange = Exchange()
    assert exchange.fold(status(TaskState.TASK_STATE_WORKING, "sketching")) is Step.PROGRESS
    exchange.fold(artifact("a1", Part(text="painted a fox")))
    exchange.fold(artifact("a2", Part(raw=b"\x89PNG", media_type="image/png")))
    exchange.fold(artifact("a3", Part(text="in the "), append=True))
    exchange.fold(artifact("a3", Part(text="snow"), append=True))
    snapshot = Task(
        id="t1",
        context_id="c1",
        status=TaskStatus(
            state=TaskState.TASK_STATE_WORKING,
            message=Message(role=Role.ROLE_AGENT, parts=[Part(text="sketching")]),
        ),
        artifacts=[
            Artifact(artifact_id="a1", parts=[Part(text="painted a fox")]),
            Artifact(artifact_id="a2", parts=[Part(raw=b"\x89PNG", media_type="image/png")]),
            Artifact(artifact_id="a3", parts=[Part(text="in the snow")]),
        ],
    )
    assert exchange.fold(StreamResponse(task=snapshot)) is Step.GO_ON  # reported already
    exchange.fold(artifact("a1", Part(text="painted a fox, twice")))  # the same artifact, redone
    assert exchange.fold(status(TaskState.TASK_STATE_COMPLETED)) is Step.DONE
    assert exchange.text == "painted a fox, twice\n\nin the snow"
    assert [raw.data for raw in exchange.raw] == [b"\x89PNG"]
