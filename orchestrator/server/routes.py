"""The JSON routes of the API (the SSE stream is in :mod:`.sse`, files in :mod:`.media`).

Posting and approving go straight to the bus, so they work for any session on it — one this
server runs, one ``baton run`` started elsewhere, one on a remote worker — exactly as
``baton post`` and ``baton approve`` do. Cancelling needs the session's owner, so only a session
this server runs can be cancelled here.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from pydantic import BaseModel
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from baton.bus.errors import InvalidEnvelope, SessionNotRunning
from baton.bus.messages import make_envelope
from baton.bus.user_post import USER, user_post_problem
from baton.engine.bus_channel import ApprovalNotFound, answer_approval
from baton.lead.keeper import SessionExists
from baton.server.access import session_tokens
from baton.server.approval_policy import ApprovalTooLoose, session_approve
from baton.server.context import ServerContext
from baton.server.media import public_url
from baton.server.schemas import (
    Cancelled,
    Decided,
    Decision,
    Posted,
    PostMessage,
    ProfileInfo,
    Profiles,
    Started,
    StartSession,
)
from baton.server.security import read_model
from baton.server.state import SessionState, list_sessions, session_state
from baton.session import SessionConfig

MAX_LIST = 200
LIVE = ("pending", "running")
"""The statuses of a session whose agents still read their inboxes."""


def _json(model: BaseModel, status: int = 200) -> Response:
    return Response(model.model_dump_json(), status_code=status, media_type="application/json")


async def start_session(request: Request) -> Response:
    ctx = ServerContext.of(request)
    body = await read_model(request, StartSession, ctx.config.max_body_bytes)
    profiles = ctx.host.profiles
    if body.profiles is not None:
        unknown = [name for name in body.profiles if name not in profiles]
        if unknown:
            known = ", ".join(sorted(profiles))
            raise HTTPException(422, f"profiles: unknown profile {unknown[0]!r} (known: {known})")
        profiles = {name: profiles[name] for name in body.profiles}
    asked = body.approve if "approve" in body.model_fields_set else None
    try:
        approve = session_approve(asked, ctx.config.approve)
    except ApprovalTooLoose as exc:
        raise HTTPException(403, str(exc)) from exc
    timeout = min(body.timeout_s or ctx.config.session_timeout_s, ctx.config.max_session_timeout_s)
    config = SessionConfig(
        task=body.task,
        bus_url=ctx.bus.url,
        model=ctx.model,
        profiles=profiles,
        approve=approve,
        timeout_s=timeout,
        media_dir=ctx.media_root,
        media=ctx.config.media,
        images=ctx.config.images,
        instructions=body.instructions,
    )
    if ctx.host.stopping:
        raise HTTPException(503, "the server is stopping: start the session on another one")
    try:
        session = await ctx.host.start(config)
    except SessionExists as exc:  # an id the bus already has (ids are drawn: a clash, not input)
        raise HTTPException(409, str(exc)) from exc
    started = Started(
        id=session,
        page=f"/sessions/{session}",
        events=f"/sessions/{session}/events",
        state=f"/sessions/{session}/state",
        tokens=await session_tokens(ctx, session),
    )
    return _json(started, 201)


async def get_sessions(request: Request) -> Response:
    ctx = ServerContext.of(request)
    raw = request.query_params.get("limit", "50")
    if not raw.isdigit() or not 1 <= int(raw) <= MAX_LIST:
        raise HTTPException(422, f"limit: must be a whole number from 1 to {MAX_LIST}")
    return _json(await list_sessions(ctx.bus.log, int(raw)))


async def known_state(ctx: ServerContext, session: str) -> SessionState:
    """The session's state, or 404 for an unknown one: no event log and not running here (a
    session this server just started may not have logged yet)."""
    state = await session_state(ctx.bus.log, session)
    if state.events == 0 and not ctx.host.is_hosted(session):
        raise HTTPException(404, f"no session {session!r} on this server's bus")
    return state


async def get_state(request: Request) -> Response:
    ctx = ServerContext.of(request)
    session = ctx.session_id(request)
    state = await known_state(ctx, session)
    root = ctx.media_root
    state.media_urls = [public_url(url, root) for url in state.media_urls]
    state.missing_media = [public_url(url, root) for url in state.missing_media]
    for agent in state.agents:
        agent.media_urls = [public_url(url, root) for url in agent.media_urls]
    return _json(state)


@contextmanager
def _refused_input() -> Iterator[None]:
    """The bus refused a message built from the request (an address or a size it does not
    accept): the client's input, so a 422 with the bus's reason, never a 500. Only around such
    a message: an ``InvalidEnvelope`` from anywhere else is the server's fault."""
    try:
        yield
    except InvalidEnvelope as exc:
        raise HTTPException(422, exc.reason) from exc


async def refuse_other_keys(ctx: ServerContext, session: str) -> None:
    """409 when ``session`` signs its envelopes and this server has no signing key, or another
    one: what it sent would be dead-lettered unread while the API answered success (as ``baton
    post`` and ``baton approve`` refuse it; docs/protocol.md, *Signed envelopes*)."""
    problem = await ctx.bus.key_problem(session, sender="this server")
    if problem is not None:
        raise HTTPException(409, f"nothing sent to session {session}: {problem}")


async def post_message(request: Request) -> Response:
    ctx = ServerContext.of(request)
    session = ctx.session_id(request)
    body = await read_model(request, PostMessage, ctx.config.max_body_bytes)
    # Nobody reads the inbox of an unknown or finished session: the message would be lost.
    state = await known_state(ctx, session)
    if state.status not in LIVE:
        raise HTTPException(
            409,
            f"session {session!r} has finished ({state.status}): nothing reads its messages any "
            "more; start a new session for a follow-up",
        )
    # The schema admits only the user's types; checked again by the rule ``baton post`` obeys, so
    # a wider schema can never let the API speak for an agent (docs/protocol.md).
    problem = user_post_problem(USER, body.type)
    if problem is not None:
        raise HTTPException(422, f"type: {problem}")
    await refuse_other_keys(ctx, session)
    with _refused_input():
        envelope = make_envelope(session=session, sender=USER, recipient=body.to,
                                 type=body.type, content=body.content)  # fmt: skip
        try:  # the look at its lead and the write in one step (docs/protocol.md, closing)
            posted = await ctx.bus.inboxes.send_if_running(envelope)
        except SessionNotRunning as exc:
            if exc.status or state.status != "pending":  # it answered, or it finished
                raise HTTPException(409, f"{exc}; start a new session for a follow-up") from exc
            # Starting: no lead record yet, so its lead has not read its inbox either.
            posted = await ctx.bus.inboxes.send(envelope)
    return _json(Posted(id=posted), 202)


async def decide(request: Request) -> Response:
    ctx = ServerContext.of(request)
    session = ctx.session_id(request)
    call_id = str(request.path_params["call_id"])
    body = await read_model(request, Decision, ctx.config.max_body_bytes)
    await refuse_other_keys(ctx, session)
    try:
        with _refused_input():  # the answer is built from the call id and reason given
            agent = await answer_approval(ctx.bus, session, call_id, body.approved, body.reason)
    except ApprovalNotFound as exc:
        status = 409 if exc.decided else 404
        raise HTTPException(status, str(exc)) from exc
    return _json(Decided(call_id=call_id, approved=body.approved, agent=agent))


async def cancel(request: Request) -> Response:
    ctx = ServerContext.of(request)
    session = ctx.session_id(request)
    if not ctx.host.cancel(session):
        raise HTTPException(404, f"session {session!r} does not run in this server (or ended)")
    return _json(Cancelled(id=session), 202)


async def get_profiles(request: Request) -> Response:
    ctx = ServerContext.of(request)
    infos = [ProfileInfo(name=p.name, description=p.description)
             for p in ctx.host.profiles.values()]  # fmt: skip
    return _json(Profiles(profiles=infos))
