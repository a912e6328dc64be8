"""How well whole sessions go against a real OpenAI-compatible model server (too slow for CI).

Runs N sessions, one after another, over varied delegation prompts that each ask for pictures (the
built-in demo profiles: painter, writer, helper), and prints one JSON object:

- ``sessions``; ``statuses``: how many ended in each status;
- ``completed_with_media``: completed with at least one sub-agent picture;
- ``final_cites_all_media``: completed, with a picture, and the model's own final answer cites
  *every* media URL the sub-agents produced, exactly (before baton appends what it left out);
- ``media_appended``: sessions whose answer baton completed with the media URLs it left out;
- ``final_answer_has_all_media``: completed, and the session's final answer (appended list
  included) carries every media URL;
- ``composed_answers``: sessions whose lead gave no final answer, so baton composed it from the
  sub-agents' reports (``completed`` only when every sub-agent delivered);
- ``invented_urls``: URLs in final answers that no tool produced (summed over the sessions);
- ``exit0_without_result``: sessions that would exit 0 although no sub-agent delivered a picture;
- ``median_s`` (and ``max_s``): wall time per session;
- ``requests``: HTTP requests the server got; ``model_calls``: completions asked by baton;
  ``retries``: ``model.retried`` events (the client's own retries, as baton reports them) and
  ``hidden_retries``: requests beyond model calls that no event reported;
- ``guard_fires``: ``guard.fired`` events by outcome; ``tokens``: total tokens from usage;
- ``over_budget``: sessions whose token spend passed ``--max-session-tokens`` (when given).

Run it against the recipe in ``../shared/real-model/`` (too slow for CI)::

    .venv/bin/python benchmarks/real_model.py \
        http://127.0.0.1:18080/v1 qwen2.5-coder-1.5b --sessions 10

``--smoke`` runs two sessions with the built-in offline model instead (what CI does, so the
benchmark cannot rot). Per-session records go to stderr as JSON lines with ``--verbose``.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx2

PROMPTS = (
    "Paint a fox sleeping in the snow.",
    "Paint a heron standing in a river, and a cat on a windowsill.",
    "Paint a lighthouse at night and write a two-line poem about it.",
    "I need a picture of a red bicycle leaning against a wall.",
    "Make three pictures: a fox, a heron and a cat.",
    "Draw an old sailing ship in a storm, then tell me one fact about sailing ships.",
    "Create an image of a mountain lake at sunrise.",
    "Please paint a bowl of oranges on a wooden table and describe the painting in one sentence.",
    "Paint two pictures: a city street in the rain and a desert at noon.",
    "Can you get me a picture of a hot air balloon over green hills?",
)
URL = re.compile(r"(?:https?|file)://[^\s)\]>\"'`]+")


@dataclass
class Counts:
    """What the model wrappers and the transport saw, summed over one session."""

    requests: int = 0
    calls: int = 0
    tokens: int = 0


class CountingTransport(httpx2.AsyncBaseTransport):
    """Counts every HTTP request the model clients make (retries included)."""

    def __init__(self, counts: Counts) -> None:
        self._inner = httpx2.AsyncHTTPTransport()
        self._counts = counts

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        self._counts.requests += 1
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self._inner.aclose()


class CountingModel:
    """A ChatModel that counts completions and tokens, forwarding everything else as given (so
    it works with whichever ``complete`` keywords the installed baton has)."""

    def __init__(self, inner: Any, counts: Counts) -> None:
        self._inner = inner
        self._counts = counts

    @property
    def model(self) -> str:
        return str(self._inner.model)

    async def complete(self, messages: Any, tools: Any = (), **options: Any) -> Any:
        self._counts.calls += 1
        reply = await self._inner.complete(messages, tools, **options)
        if reply.usage is not None:
            self._counts.tokens += reply.usage.total_tokens
        return reply

    async def aclose(self) -> None:
        await self._inner.aclose()


@dataclass
class SessionRecord:
    prompt: str
    status: str
    seconds: float
    answer: str
    media: list[str]
    requests: int
    calls: int
    tokens: int
    retries: int
    guards: dict[str, int]
    spawned: int
    finished_agents: int
    invented: list[str] = field(default_factory=list)
    agents: dict[str, str] = field(default_factory=dict)
    """Each sub-agent started: its profile and how it exited ("painter: finished")."""
    routed: int = 0
    """``route`` calls of the lead (a request it evaded, routed to a profile)."""
    error: str = ""
    """Why the session did not complete, as its result says."""
    composed: bool = False
    """The lead gave no final answer: baton composed it from the sub-agents' reports."""
    appended: list[str] | None = None
    """Media URLs the model's answer left out and baton appended (``answer.checked``); None when
    this baton does not check answers."""

    @property
    def has_all_media(self) -> bool:
        """Whether the final answer (baton's appended list included) carries every media URL:
        from the whole answer here, and kept in the per-session record, whose answer is cut."""
        return all(url in self.answer for url in self.media)

    @property
    def cites_all(self) -> bool:
        """Whether the model's own answer cited every media URL (not baton's appended list)."""
        if not self.media:
            return False
        if self.appended is not None:
            return not self.appended
        return all(url in self.answer for url in self.media)


def model_settings(base_url: str, model: str, options: Mapping[str, Any]) -> Any:
    """ModelSettings with every option this baton's ModelSettings knows (older ones know fewer)."""
    from pydantic import SecretStr

    from baton.llm import ModelSettings

    known = ModelSettings.model_fields
    extra = {key: value for key, value in options.items() if key in known and value is not None}
    return ModelSettings(model=model, base_url=base_url, api_key=SecretStr("local"), **extra)


@dataclass
class Seen:
    """What one session's events showed, counted as they arrive."""

    guards: Counter[str] = field(default_factory=Counter)
    retries: int = 0
    spawned: int = 0
    finished_agents: int = 0
    tool_urls: set[str] = field(default_factory=set)
    appended: list[str] | None = None
    agents: dict[str, str] = field(default_factory=dict)
    routed: int = 0
    composed: bool = False

    def see(self, event: Any) -> None:
        from baton.bus.events import (
            AgentExited,
            AgentResult,
            AgentSpawned,
            GuardFired,
            ToolCalled,
            ToolResulted,
        )

        if isinstance(event, GuardFired):
            self.guards[event.outcome] += 1
        elif event.type == "model.retried":  # an event newer batons have
            self.retries += 1
        elif isinstance(event, AgentSpawned) and not event.worker:
            # One per sub-agent: the lead's (older batons logged a second one, naming the
            # worker that claimed it; newer ones log that as agent.claimed).
            self.spawned += 1
            self.agents[event.agent] = event.profile
        elif isinstance(event, AgentExited):
            self.finished_agents += event.reason == "finished"
            self.agents[event.agent] = f"{self.agents.get(event.agent, '?')}: {event.reason}"
        elif isinstance(event, ToolCalled) and event.call.name == "route":
            self.routed += 1
        elif isinstance(event, ToolResulted):
            self.tool_urls.update(URL.findall(event.result.content))
        elif isinstance(event, AgentResult):
            self.tool_urls.update(event.media_urls)
        elif event.type == "answer.checked":  # an event newer batons have
            self.appended = list(getattr(event, "missing_media", []))
            self.composed = bool(getattr(event, "composed", False))


async def run_one(
    prompt: str, make_model: Any, media_dir: Path, timeout_s: float, config_extra: dict[str, Any]
) -> SessionRecord:
    from baton.session import Session, SessionConfig

    counts = Counts()
    models: dict[str, Any] = {}

    def subagent_models(profile: Any) -> Any:
        name = getattr(profile, "model", None) or "default"
        if name not in models:
            models[name] = CountingModel(make_model(counts), counts)
        return models[name]

    lead = CountingModel(make_model(counts), counts)
    known = SessionConfig.model_fields
    extra = {key: value for key, value in config_extra.items() if key in known}
    config = SessionConfig(task=prompt, media_dir=media_dir, timeout_s=timeout_s, **extra)
    seen = Seen()
    started = time.perf_counter()
    status, answer, media, error = "failed", "", [], ""
    try:
        async with Session(config, model=lead, subagent_models=subagent_models) as session:
            async for event in session.events():
                seen.see(event)
            result = await session.run()
            status, answer, media = result.status, result.answer, list(result.media_urls)
            error = result.error or ""
    finally:
        await lead.aclose()
        for model in models.values():
            await model.aclose()
    seconds = time.perf_counter() - started
    known_urls = seen.tool_urls | set(media) | set(URL.findall(prompt))
    cited = dict.fromkeys(url.rstrip(".,;:") for url in URL.findall(answer))
    invented = [url for url in cited if url not in known_urls]
    return SessionRecord(
        prompt=prompt,
        status=status,
        seconds=round(seconds, 2),
        answer=answer,
        media=media,
        requests=counts.requests,
        calls=counts.calls,
        tokens=counts.tokens,
        retries=seen.retries,
        guards=dict(seen.guards),
        spawned=seen.spawned,
        finished_agents=seen.finished_agents,
        invented=invented,
        agents=seen.agents,
        routed=seen.routed,
        error=error,
        composed=seen.composed,
        appended=seen.appended,
    )


def summarise(records: Sequence[SessionRecord], max_tokens: int | None) -> dict[str, Any]:
    seconds = [r.seconds for r in records]
    guards: Counter[str] = Counter()
    for record in records:
        guards.update(record.guards)
    completed = [r for r in records if r.status == "completed"]
    return {
        "sessions": len(records),
        "statuses": dict(Counter(r.status for r in records)),
        "completed_with_media": sum(1 for r in completed if r.media),
        "final_cites_all_media": sum(1 for r in completed if r.cites_all),
        "media_appended": sum(1 for r in records if r.appended),
        "final_answer_has_all_media": sum(1 for r in completed if r.media and r.has_all_media),
        "composed_answers": sum(1 for r in records if r.composed),
        "invented_urls": sum(len(r.invented) for r in records),
        "exit0_without_result": sum(1 for r in completed if not r.media),
        "median_s": statistics.median(seconds) if seconds else None,
        "max_s": max(seconds) if seconds else None,
        "requests": sum(r.requests for r in records),
        "model_calls": sum(r.calls for r in records),
        "retries": sum(r.retries for r in records),
        "hidden_retries": max(0, sum(r.requests - r.calls - r.retries for r in records)),
        "guard_fires": dict(guards),
        "tokens": sum(r.tokens for r in records),
        "over_budget": sum(1 for r in records if max_tokens and r.tokens > max_tokens),
        "spawned": sum(r.spawned for r in records),
    }


async def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("url", nargs="?", help="the server's /v1 base URL")
    parser.add_argument("model", nargs="?", help="the model name the server answers to")
    parser.add_argument("--sessions", type=int, default=10)
    parser.add_argument("--timeout", type=float, default=420.0, help="per session, seconds")
    parser.add_argument("--max-tokens", type=int, default=None, help="per request")
    parser.add_argument("--request-timeout", type=float, default=None)
    parser.add_argument("--max-session-tokens", type=int, default=None)
    parser.add_argument("--max-model-calls", type=int, default=None)
    parser.add_argument("--set", action="append", default=[], metavar="FIELD=JSON",
                        help="a SessionConfig field, e.g. --set profile_tools=true")  # fmt: skip
    parser.add_argument("--smoke", action="store_true", help="2 sessions, offline model")
    parser.add_argument("--verbose", action="store_true", help="per-session JSON on stderr")
    parser.add_argument("--log", default=None, help="log level of baton's own log on stderr")
    parser.add_argument("--first", type=int, default=0, help="start at this prompt")
    args = parser.parse_args(argv)
    if args.log:
        logging.basicConfig(level=args.log.upper(), format="%(asctime)s %(name)s %(message)s")

    from baton.llm import OpenAIChatModel, offline_model

    config_extra: dict[str, Any] = {}
    for item in args.set:
        key, _, value = item.partition("=")
        config_extra[key] = json.loads(value)
    if args.max_session_tokens or args.max_model_calls:
        config_extra["budget"] = {
            "max_tokens": args.max_session_tokens,
            "max_model_calls": args.max_model_calls,
        }
    if args.smoke:
        sessions = 2

        def make_model(counts: Counts) -> Any:
            return offline_model()

    else:
        if not args.url or not args.model:
            parser.error("give the server URL and the model name (or --smoke)")
        sessions = args.sessions
        options = {"max_tokens": args.max_tokens, "timeout": args.request_timeout}
        settings = model_settings(args.url, args.model, options)

        def make_model(counts: Counts) -> Any:
            return OpenAIChatModel(settings, transport=CountingTransport(counts))

    records = []
    with tempfile.TemporaryDirectory(prefix="baton-real-") as media:
        for index in range(sessions):
            prompt = PROMPTS[(args.first + index) % len(PROMPTS)]
            record = await run_one(prompt, make_model, Path(media), args.timeout, config_extra)
            records.append(record)
            if args.verbose:
                shown = {
                    **record.__dict__,
                    "answer": record.answer[:400],
                    "has_all_media": record.has_all_media,
                }
                print(json.dumps(shown), file=sys.stderr, flush=True)
    print(json.dumps(summarise(records, args.max_session_tokens)))


if __name__ == "__main__":
    anyio.run(main)
