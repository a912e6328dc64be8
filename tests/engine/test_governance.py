"""The interceptor chain of reference 000, each behaviour through the scripted server."""

from __future__ import annotations

from collections.abc import Mapping

from baton.bus.events import ApprovalDecided, ApprovalRequested, GuardFired
from baton.engine import (
    DESCRIBE_IMAGE,
    REQUEST_FILE_UPLOAD,
    ApprovalDecision,
    ApprovalQuestion,
    ImageQuestion,
    InteractionUnavailable,
    LoopLimits,
    MemoryChannel,
    ProvidedMedia,
    Question,
    ToolResult,
    UploadQuestion,
    file_upload_tool,
    image_tool,
    tool,
)
from baton.llm.script import Call, text, tool_calls
from tests.engine.helpers import (
    Observed,
    approve_all,
    cancel_media,
    decline_all,
    harness,
    human,
    tool_messages,
    user,
)

ran: list[str] = []


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    ran.append(f"lookup:{key}")
    return f"value of {key}"


@tool(needs_approval=True)
def delete(path: str) -> str:
    """Delete a file."""
    ran.append(f"delete:{path}")
    return f"deleted {path}"


@tool(needs_approval=True)
def send_mail(to: str) -> str:
    """Send a mail."""
    ran.append(f"mail:{to}")
    return f"mailed {to}"


def setup_function() -> None:
    ran.clear()


# -- loop guard ------------------------------------------------------------------------------------


async def test_an_identical_call_repeated_too_often_is_short_circuited() -> None:
    observed = Observed()
    script = [
        tool_calls(Call("lookup", '{"key": "a"}', id="r1")),
        tool_calls(Call("lookup", '{ "key" : "a" }', id="r2")),
        tool_calls(Call("lookup", '{"key":"a"}', id="r3"), Call("lookup", '{"key": "b"}', id="b")),
        tool_calls(Call("lookup", '{"key": "a"}', id="r4")),
        text("a is value of a"),
    ]
    async with harness(script, [lookup], observed=observed) as h:
        result = await h.loop.run_turn(user("look a up"))
        counts = observed.counts("chat.tool.loop")
    # Round three runs its two calls concurrently: only the first two and the multiset are fixed.
    assert ran[:2] == ["lookup:a", "lookup:a"]
    assert sorted(ran) == ["lookup:a", "lookup:a", "lookup:a", "lookup:b"]
    answer = tool_messages(result.messages)["r4"]
    assert answer.startswith("lookup did not run: it was already called 3 times this turn")
    assert "Do not retry it this turn; answer with what you have." in answer
    assert [(g.outcome, g.call_id) for g in h.log.of(GuardFired)] == [("repeated", "r4")]
    assert counts == {"repeated": 1}


async def test_a_declined_tool_is_declined_again_without_a_second_question() -> None:
    observed = Observed()
    script = [
        tool_calls(Call("delete", '{"path": "/a"}', id="d1")),
        tool_calls(Call("delete", '{"path": "/b"}', id="d2")),
        text("I did not delete anything"),
    ]
    async with MemoryChannel() as channel, human(channel, decline_all) as person:
        async with harness(script, [delete], channel=channel, observed=observed) as h:
            result = await h.loop.run_turn(user("clean up"))
            loop_counts = observed.counts("chat.tool.loop")
            hitl = observed.counts("hitl.decision")
            sides = observed.counts("hitl.decision", "side")
    assert ran == [] and len(person.questions) == 1
    answers = tool_messages(result.messages)
    assert answers["d1"].startswith("delete did not run: the user declined it. Reason given: no")
    assert answers["d2"].startswith("delete did not run: it was already declined earlier this turn")
    assert loop_counts == {"declined-repeat": 1}
    assert hitl == {"declined": 1} and sides == {"chat": 1}
    assert [(d.call_id, d.approved, d.reason) for d in h.log.of(ApprovalDecided)] == [
        ("d1", False, "no thanks")
    ]


# -- human approval --------------------------------------------------------------------------------


async def test_gated_calls_of_a_round_are_batched_into_one_question() -> None:
    observed = Observed()

    def approve_delete_only(channel: MemoryChannel, question: Question) -> None:
        assert isinstance(question, ApprovalQuestion)
        channel.decide(
            question.id,
            {
                call.call_id: ApprovalDecision(approved=call.name == "delete", reason="policy")
                for call in question.calls
            },
        )

    script = [
        tool_calls(
            Call("send_mail", '{"to": "boss"}', id="m1"),
            Call("lookup", '{"key": "k"}', id="l1"),
            Call("delete", '{"path": "/tmp/x"}', id="d1"),
        ),
        text("deleted, did not mail"),
    ]
    async with MemoryChannel() as channel, human(channel, approve_delete_only) as person:
        tools = [lookup, delete, send_mail]
        async with harness(script, tools, channel=channel, observed=observed) as h:
            result = await h.loop.run_turn(user("tidy"))
            hitl = observed.counts("hitl.decision")
    assert len(person.questions) == 1
    question = person.questions[0]
    assert isinstance(question, ApprovalQuestion)
    assert [c.call_id for c in question.calls] == ["m1", "d1"]
    assert sorted(ran) == ["delete:/tmp/x", "lookup:k"]
    answers = tool_messages(result.messages)
    assert answers["d1"] == "deleted /tmp/x" and answers["l1"] == "value of k"
    assert answers["m1"].startswith("send_mail did not run: the user declined it.")
    assert [m["tool_call_id"] for m in result.messages if m["role"] == "tool"] == ["m1", "l1", "d1"]
    assert len(h.log.of(ApprovalRequested)) == 1
    assert hitl == {"approved": 1, "declined": 1}


async def test_approval_fails_closed_on_timeout() -> None:
    observed = Observed()
    limits = LoopLimits(approval_timeout_s=0.05)
    script = [tool_calls(Call("delete", '{"path": "/a"}', id="d1")), text("no answer, no delete")]
    async with MemoryChannel() as channel, human(channel, answer=None) as person:
        async with harness(
            script, [delete], channel=channel, limits=limits, observed=observed
        ) as h:
            result = await h.loop.run_turn(user("delete /a"))
            hitl = observed.counts("hitl.decision")
    assert ran == [] and len(person.questions) == 1
    assert [c.id for c in person.closed] == [person.questions[0].id]  # the dialog was closed
    answer = tool_messages(result.messages)["d1"]
    assert answer.startswith("delete did not run: approval could not be obtained (no answer within")
    assert hitl == {"ask-failed": 1}
    assert channel.pending() == []


class BrokenChannel:
    """A channel whose every question fails (e.g. the UI is gone)."""

    async def ask_approval(self, question: ApprovalQuestion) -> Mapping[str, ApprovalDecision]:
        raise InteractionUnavailable("the approval dialog could not be shown")

    async def request_upload(self, question: UploadQuestion) -> ProvidedMedia | None:
        raise RuntimeError("upload widget crashed")

    async def request_image(self, question: ImageQuestion) -> ProvidedMedia | None:
        raise RuntimeError("image picker crashed")

    def cancel_pending(self) -> None:
        return None


async def test_approval_fails_closed_on_error_and_without_a_channel() -> None:
    observed = Observed()
    script = [tool_calls(Call("delete", '{"path": "/a"}', id="d1")), text("could not ask")]
    async with harness(script, [delete], channel=BrokenChannel(), observed=observed) as h:
        broken = await h.loop.run_turn(user("delete"))
        hitl = observed.counts("hitl.decision")
    async with harness(script, [delete]) as h:
        nobody = await h.loop.run_turn(user("delete"))
    assert ran == []
    assert "the approval dialog could not be shown" in tool_messages(broken.messages)["d1"]
    assert "no interaction channel is configured" in tool_messages(nobody.messages)["d1"]
    assert hitl == {"ask-failed": 1}


# -- file upload -----------------------------------------------------------------------------------


async def test_upload_cancel_declines_the_tool_for_the_turn() -> None:
    script = [
        tool_calls(Call(REQUEST_FILE_UPLOAD, '{"prompt": "the CSV please"}', id="u1")),
        tool_calls(Call(REQUEST_FILE_UPLOAD, '{"prompt": "please!"}', id="u2")),
        text("Please upload the CSV in a new message."),
    ]
    async with MemoryChannel() as channel, human(channel, cancel_media) as person:
        async with harness(script, [file_upload_tool()], channel=channel) as h:
            result = await h.loop.run_turn(user("analyse my data"))
    assert len(person.questions) == 1
    question = person.questions[0]
    assert isinstance(question, UploadQuestion) and question.prompt == "the CSV please"
    answers = tool_messages(result.messages)
    assert "no file was uploaded (the user cancelled)" in answers["u1"]
    assert "tell the user to upload the file in a new message" in answers["u1"]
    assert "already declined earlier this turn" in answers["u2"]
    assert [g.outcome for g in h.log.of(GuardFired)] == ["declined-repeat"]


async def test_an_uploaded_file_is_reported_to_the_model() -> None:
    def upload(channel: MemoryChannel, question: Question) -> None:
        channel.provide(
            question.id,
            ProvidedMedia(url="file:///up/data.csv", name="data.csv", media_type="text/csv"),
        )

    script = [
        tool_calls(Call(REQUEST_FILE_UPLOAD, '{"prompt": "CSV", "accept": [".csv"]}', id="u1")),
        text("got it"),
    ]
    async with MemoryChannel() as channel, human(channel, upload) as person:
        async with harness(script, [file_upload_tool()], channel=channel) as h:
            result = await h.loop.run_turn(user("analyse"))
    question = person.questions[0]
    assert isinstance(question, UploadQuestion) and question.accept == (".csv",)
    assert tool_messages(result.messages)["u1"] == (
        "request_file_upload: the user uploaded 'data.csv' (text/csv). "
        "It is available at file:///up/data.csv"
    )
    assert len(h.requests) == 2


# -- image reference -------------------------------------------------------------------------------


async def test_an_image_is_attached_as_a_follow_up_user_message() -> None:
    @tool
    def render(scene: str) -> ToolResult:
        """Render a scene."""
        return ToolResult("rendered", media_urls=[f"https://cdn.test/{scene}.png"])

    script = [
        tool_calls(Call("render", '{"scene": "beach"}', id="r1")),
        tool_calls(
            Call(DESCRIBE_IMAGE, '{"image": "beach.png", "prompt": "any people?"}', id="i1")
        ),
        text("no people"),
    ]
    async with MemoryChannel() as channel, human(channel) as person:
        async with harness(script, [render, image_tool()], channel=channel) as h:
            result = await h.loop.run_turn(user("render a beach and check it"))
    assert person.questions == []  # resolved from this turn's media, nobody asked
    sent = h.requests[2].messages
    assert sent[-2] == {
        "role": "tool",
        "tool_call_id": "i1",
        "content": "describe_image: the image https://cdn.test/beach.png is attached in the next "
        "user message. Look at it there and answer from what you see.",
    }
    assert sent[-1]["role"] == "user"
    assert sent[-1]["content"][1] == {
        "type": "image_url",
        "image_url": {"url": "https://cdn.test/beach.png"},
    }
    assert "any people?" in sent[-1]["content"][0]["text"]
    assert result.messages[-2]["role"] == "user"


async def test_an_unresolvable_image_is_asked_for_and_cancel_declines_it() -> None:
    def pick(channel: MemoryChannel, question: Question) -> None:
        assert isinstance(question, ImageQuestion)
        if question.reference == "holiday":
            channel.provide(question.id, ProvidedMedia(url="data:image/png;base64,AAAA"))
        else:
            channel.provide(question.id, None)

    script = [
        tool_calls(Call(DESCRIBE_IMAGE, '{"image": "holiday"}', id="i1")),
        tool_calls(Call(DESCRIBE_IMAGE, '{"image": "other"}', id="i2")),
        tool_calls(Call(DESCRIBE_IMAGE, '{"image": "third"}', id="i3")),
        text("done"),
    ]
    async with MemoryChannel() as channel, human(channel, pick) as person:
        async with harness(script, [image_tool()], channel=channel) as h:
            result = await h.loop.run_turn(user("look"))
    assert [q.reference for q in person.questions if isinstance(q, ImageQuestion)] == [
        "holiday",
        "other",
    ]
    answers = tool_messages(result.messages)
    assert "data:image/png;base64,AAAA is attached" in answers["i1"]
    assert "no image is available (the user cancelled)" in answers["i2"]
    assert "already declined earlier this turn" in answers["i3"]


# -- interaction budget ----------------------------------------------------------------------------


async def test_one_human_interaction_per_round() -> None:
    observed = Observed()
    script = [
        tool_calls(
            Call("delete", '{"path": "/a"}', id="d1"),
            Call(REQUEST_FILE_UPLOAD, '{"prompt": "x"}', id="u1"),
            Call(DESCRIBE_IMAGE, "{}", id="i1"),
        ),
        tool_calls(Call(REQUEST_FILE_UPLOAD, '{"prompt": "x"}', id="u2")),
        text("done"),
    ]

    def answer(channel: MemoryChannel, question: Question) -> None:
        if isinstance(question, ApprovalQuestion):
            channel.decide(question.id, True)
        else:
            channel.provide(question.id, ProvidedMedia(url="https://up.test/f.txt", name="f.txt"))

    tools = [delete, file_upload_tool(), image_tool()]
    async with MemoryChannel() as channel, human(channel, answer) as person:
        async with harness(script, tools, channel=channel, observed=observed) as h:
            result = await h.loop.run_turn(user("go"))
            counts = observed.counts("chat.tool.loop")
    assert [q.kind for q in person.questions] == ["approval", "upload"]
    answers = tool_messages(result.messages)
    assert answers["d1"] == "deleted /a"
    for call_id in ("u1", "i1"):
        assert "this round already used its 1 question(s) to the user" in answers[call_id]
        assert "call it on its own in your next round" in answers[call_id]
    assert "the user uploaded 'f.txt'" in answers["u2"]  # the next round has a fresh budget
    assert counts == {"interaction-budget": 2}


async def test_approve_all_lets_gated_calls_run() -> None:
    script = [tool_calls(Call("delete", '{"path": "/a"}', id="d1")), text("deleted")]
    async with MemoryChannel() as channel, human(channel, approve_all):
        async with harness(script, [delete], channel=channel) as h:
            result = await h.loop.run_turn(user("delete"))
    assert ran == ["delete:/a"] and tool_messages(result.messages)["d1"] == "deleted /a"
    assert [(d.approved, d.reason) for d in h.log.of(ApprovalDecided)] == [(True, "")]


async def test_an_upload_nobody_answers_times_out_and_declines_the_tool() -> None:
    limits = LoopLimits(upload_timeout_s=0.05)
    script = [
        tool_calls(Call(REQUEST_FILE_UPLOAD, '{"prompt": "the logs"}', id="u1")),
        text("please upload the logs in a new message"),
    ]
    async with MemoryChannel() as channel, human(channel, answer=None) as person:
        async with harness(script, [file_upload_tool()], channel=channel, limits=limits) as h:
            result = await h.loop.run_turn(user("debug this"))
    assert "no file was uploaded (no answer within 0.05 s)" in tool_messages(result.messages)["u1"]
    assert [c.reason for c in person.closed] == ["withdrawn"]
    assert channel.pending() == []


async def test_the_embedders_image_resolver_is_used_before_asking() -> None:
    async def resolve(reference: str) -> str | None:
        return f"https://gallery.test/{reference}.jpg" if reference == "sunset" else None

    script = [
        tool_calls(Call(DESCRIBE_IMAGE, '{"image": "sunset"}', id="i1")),
        text("orange sky"),
    ]
    async with MemoryChannel() as channel, human(channel) as person:
        async with harness(script, [image_tool()], channel=channel, image_resolver=resolve) as h:
            await h.loop.run_turn(user("describe sunset"))
    assert person.questions == []
    image = h.requests[1].messages[-1]["content"][1]
    assert image == {"type": "image_url", "image_url": {"url": "https://gallery.test/sunset.jpg"}}
