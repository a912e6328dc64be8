"""What ``baton run`` is told about the model reaches every request, as the server sees it: the
lead's and every sub-agent's, with each profile's own overrides — another endpoint and key
included — through the real ``openai`` client against scripted servers on loopback."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from baton.llm import ScriptedServer
from baton.llm.offline import offline_reply
from baton.llm.scripted import RecordedRequest
from tests.cli.helpers import BATON, REPO

PROFILES = """
[profiles.painter]
description = "Paints pictures from a description and returns the image URLs."
system_prompt = "[baton:subagent] Paint the task with generate_image, then report."
tools = ["generate_image"]

[profiles.painter.model]
temperature = 0.9
max_tokens = 99
extra_body = {{ top_k = 5 }}

[profiles.writer]
description = "Writes short texts."
system_prompt = "[baton:subagent] Write the task with summarise, then report."
tools = ["summarise"]
tool_choice = "auto"

[profiles.writer.model]
name = "writer-model"
base_url = "{writer_url}"
api_key_env = "WRITER_KEY"
"""


def role(request: RecordedRequest) -> str:
    system = str(request.messages[0]["content"])
    for name, marker in (("painter", "Paint the task"), ("writer", "Write the task")):
        if marker in system:
            return name
    return "lead"


def by_role(server: ScriptedServer) -> dict[str, list[RecordedRequest]]:
    """The chat requests by the agent that made them (the painter's pictures go to the Images
    API of the same endpoint: those are not chat requests)."""
    found: dict[str, list[RecordedRequest]] = {}
    for request in server.requests:
        if request.path.endswith("/chat/completions"):
            found.setdefault(role(request), []).append(request)
    return found


@pytest.mark.process
async def test_settings_reach_the_lead_and_each_profile_gets_its_overrides(
    tmp_path: Path, env: dict[str, str]
) -> None:
    session_server = ScriptedServer(responder=offline_reply, record=True)
    writer_server = ScriptedServer(responder=offline_reply, record=True)
    async with session_server.serve() as session_http, writer_server.serve() as writer_http:
        profiles = tmp_path / "profiles.toml"
        profiles.write_text(PROFILES.format(writer_url=writer_http.base_url))
        run_env = {
            **env,
            "PYTHONPATH": str(REPO),
            "OPENAI_API_KEY": "sk-session",
            "OPENAI_BASE_URL": session_http.base_url,
            "BATON_MODEL": "session-model",
            "BATON_TEMPERATURE": "0.3",
            "WRITER_KEY": "sk-writer",
        }
        done = await anyio.run_process(
            [BATON, "run", "--json", "--profiles", str(profiles), "--max-tokens", "256",
             "--tool-choice", "required", "--no-parallel-tool-calls",
             "--extra-body", '{"cache_prompt": true}', "--timeout", "60",
             "paint a fox and write a haiku"],
            env=run_env, check=False,
        )  # fmt: skip
    err = done.stderr.decode()
    assert done.returncode == 0, err
    finished = json.loads(done.stdout.decode().splitlines()[-1])
    assert finished["type"] == "session.finished" and finished["status"] == "completed"

    mine = by_role(session_server)
    assert set(mine) == {"lead", "painter"}, "the writer's requests went to the session's server"
    for request in mine["lead"]:
        body = request.body
        assert body["model"] == "session-model"
        assert (body["temperature"], body["max_tokens"]) == (0.3, 256)
        assert body["tool_choice"] == "required" and body["parallel_tool_calls"] is False
        assert body["cache_prompt"] is True
        assert request.headers["authorization"] == "Bearer sk-session"
    for request in mine["painter"]:
        body = request.body
        assert body["model"] == "session-model"
        assert (body["temperature"], body["max_tokens"]) == (0.9, 99)  # the profile's
        assert body["tool_choice"] == "required"  # a sub-agent's default
        assert (body["cache_prompt"], body["top_k"]) == (True, 5)  # merged over the session's

    theirs = by_role(writer_server)
    assert set(theirs) == {"writer"} and theirs["writer"]
    for request in theirs["writer"]:
        body = request.body
        assert body["model"] == "writer-model"
        assert body["tool_choice"] == "auto"  # as its profile says
        assert (body["temperature"], body["max_tokens"]) == (0.3, 256)  # the session's
        assert request.headers["authorization"] == "Bearer sk-writer"  # never the session's key
