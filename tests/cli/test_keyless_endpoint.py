"""Issue 22: a base URL without an API key is a keyless server (llama.cpp, vLLM, Ollama), not the
offline model.

``--base-url`` (or ``OPENAI_BASE_URL``) without ``OPENAI_API_KEY`` used to run the offline model
silently, exit 0: the endpoint was never asked. Now the requests go there without an
``Authorization`` header (no placeholder key to invent), and the header of ``baton run`` says
which model at which endpoint answers, and that no key is sent. In-process: ``baton run`` through
typer's runner, the scripted server on loopback (served from a thread's event loop, since the
command runs its own), its recorded headers read.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from anyio.from_thread import start_blocking_portal
from typer.testing import CliRunner

from baton.cli.app import app
from baton.llm import ScriptedServer
from baton.llm.offline import offline_reply
from baton.settings import load_settings, model_label, model_settings
from tests.cli.helpers import processes


@contextmanager
def scripted_endpoint(server: ScriptedServer) -> Iterator[str]:
    """``server`` on loopback, served by an event loop in another thread; its base URL."""
    with (
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(server.serve()) as http,
    ):
        yield http.base_url


def test_a_base_url_without_a_key_asks_that_server_with_no_authorization() -> None:
    server = ScriptedServer(responder=offline_reply, record=True)
    with scripted_endpoint(server) as base_url:
        result = CliRunner().invoke(
            app,
            ["run", "--base-url", base_url, "--model", "local-llama", "--timeout", "60",
             "write a haiku about the sea"],
        )  # fmt: skip
    assert result.exit_code == 0, result.output
    chats = [r for r in server.requests if r.path.endswith("/chat/completions")]
    assert chats, "the endpoint was never asked: the offline model answered instead"
    for request in chats:
        assert "authorization" not in request.headers, request.headers
        assert request.body["model"] == "local-llama"
    header = result.stdout.splitlines()[0]
    assert f"(local-llama at {base_url} (no API key))" in header, header


def test_with_a_key_the_key_is_sent_and_the_header_names_the_endpoint() -> None:
    server = ScriptedServer(responder=offline_reply, record=True)
    with scripted_endpoint(server) as base_url:
        result = CliRunner().invoke(
            app,
            ["run", "--base-url", base_url, "--model", "m", "--timeout", "60", "write a haiku"],
            env={"OPENAI_API_KEY": "sk-local"},
        )
    assert result.exit_code == 0, result.output
    chats = [r for r in server.requests if r.path.endswith("/chat/completions")]
    assert chats and all(r.headers.get("authorization") == "Bearer sk-local" for r in chats)
    header = result.stdout.splitlines()[0]
    assert f"(m at {base_url})" in header and "no API key" not in header, header


@pytest.mark.parametrize(
    ("env", "offline", "label"),
    [
        ({}, True, "offline model"),
        ({"OPENAI_BASE_URL": "http://127.0.0.1:8080/v1"}, False,
         "m at http://127.0.0.1:8080/v1 (no API key)"),
        ({"OPENAI_BASE_URL": "http://u:pw@127.0.0.1:8080/v1"}, False,
         "m at http://u:***@127.0.0.1:8080/v1 (no API key)"),
        ({"OPENAI_API_KEY": "sk-x"}, False, "m at https://api.openai.com/v1"),
        ({"OPENAI_API_KEY": "sk-x", "OPENAI_BASE_URL": "http://h/v1"}, False, "m at http://h/v1"),
    ],
)  # fmt: skip
def test_the_model_settings_and_their_label(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], offline: bool, label: str
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    settings = load_settings(model="m")
    assert settings.offline is offline
    assert model_label(settings) == label
    model = model_settings(settings)
    assert (model is None) is offline
    if model is not None:
        assert (model.api_key is None) is ("OPENAI_API_KEY" not in env)


@pytest.mark.parametrize(
    ("extra", "label"),
    [
        ({"OPENAI_BASE_URL": "http://u:pw@127.0.0.1:9/v1"},
         "· local-llama at http://u:***@127.0.0.1:9/v1 (no API key)"),
        ({"OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "OPENAI_API_KEY": "sk-x"},
         "· local-llama at http://127.0.0.1:9/v1"),
        ({}, "· offline model"),
    ],
)  # fmt: skip
@pytest.mark.process
def test_baton_serve_s_start_line_names_the_endpoint_as_baton_run_does(
    env: dict[str, str], extra: dict[str, str], label: str
) -> None:
    """A real process: the start line is what ``baton serve`` prints on stderr once it listens."""
    with processes() as start:
        serve = start("serve", "--port", "0", env={**env, "BATON_MODEL": "local-llama", **extra})
        line = serve.expect("baton serve: http", stream="err")
    assert line.rstrip().endswith(label), line
    assert ":pw@" not in line
