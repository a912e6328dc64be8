"""Scripted models: the scripted OpenAI-compatible server mounted in-process, reached through the
real ``openai`` client. The offline responder answers whatever a test did not script, so a
scenario spells out only the replies that matter to it."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from baton.llm import IN_PROCESS_URL, ModelSettings, OpenAIChatModel, ScriptedServer
from baton.llm.offline import offline_reply
from baton.llm.script import Call, Reply, ScriptItem


def scripted(
    items: Iterable[ScriptItem] = (), *, fallback: bool = True, name: str = "scripted"
) -> tuple[ScriptedServer, OpenAIChatModel]:
    """A scripted server (falling back to the offline answers) and a model client on it."""
    server = ScriptedServer(list(items), responder=offline_reply if fallback else None)
    settings = ModelSettings(model=name, base_url=IN_PROCESS_URL, api_key="sk-test", max_retries=0)
    return server, OpenAIChatModel(settings, http_client=server.http_client())


def call(name: str, call_id: str = "c1", **arguments: Any) -> Reply:
    """A reply that calls one tool with ``arguments``."""
    return Reply(calls=[Call(name, json.dumps(arguments), id=call_id)])
