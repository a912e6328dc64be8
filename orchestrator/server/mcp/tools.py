"""The tools: ``run`` a session, ``post`` to one, its ``state``, ``cancel`` it, list the
``profiles``. Each has an input and an output schema (:mod:`.schemas`).

Bad arguments are a tool error (``isError: true``) with one line naming the argument and what is
wrong, as the MCP specification asks of input validation (the host's model can correct the
call); an unknown tool is a JSON-RPC ``-32602``. Either way nothing started, and the server goes
on serving.

``run`` follows its session to the end (:mod:`.follow`), a progress line at a time, and asks the
session's questions to a person as the host can: in an elicitation of the call (2025-11-25); as
the call's input request, answered by the call retried with the answers (2026-07-28, the SDK's
client does that from its elicitation callback); or not at all, when the host offers no
elicitation — then each is declined on the spot (fail closed) and the result's notes say so. The
session is the call's: a call cancelled by its client (``notifications/cancelled``, a closed
stream) cancels it.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INVALID_PARAMS,
    CallToolRequestParams,
    CallToolResult,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    InputRequiredResult,
    TextContent,
    Tool,
    ToolExecution,
)
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from baton.bus.errors import BusError, InvalidEnvelope, SessionNotRunning
from baton.bus.messages import make_envelope
from baton.bus.user_post import USER
from baton.engine.questions import Cancelled, QuestionNotFound, find_question
from baton.server.mcp.askers import ATTEMPTS, ElicitAsker, NobodyAsker, deliver
from baton.server.mcp.asking import elicitation_params, reply_of
from baton.server.mcp.backend import CallRefused
from baton.server.mcp.call import Call
from baton.server.mcp.follow import Asker, Followed, follow_session
from baton.server.mcp.results import run_result
from baton.server.mcp.revisions import has_links, has_tasks, links_as_text
from baton.server.mcp.schemas import (
    CancelResult,
    NoArguments,
    PostArguments,
    PostResult,
    ProfilesResult,
    RunArguments,
    RunResult,
    SessionArguments,
    StateResult,
    input_schema,
    output_schema,
)
from baton.server.schemas import ProfileInfo
from baton.server.state import session_state
from baton.session.view import LEAD_NAME

log = logging.getLogger(__name__)

CANCEL_WAIT_S = 10.0
"""How long ``cancel`` waits for the session's end before answering ``cancelling``."""
FOLLOW_SLACK_S = 120.0
"""How long past a session's own timeout ``run`` follows it (its end is logged by then)."""
NOBODY = "this MCP host offers no elicitation, so nobody could be asked"


class RoundState(BaseModel):
    """What a 2026-07-28 ``run`` hands back in ``requestState`` (sealed by the SDK's boundary,
    so a client can neither read nor change it): the session, how far its log was reported,
    the questions the input request asked, and the answers refused so far (question id → the
    refusals, the last one's words): a question is asked again with its refusal said, and
    cancelled after :data:`~.askers.ATTEMPTS` refused answers, as over 2025-11-25."""

    model_config = ConfigDict(defer_build=True, extra="forbid", frozen=True)

    session: str
    cursor: str | None
    asked: list[str]
    refused: dict[str, tuple[int, str]] = Field(default_factory=dict)


Handler = Callable[
    [Call, Any, CallToolRequestParams], Awaitable[CallToolResult | InputRequiredResult]
]


@dataclass(frozen=True, slots=True)
class ToolSpec:
    name: str
    description: str
    arguments: type[BaseModel]
    result: type[BaseModel]
    handler: Handler
    tasks: bool = False


def error_result(text: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(text=text)], is_error=True)


def describe_arguments(tool: str, exc: ValidationError) -> str:
    """The first bad argument in one line: ``run: task: Field required``."""
    first = exc.errors(include_url=False)[0]
    where = ".".join(str(part) for part in first["loc"]) or "arguments"
    if first["type"] == "extra_forbidden":
        return f"{tool}: {where}: unknown argument (see the tool's inputSchema)"
    message = str(first["msg"]).removeprefix("Value error, ")
    return f"{tool}: {where}: {message}"


# -- run ------------------------------------------------------------------------------------------


def asker_of(call: Call, session: str, notes: list[str]) -> tuple[Asker | None, bool]:
    """How this call handles its session's questions, and whether it pauses for them instead
    (2026-07-28: they go back as the call's input request); see the module docstring."""
    backend = call.backend
    if not call.can_elicit:
        return NobodyAsker(backend.bus, session, NOBODY, notes), False
    if call.modern:
        return None, True
    asker = ElicitAsker(backend.bus, session, call.elicit, notes, claims=backend.asking)
    return asker, False


async def _answer_round(
    call: Call, state: RoundState, params: CallToolRequestParams
) -> tuple[list[str], dict[str, tuple[int, str]]]:
    """A retried round: deliver the host's answers to the questions it was asked; returns the
    ones settled (the rest are asked again) and the refusals so far."""
    responses = params.input_responses or {}
    settled: list[str] = []
    refused = dict(state.refused)
    bus = call.backend.bus
    for key in state.asked:
        response = responses.get(key)
        if response is None:
            continue
        try:
            question = await find_question(bus, state.session, key)
        except QuestionNotFound:  # answered elsewhere, or expired: nothing to deliver
            settled.append(key)
            continue
        if isinstance(response, ElicitResult):
            reply = reply_of(question, response.action, response.content)
        else:
            reply = reply_of(question, "decline", None)
        refusal = await deliver(bus, state.session, question, reply)
        if refusal is None:
            settled.append(key)
            continue
        tries = refused.get(key, (0, ""))[0] + 1
        refused[key] = (tries, refusal)
        if tries >= ATTEMPTS:
            why = f"{ATTEMPTS} answers from the MCP host were refused (the last: {refusal})"
            await deliver(bus, state.session, question, Cancelled(reason=why))
            settled.append(key)
    return settled, refused


def _round_state(params: CallToolRequestParams) -> RoundState | None:
    if params.request_state is None:
        return None
    try:
        return RoundState.model_validate_json(params.request_state)
    except ValidationError as exc:
        raise MCPError(code=INVALID_PARAMS, message="Invalid or expired requestState") from exc


async def run_tool(
    call: Call, args: RunArguments, params: CallToolRequestParams
) -> CallToolResult | InputRequiredResult:
    backend = call.backend
    state = _round_state(params)
    skip: list[str] = []
    refused: dict[str, tuple[int, str]] = {}
    if state is None:
        session = await backend.start(args)
        emit_after: str | None = None
    else:
        session, emit_after = state.session, state.cursor
        skip, refused = await _answer_round(call, state, params)
    notes: list[str] = []
    asker, pause = asker_of(call, session, notes)
    bound = backend.session_config(args).timeout_s + FOLLOW_SLACK_S
    try:
        with anyio.fail_after(bound):
            followed = await follow_session(
                backend.bus,
                session,
                report=call.report,
                asker=asker,
                emit_after=emit_after,
                pause=pause,
                skip=skip,
                outage_s=backend.config.bus_outage_s,
            )
    except TimeoutError:
        return error_result(
            f"session {session} did not end within {bound:.0f} s of its start; `state` shows "
            "where it stands"
        )
    except BusError as exc:  # gone longer than bus_outage_s: this call ends, the server goes on
        return error_result(
            f"run: session {session}: lost the bus while following it ({exc}); `state` shows "
            "where it stands once the bus answers"
        )
    except anyio.get_cancelled_exc_class():
        with anyio.CancelScope(shield=True):  # the caller gave up on the call: its session ends
            await _cancel_quietly(call, session)
        raise
    if followed.paused:
        return _input_required(followed, session, refused)
    return await run_result(followed.fold, notes, call.media())


def _input_required(
    followed: Followed, session: str, refused: dict[str, tuple[int, str]]
) -> InputRequiredResult:
    requests: dict[str, ElicitRequest] = {}
    for question in followed.paused:
        params = elicitation_params(question)
        if question.id in refused:
            params["message"] = f"That answer was refused: {refused[question.id][1]}. " + str(
                params["message"]
            )
        requests[question.id] = ElicitRequest(params=ElicitRequestFormParams.model_validate(params))
    asked = [question.id for question in followed.paused]
    state = RoundState(
        session=session,
        cursor=followed.fold.cursor,
        asked=asked,
        refused={key: value for key, value in refused.items() if key in asked},
    )
    return InputRequiredResult(input_requests=dict(requests), request_state=state.model_dump_json())


async def _cancel_quietly(call: Call, session: str) -> None:
    try:
        await call.backend.cancel(session)
    except (CallRefused, BusError) as exc:
        log.info("session %s: not cancelled with its call: %s", session, exc)


# -- post, state, cancel, profiles ----------------------------------------------------------------


async def post_tool(
    call: Call, args: PostArguments, params: CallToolRequestParams
) -> CallToolResult:
    bus = call.backend.bus
    problem = await bus.key_problem(args.session, sender="this MCP server")
    if problem is not None:
        raise CallRefused(f"nothing sent to session {args.session}: {problem}")
    try:
        envelope = make_envelope(session=args.session, sender=USER, recipient=LEAD_NAME,
                                 type="task", content=args.content)  # fmt: skip
        posted = await bus.inboxes.send_if_running(envelope)
    except InvalidEnvelope as exc:
        raise CallRefused(f"post: {exc.reason}") from exc
    except SessionNotRunning as exc:
        if not exc.status:
            raise CallRefused(f"no session {args.session} runs on this bus") from exc
        raise CallRefused(
            f"session {args.session} is not running ({exc.status}): nothing reads its messages "
            "any more; start a new session with run for a follow-up"
        ) from exc
    return _structured(PostResult(session=args.session, id=posted), f"posted {posted}")


async def state_tool(
    call: Call, args: SessionArguments, params: CallToolRequestParams
) -> CallToolResult:
    backend = call.backend
    state = await session_state(backend.bus.log, args.session)
    if state.events == 0 and not backend.host.is_hosted(args.session):
        raise CallRefused(f"no session {args.session!r} on this bus")
    media = call.media()
    state.media_urls = [media.openable(url) for url in state.media_urls]
    state.missing_media = [media.openable(url) for url in state.missing_media]
    for agent in state.agents:
        agent.media_urls = [media.openable(url) for url in agent.media_urls]
    result = StateResult(**state.model_dump())  # open_questions folded with the rest
    agents = ", ".join(f"{a.name} {a.status}" for a in state.agents) or "no sub-agents"
    return _structured(result, f"session {args.session} {state.status}: {agents}")


async def cancel_tool(
    call: Call, args: SessionArguments, params: CallToolRequestParams
) -> CallToolResult:
    backend = call.backend
    await backend.cancel(args.session)
    status = "cancelling"
    with anyio.move_on_after(CANCEL_WAIT_S):
        followed = await follow_session(backend.bus, args.session, report=_quiet, asker=None,
                                        outage_s=backend.config.bus_outage_s)  # fmt: skip
        if followed.fold.finished is not None:
            status = followed.fold.finished.status
    return _structured(CancelResult(session=args.session, status=status),
                       f"session {args.session}: {status}")  # fmt: skip


async def profiles_tool(
    call: Call, args: NoArguments, params: CallToolRequestParams
) -> CallToolResult:
    profiles = [ProfileInfo(name=p.name, description=p.description)
                for p in call.backend.host.profiles.values()]  # fmt: skip
    text = "\n".join(f"{p.name}: {p.description}" for p in profiles) or "no profiles"
    return _structured(ProfilesResult(profiles=profiles), text)


async def _quiet(line: str) -> None:
    """No progress: ``cancel`` only waits for the end."""


def _structured(result: BaseModel, text: str) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(text=text)], structured_content=result.model_dump(mode="json")
    )


# -- the table ------------------------------------------------------------------------------------

TOOLS: dict[str, ToolSpec] = {
    spec.name: spec
    for spec in (
        ToolSpec(
            "run",
            "Run a multi-agent session: a lead agent delegates the task to sub-agents (painters, "
            "writers, …) and answers with their work. Returns the final answer, the media made "
            "(links, small pictures inline) and the session's status; progress comes as "
            "notifications. A tool that needs a person's approval is asked through this host "
            "(approve=ask) or decided by policy (auto, deny).",
            RunArguments,
            RunResult,
            run_tool,
            tasks=True,
        ),
        ToolSpec(
            "post",
            "Send a follow-up message from the user to a running session's lead.",
            PostArguments,
            PostResult,
            post_tool,
        ),
        ToolSpec(
            "state",
            "Where a session stands: its status, its sub-agents, the lead's answer, its media, "
            "and the questions that wait for a person.",
            SessionArguments,
            StateResult,
            state_tool,
        ),
        ToolSpec(
            "cancel",
            "Cancel a running session: every sub-agent is told to shut down and the session "
            "ends cancelled.",
            SessionArguments,
            CancelResult,
            cancel_tool,
        ),
        ToolSpec(
            "profiles",
            "List the sub-agent profiles a session may use (the run tool's profiles argument).",
            NoArguments,
            ProfilesResult,
            profiles_tool,
        ),
    )
}


def tool_list(version: str) -> list[Tool]:
    """Every tool with its schemas; from 2025-11-25 on, ``run`` says it may be called as a task
    (an older client is offered no tasks: :mod:`.revisions`)."""
    tasks = has_tasks(version)
    return [
        Tool(
            name=spec.name,
            description=spec.description,
            input_schema=input_schema(spec.arguments),
            output_schema=output_schema(spec.result),
            execution=(
                ToolExecution(task_support="optional" if spec.tasks else "forbidden")
                if tasks
                else None
            ),
        )
        for spec in TOOLS.values()
    ]


def spec_of(name: str) -> ToolSpec:
    spec = TOOLS.get(name)
    if spec is None:
        raise MCPError(
            code=INVALID_PARAMS,
            message=f"Unknown tool: {name[:80]!r}; the tools are {', '.join(TOOLS)}",
        )
    return spec


def arguments_of(spec: ToolSpec, params: CallToolRequestParams) -> BaseModel | CallToolResult:
    """The call's arguments, validated; or the error result that says what is wrong."""
    try:
        return spec.arguments.model_validate(params.arguments or {})
    except ValidationError as exc:
        return error_result(describe_arguments(spec.name, exc))


async def call_tool(
    call: Call, params: CallToolRequestParams
) -> CallToolResult | InputRequiredResult:
    """``tools/call``: validate, run the tool; a refusal or a bus fault is an error result."""
    spec = spec_of(params.name)
    args = arguments_of(spec, params)
    if isinstance(args, CallToolResult):
        return args
    try:
        result = await spec.handler(call, args, params)
    except CallRefused as exc:
        return error_result(str(exc))
    except BusError as exc:
        return error_result(f"{spec.name}: the bus does not answer ({exc}); try again")
    if isinstance(result, CallToolResult) and not has_links(call.ctx.protocol_version):
        return links_as_text(result, call.media().openable_resource)
    return result
