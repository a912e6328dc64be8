"""Tests cannot reach the outside: the shell's settings never reach a test, and a model request
to anything but the scripted server fails loudly before it is sent."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx2
import pytest

from baton.bus.errors import BatonError, ExitCode
from baton.bus.memory import MemoryBus
from baton.llm import IN_PROCESS_URL, ModelSettings, OpenAIChatModel
from baton.llm.errors import ModelError
from baton.llm.guard import is_local_endpoint, model_requests_confined
from baton.llm.offline import OFFLINE_MODEL_NAME
from baton.llm.types import Message
from baton.settings import load_settings, model_settings
from baton.subagents.models import EnvModels
from baton.subagents.worker import Worker
from baton.testing import ModelRequestRefused
from tests.conftest import SHELL_SETTINGS

ROOT = Path(__file__).resolve().parents[1]
HELLO: list[Message] = [{"role": "user", "content": "hello"}]


async def test_a_model_request_off_this_machine_fails_loudly(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # As `baton run` builds it with a key in the shell: baton.settings (the one reader of the
    # environment) takes the key, and no base URL means OpenAI's own endpoint, api.openai.com.
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-the-shell")
    settings = model_settings(load_settings())
    assert settings is not None and settings.base_url is None
    async with OpenAIChatModel(settings) as model:
        with pytest.raises(ModelRequestRefused, match=r"https://api\.openai\.com/v1"):
            await model.complete(HELLO)


async def test_a_refused_request_is_never_sent() -> None:
    sent: list[httpx2.Request] = []

    def record(request: httpx2.Request) -> httpx2.Response:
        sent.append(request)
        return httpx2.Response(500)

    settings = ModelSettings(model="m", base_url="https://models.example.com/v1", api_key="sk-x")
    transport = httpx2.MockTransport(record)
    async with OpenAIChatModel(settings, transport=transport) as model:
        with pytest.raises(ModelRequestRefused, match=r"models\.example\.com"):
            await model.complete(HELLO)
    assert sent == []  # refused before the transport, and not retried


def test_a_refused_request_is_one_of_baton_s_errors_and_ends_a_command_as_usage() -> None:
    assert issubclass(ModelRequestRefused, BatonError)
    assert not issubclass(ModelRequestRefused, ModelError)  # nothing retries or softens it
    assert ModelRequestRefused("x").exit_code == ExitCode.USAGE


@pytest.mark.parametrize(
    ("url", "local"),
    [
        ("http://127.0.0.1:8080/v1", True),
        ("http://127.3.2.1/v1", True),
        ("http://localhost:11434/v1", True),
        ("http://[::1]:9000/v1", True),
        (IN_PROCESS_URL, True),
        ("https://api.openai.com/v1", False),
        ("http://10.0.0.5:8000/v1", False),
        ("http://localhost.example.com/v1", False),
        ("http://127.0.0.1.nip.io/v1", False),
    ],
)
def test_only_loopback_and_the_in_process_server_count_as_local(url: str, local: bool) -> None:
    assert is_local_endpoint(url) is local


def test_probe_the_environment_a_test_sees() -> None:
    """Run by the test below under a shell full of settings; in the suite, it checks this run."""
    assert [name for name in os.environ if name.startswith(SHELL_SETTINGS)] == []
    assert model_requests_confined()


@pytest.mark.process
def test_the_shell_s_settings_do_not_reach_a_test() -> None:
    shell = {
        "OPENAI_API_KEY": "sk-from-the-shell",
        "OPENAI_BASE_URL": "https://api.openai.com/v1",
        "BATON_MODEL": "gpt-4o",
        "BATON_BUS": "redis://db.example.com:6379/0",
        "REDIS_URL": "redis://db.example.com:6379/0",
    }
    probe = f"{Path(__file__).relative_to(ROOT)}::test_probe_the_environment_a_test_sees"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", probe],
        cwd=ROOT,
        env={**os.environ, **shell},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 passed" in proc.stdout


async def test_a_worker_without_a_model_factory_ignores_the_shell_s_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-the-shell")
    monkeypatch.setenv("OPENAI_BASE_URL", "https://api.openai.com/v1")
    async with MemoryBus() as bus:
        worker = Worker(bus)
        assert isinstance(worker.models, EnvModels)
        async with worker.models as models:
            model = models(next(iter(worker.profiles.values())))
            assert models.offline and model.model == OFFLINE_MODEL_NAME
