"""A remote A2A agent as a sub-agent: each inbox round relayed to it, its events mapped back.

The worker runs the ordinary inbox loop (:mod:`baton.subagents.loop`) for the agent — its inbox,
checkpoints, shutdown, one final result — and each round, instead of the model loop, a
:class:`RemoteTurn`::

    send the batch as one A2A message (SendStreamingMessage), in the remote context of the agent's
        earlier rounds (checkpointed with its memory), with the W3C traceparent of its span
    for each event (a2a_events.Exchange):
        WORKING with a message -> a progress report to the lead
        INPUT_REQUIRED -> the question, asked as an approval (baton approve, the live view, the
            page answer it); approved -> its reason (or "yes") is the next message, same task;
            declined, no answer, one question too many -> CancelTask, and an error result
            (fail closed)
        COMPLETED / a message -> the result: its text, and its url parts as media URLs
        FAILED, REJECTED, ... -> an error result quoting the remote
    a stream that ends early, or breaks off, while its task is open is subscribed to again (at
        most ``connect_retries`` times); a request that cannot connect is retried (as often, with
        backoff); nothing is ever sent twice, since the remote may have acted
    the turn cancelled (a shutdown, the session's cancel, a stopping worker) -> CancelTask, the
        stream closed; cancelled before the remote's first event named the task, that event is
        still awaited a moment (``NAMING_S``), so the cancel can name it

Every fault of the remote (unreachable, a timeout, a protocol error) ends the round as an error
result the lead reads, never as a failure of the worker. One :class:`RemoteAgent` per profile and
worker holds the HTTP client and the card (fetched once per process: :mod:`.a2a_card`).
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import aclosing
from typing import Any, cast

import anyio
import httpx
from a2a.client import Client, ClientCallContext, ClientConfig, ClientFactory
from a2a.helpers import new_data_part
from a2a.types import (
    AgentCard,
    CancelTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    TaskState,
)
from a2a.utils.constants import TransportProtocol
from tenacity import (
    AsyncRetrying,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential_jitter,
)

from baton.bus.events import ApprovalDecided, ToolCallInfo
from baton.bus.messages import Envelope, TraceContext
from baton.engine import AgentTurn, ApprovalDecision, ApprovalQuestion, StopReason, TurnResult
from baton.engine.channels import approval_requested, new_question_id
from baton.engine.telemetry import current_trace
from baton.llm.errors import ModelError
from baton.llm.types import Message as ChatMessage
from baton.media.store import extension_for
from baton.subagents.a2a_card import agent_card, http_client
from baton.subagents.a2a_config import A2AConfig
from baton.subagents.a2a_events import Exchange, Step
from baton.subagents.loop import RemoteRound
from baton.subagents.stopping import shielded

log = logging.getLogger(__name__)

CANCEL_S = 10.0
"""How long telling the remote to cancel may take (shielded: a stopping worker still tells it,
until its stop deadline)."""
NAMING_S = 5.0
"""How long a turn cancelled after its message went out still waits for the remote's first event:
it names the task the message started, and only a named task can be cancelled there."""
QUESTION_TOOL = "remote_question"
"""The name an approval of a remote agent's question shows (``baton approve`` lists it)."""
MEMORY_KEY = "a2a"
"""Where the agent's memory keeps the remote ids (``contextId``, and ``taskId`` while open)."""


class RemoteAgentError(ModelError):
    """The remote agent could not give a result: its words, or what went wrong reaching it."""


class _Streamed(Exception):
    """A stream broke after events arrived: its message is never sent again (the remote has
    it); while its task is open, the task is subscribed to instead."""


class RemoteAgent:
    """One profile's remote agent, as one worker reaches it: an HTTP client (its headers and
    token) and an SDK client made from its card, both made on the first agent and closed with
    the worker."""

    def __init__(self, profile: str, config: A2AConfig) -> None:
        self.profile = profile
        self.config = config
        self._http: httpx.AsyncClient | None = None
        self._client: Client | None = None
        self._lock = anyio.Lock()

    async def client(self, headers: Mapping[str, str]) -> Client:
        """The SDK client, made from the card on first use (retried while it cannot connect)."""
        async with self._lock:
            if self._client is None:
                http = self._http or http_client(self.config)
                self._http = http

                async def fetch() -> AgentCard:
                    return await agent_card(http, self.config, headers)

                card = await self._retrying(fetch)
                config = ClientConfig(
                    streaming=True,
                    httpx_client=http,
                    supported_protocol_bindings=[
                        TransportProtocol.JSONRPC,
                        TransportProtocol.HTTP_JSON,
                    ],
                )
                self._client = ClientFactory(config).create(card)
            return self._client

    async def _retrying(self, attempt: Callable[[], Awaitable[Any]]) -> Any:
        """``attempt`` (an async function), tried again while it cannot connect (nothing
        reached the remote)."""
        retrying = AsyncRetrying(
            stop=stop_after_attempt(self.config.connect_retries + 1),
            wait=wait_exponential_jitter(multiplier=0.2, max=2.0, jitter=0.1),
            retry=retry_if_exception(_not_connected),
            sleep=anyio.sleep,
            reraise=True,
        )
        return await retrying(attempt)

    async def aclose(self) -> None:
        client, http, self._client, self._http = self._client, self._http, None, None
        if client is not None:
            await client.close()
        if http is not None:
            await http.aclose()

    def turn(self, round: RemoteRound) -> RemoteTurn:
        return RemoteTurn(self, round)


class RemoteTurn:
    """One round of a remote agent (a :class:`~baton.subagents.loop.TurnRunner`)."""

    def __init__(self, remote: RemoteAgent, round: RemoteRound) -> None:
        self.remote = remote
        self.round = round
        self.trace: TraceContext | None = round.trace
        self._headers: dict[str, str] = {}
        self._naming: anyio.CancelScope | None = None
        """While a message that starts a task waits for its first event: that wait's scope."""

    def new_turn(self) -> AgentTurn:
        return AgentTurn(self.round.limits, on_cancel=self._on_cancel)

    def _on_cancel(self) -> None:
        """The turn is cancelled: release a pending question, and give a message the remote has
        not answered yet at most ``NAMING_S`` more for the event that names its task."""
        self.round.channel.cancel_pending()
        naming = self._naming
        if naming is not None:
            naming.deadline = min(naming.deadline, anyio.current_time() + NAMING_S)
            log.info("%s/%s: cancelled before %s named its task: waiting up to %g s for it",
                     self.round.session, self.round.agent, self.remote.config.shown_url,
                     NAMING_S)  # fmt: skip

    async def run_turn(self, memory: list[ChatMessage], *, turn: AgentTurn) -> TurnResult:
        r = self.round
        context_id, task_id = _remembered(memory)
        exchange = Exchange(context_id=context_id, task_id=task_id)
        stop, error = StopReason.ERROR, ""
        client: Client | None = None
        with r.telemetry.agent_span(
            r.agent, f"a2a {self.remote.profile}", r.session, parent=r.trace
        ) as span:
            self.trace = self.trace or span.trace()
            self._headers = _trace_headers(current_trace() or r.trace)
            with turn.scope:
                try:
                    client = await self.remote.client(self._headers)
                    stop, error = await self._relay(client, exchange, _request(exchange, r.batch))
                except Exception as exc:  # the remote's fault, whatever it is: the lead reads it
                    config = self.remote.config
                    log.warning("%s/%s: remote A2A agent %s: %s", r.session, r.agent,
                                config.shown_url, config.redacted(_why(exc)))  # fmt: skip
                    stop, error = StopReason.ERROR, self._unreachable(exc)
            if turn.cancelled:
                stop, error = StopReason.CANCELLED, ""
            if client is not None and (turn.cancelled or stop is StopReason.ERROR):
                await self._cancel(client, exchange)
            if error:
                span.fail(RemoteAgentError.__name__)
        media = [*exchange.media, *await self._store(exchange)]
        text = exchange.text if stop is StopReason.ANSWERED else ""
        remembered = {"context_id": exchange.context_id, "task_id": exchange.open_task}
        reply: dict[str, Any] = {"role": "assistant", "content": text or error or "(cancelled)"}
        memory.append(cast(ChatMessage, {**reply, MEMORY_KEY: remembered}))
        return TurnResult(
            text=text,
            media_urls=tuple(dict.fromkeys(media)),
            stop=stop,
            terminal_call=None,
            messages=memory,
            rounds=0,
            error=RemoteAgentError(error) if error else None,
        )

    # -- the exchange ---------------------------------------------------------------------------

    async def _relay(
        self, client: Client, exchange: Exchange, request: SendMessageRequest
    ) -> tuple[StopReason, str]:
        """Messages and their streams until the remote ends the task (or asks in vain)."""
        context = ClientCallContext(service_parameters=self._headers)
        retries_left = self.remote.config.connect_retries
        questions_left = self.round.limits.hard_max_rounds  # an auto-approving session says yes
        events = self._sending(client, request, context)
        while True:
            try:
                step = await self._follow(events, exchange)
            except _Streamed as broken:  # the remote has the message: follow its task instead
                if not exchange.open_task or retries_left <= 0:
                    raise
                log.info("%s/%s: the stream of %s broke off (%s): subscribing to task %s",
                         self.round.session, self.round.agent, self.remote.config.shown_url,
                         self.remote.config.redacted(str(broken)),
                         exchange.open_task)  # fmt: skip
                step = None
            if step is Step.DONE:
                return StopReason.ANSWERED, ""
            if step is Step.FAILED:
                return StopReason.ERROR, exchange.error
            if step is Step.ASK:
                if questions_left <= 0:
                    return StopReason.ERROR, (
                        f"the remote agent asked {exchange.question!r} after "
                        f"{self.round.limits.hard_max_rounds} questions this round, the most a "
                        "round allows: its task was cancelled"
                    )
                questions_left -= 1
                answer = await self._ask(exchange.question)
                if answer is None:
                    return StopReason.ERROR, (
                        f"the remote agent asked {exchange.question!r}, and nobody said yes: "
                        "its task was cancelled"
                    )
                events = self._sending(client, _answer(exchange, answer), context)
                continue
            if not exchange.open_task or retries_left <= 0:
                state = TaskState.Name(exchange.state).removeprefix("TASK_STATE_")
                return StopReason.ERROR, f"the remote agent's stream ended in state {state}"
            retries_left -= 1  # its stream ended early or broke: read the task's events again
            events = self._subscribing(client, exchange.open_task, context)

    def _subscribing(
        self, client: Client, task: str, context: ClientCallContext
    ) -> Callable[[], AsyncIterator[StreamResponse]]:
        return lambda: client.subscribe(SubscribeToTaskRequest(id=task), context=context)

    def _sending(
        self, client: Client, request: SendMessageRequest, context: ClientCallContext
    ) -> Callable[[], AsyncIterator[StreamResponse]]:
        return lambda: client.send_message(request, context=context)

    async def _follow(
        self, events: Callable[[], AsyncIterator[StreamResponse]], exchange: Exchange
    ) -> Step | None:
        """Fold one stream's events until a step ends it (None: the stream ended first).
        Connecting is retried; a stream that broke after its first event is not."""

        async def attempt() -> Step | None:
            seen = 0
            naming = not exchange.open_task  # a message that starts a task, which it names
            try:
                async with aclosing(events()) as stream:  # type: ignore[type-var]
                    responses = aiter(stream)
                    while True:
                        if naming and not seen:
                            response = await self._first(responses)
                        else:
                            response = await anext(responses, None)
                        if response is None:
                            break
                        seen += 1
                        step = exchange.fold(response)
                        if step is Step.PROGRESS:
                            await self.round.report(exchange.progress)
                        elif step is not Step.GO_ON:
                            return step
            except Exception as exc:
                if seen:  # the remote has the message: never send it again
                    raise _Streamed(_why(exc)) from exc
                raise
            return None

        with anyio.fail_after(self.remote.config.timeout_s):
            step: Step | None = await self.remote._retrying(attempt)
            return step

    async def _first(self, responses: AsyncIterator[StreamResponse]) -> StreamResponse | None:
        """The first event of a message that starts a task. The remote may act on the message
        before it says so, and only that event names the task a cancel must name: so a cancel
        landing meanwhile (the turn's, a stopping worker's) lets it come for at most ``NAMING_S``
        more (:meth:`_on_cancel`) before it takes effect. Bounded by the exchange's timeout and
        cut with the worker's other shielded steps."""
        deadline = anyio.current_effective_deadline()
        if deadline <= anyio.current_time():  # cancelled or out of time before sending
            await anyio.lowlevel.checkpoint()
        with shielded() as naming:
            naming.deadline = deadline
            self._naming = naming
            try:
                return await anext(responses, None)
            finally:
                self._naming = None
        # Not named in time: the pending cancel or timeout takes effect here, else it was a cut.
        await anyio.lowlevel.checkpoint()
        raise TimeoutError

    async def _ask(self, question: str) -> str | None:
        """The remote's question, asked as an approval of ``remote_question``: the answer to send
        (the reason given, else "yes"), or None when declined or unanswered (fail closed)."""
        r = self.round
        arguments = json.dumps({"question": question, "agent": self.remote.config.shown_url})
        call = ToolCallInfo(call_id=new_question_id(), name=QUESTION_TOOL, arguments=arguments)
        asked = ApprovalQuestion(
            id=new_question_id(), session=r.session, agent=r.agent, calls=(call,)
        )
        await r.emit(
            approval_requested(
                r.session, r.agent, [call], wait_s=r.limits.approval_wait_s, channel=r.channel
            )
        )
        decision = ApprovalDecision(approved=False, reason="no answer")
        try:
            with anyio.fail_after(r.limits.approval_wait_s):
                decisions = await r.channel.ask_approval(asked)
            decision = decisions.get(call.call_id, decision)
        except TimeoutError:
            decision = ApprovalDecision(approved=False, reason="no answer in time")
        except Exception as exc:  # fail closed on any channel fault; cancellation propagates
            decision = ApprovalDecision(approved=False, reason=f"the question failed: {exc}")
        r.telemetry.hitl_decision(
            "approved" if decision.approved else "declined", side="a2a", source="a2a"
        )
        await r.emit(
            ApprovalDecided(
                session=r.session,
                agent=r.agent,
                call_id=call.call_id,
                approved=decision.approved,
                reason=decision.reason,
                policy=decision.policy,
            )
        )
        if not decision.approved:
            return None
        return decision.reason if decision.reason and decision.policy is None else "yes"

    async def _cancel(self, client: Client, exchange: Exchange) -> None:
        """Tell the remote to cancel its open task (shielded and bounded; a remote that does not
        answer only costs the wait)."""
        task = exchange.open_task
        if not task:
            return
        context = ClientCallContext(service_parameters=self._headers, timeout=CANCEL_S)
        with shielded(CANCEL_S):  # a stopping worker's cut still ends it on time
            try:
                await client.cancel_task(CancelTaskRequest(id=task), context=context)
                log.info("cancelled task %s of %s", task, self.remote.config.shown_url)
            except Exception as exc:  # it may have ended meanwhile: nothing left to cancel
                config = self.remote.config
                log.info("cancelling task %s of %s: %s", task, config.shown_url,
                         config.redacted(_why(exc)))  # fmt: skip
        exchange.task_id = ""

    async def _store(self, exchange: Exchange) -> list[str]:
        """URLs for the media the remote sent inline (``raw`` parts), from the media store."""
        urls = []
        for raw in exchange.raw:
            content_type = raw.media_type or "application/octet-stream"
            name = f"{self.round.session}/{self.round.agent}-a2a-{uuid.uuid4().hex[:16]}"
            try:
                stored = await self.round.media.put(
                    raw.data, name + extension_for(content_type), content_type
                )
                urls.append(stored)
            except Exception as exc:  # a media store fault costs that picture, not the result
                log.warning("cannot store %s from %s: %s",
                            raw.name, self.remote.config.shown_url, exc)  # fmt: skip
        return urls

    def _unreachable(self, exc: Exception) -> str:
        """What the lead reads of a remote that failed: the URL and the error, both redacted."""
        return self.remote.config.redacted(self._failure(exc))

    def _failure(self, exc: Exception) -> str:
        url = self.remote.config.shown_url
        if isinstance(exc, TimeoutError):
            limit = self.remote.config.timeout_s
            return f"the remote A2A agent at {url} did not finish within {limit:g} s"
        if isinstance(exc, _Streamed):
            return f"the remote A2A agent at {url} broke off its stream: {exc}"
        if _not_connected(exc):
            return f"the remote A2A agent at {url} could not be reached: {_why(exc)}"
        return f"the remote A2A agent at {url} failed: {_why(exc)}"


def _request(
    exchange: Exchange, batch: Sequence[Envelope] = (), text: str = ""
) -> SendMessageRequest:
    """The next message: the batch's contents and media URLs (or ``text``), in the remote
    context so far; it continues the open task, else refers to the last one."""
    parts: list[Part] = []
    for envelope in batch:
        if envelope.content:
            parts.append(Part(text=envelope.content))
        parts.extend(Part(url=url) for url in envelope.media_urls)
    if text or not parts:
        parts.append(Part(text=text or "(no content)"))
    message = Message(
        message_id=uuid.uuid4().hex,
        role=Role.ROLE_USER,
        parts=parts,
        context_id=exchange.context_id,
        task_id=exchange.open_task,
    )
    if exchange.task_id and not exchange.open_task:
        message.reference_task_ids.append(exchange.task_id)
    return SendMessageRequest(message=message)


def _answer(exchange: Exchange, text: str) -> SendMessageRequest:
    """A person's yes to the remote's question, to the task that asked: the text for an agent
    that asked for words, and ``{"approved": true}`` for one that asked for a verdict (another
    ``baton serve``: docs/a2a.md)."""
    request = _request(exchange, text=text)
    verdict = {"approved": True, "reason": text if text != "yes" else ""}
    request.message.parts.append(new_data_part(verdict, "application/json"))
    return request


def _remembered(memory: list[ChatMessage]) -> tuple[str, str]:
    """The remote context and open task the agent's earlier rounds left in its memory (empty:
    a new context)."""
    for message in reversed(memory):
        found = cast(Mapping[str, Any], message).get(MEMORY_KEY)
        if isinstance(found, Mapping):
            return str(found.get("context_id") or ""), str(found.get("task_id") or "")
    return "", ""


def _trace_headers(trace: TraceContext | None) -> dict[str, str]:
    if trace is None:
        return {}
    headers = {"traceparent": trace.traceparent}
    if trace.tracestate:
        headers["tracestate"] = trace.tracestate
    return headers


def _not_connected(exc: BaseException) -> bool:
    """Whether the request never reached the remote (the SDK wraps httpx's error)."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, httpx.ConnectError | httpx.ConnectTimeout):
            return True
        if isinstance(seen, _Streamed):
            return False
        seen = seen.__cause__ or seen.__context__
    return False


def _why(exc: BaseException) -> str:
    text = " ".join(f"{type(exc).__name__}: {exc}".split())
    return text if len(text) <= 300 else f"{text[:297]}..."
