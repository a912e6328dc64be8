"""Scripted models: the scripted OpenAI-compatible server mounted in-process, reached through the
real ``openai`` client. The offline responder answers whatever a test did not script, so a
scenario spells out only the replies that matter to it."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from baton.llm import IN_PROCESS_URL, ModelSettings, OpenAIChatModel, ScriptedServer
from baton.llm.offline import offline_reply
from baton.llm.script import Call, Reply, Script, ScriptItem


def scripted(
    items: Iterable[ScriptItem] = (),
    *,
    fallback: bool = True,
    name: str = "scripted",
    max_retries: int = 0,
) -> tuple[ScriptedServer, OpenAIChatModel]:
    """A scripted server (falling back to the offline answers) and a model client on it; the
    server records every request (``server.requests``) for the test to assert on. The client
    retries ``max_retries`` times, with tiny backoff."""
    server = ScriptedServer(list(items), responder=offline_reply if fallback else None, record=True)
    return server, _client(server, name, max_retries)


def _client(server: ScriptedServer, name: str, max_retries: int) -> OpenAIChatModel:
    """A model client on ``server`` in-process, retrying ``max_retries`` times with tiny backoff."""
    settings = ModelSettings(
        model=name,
        base_url=IN_PROCESS_URL,
        api_key="sk-test",
        max_retries=max_retries,
        backoff_initial=0.001,
        backoff_max=0.005,
    )
    return OpenAIChatModel(settings, http_client=server.http_client())


def call(name: str, call_id: str = "c1", **arguments: Any) -> Reply:
    """A reply that calls one tool with ``arguments``."""
    return Reply(calls=[Call(name, json.dumps(arguments), id=call_id)])


def llama_like(
    items: Iterable[ScriptItem] = (),
    *,
    fallback: bool = True,
    name: str = "scripted",
    max_retries: int = 2,
) -> tuple[ScriptedServer, OpenAIChatModel]:
    """Like :func:`scripted`, but as strict about tool calls as llama-server: a reply calling a
    tool the request did not offer is rejected with its parse error (HTTP 500, or the leading text
    then an error event), and the client retries (with tiny backoff) as it would for real."""
    script = Script(list(items), offline_reply if fallback else None, strict_tools=True)
    server = ScriptedServer(script, record=True)
    return server, _client(server, name, max_retries)


def fenced_call(name: str, fence: str = "json", **arguments: Any) -> Reply:
    """A reply that writes a tool call as text in a code fence, as small models do."""
    call = json.dumps({"name": name, "arguments": arguments})
    return Reply(text=(f"```{fence}\n", call, "\n```"))
