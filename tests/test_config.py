"""Configuration is validated wherever it enters, and every error ends a command with the exit
code its own class carries (defined once, in ``baton.bus.errors.ExitCode``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
import typer
from pydantic import ValidationError
from typer.testing import CliRunner

from baton.api import SessionConfig, builtin_profiles, open_bus, open_session
from baton.bus.errors import (
    BatonError,
    BusClosed,
    BusUnreachable,
    ConfigError,
    ExitCode,
    InvalidEnvelope,
)
from baton.cli.app import app
from baton.cli.exits import run_async
from baton.engine.bus_channel import ApprovalNotFound
from baton.engine.spend import SpendLimits
from baton.llm.errors import ModelError, StreamBroken
from baton.server.config import ServerConfig
from baton.server.host import SessionHost
from baton.subagents.errors import ProfileError

BAD_SETTINGS = [
    ({"timeout_s": -5}, "timeout_s: Input should be greater than 0 (got -5)"),
    ({"approve": "maybe"}, "approve: Input should be 'ask', 'auto' or 'deny' (got 'maybe')"),
    ({"colour": "blue"}, "colour: unknown setting"),
]


@pytest.mark.parametrize(("settings", "said"), BAD_SETTINGS, ids=["timeout", "approve", "unknown"])
async def test_open_session_refuses_a_bad_keyword(settings: dict[str, Any], said: str) -> None:
    for config in ("paint a fox", SessionConfig(task="paint a fox")):
        with pytest.raises(ConfigError) as raised:
            open_session(config, **settings)
        assert str(raised.value) == f"bad session setting: {said}"
        assert isinstance(raised.value.__cause__, ValidationError)
        assert raised.value.exit_code == ExitCode.USAGE


async def test_open_session_keeps_what_the_config_said_and_applies_the_keywords() -> None:
    config = SessionConfig(task="paint a fox", approve="deny", worker_concurrency=3)
    session = open_session(config, timeout_s=5, approve="auto")
    assert session.config.session_id == config.session_id  # not a newly drawn id
    assert (session.config.timeout_s, session.config.approve) == (5, "auto")
    assert session.config.worker_concurrency == 3
    assert open_session(config).config is config


class _Unexpected(Exception):
    pass


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (ConfigError("bad"), 2),
        (ProfileError("no prompt", source="p.toml", profile="x", field="system_prompt"), 2),
        (InvalidEnvelope("bad envelope"), 2),
        (ApprovalNotFound("s1", "call_1", "no approval was requested for this call"), 2),
        (BusUnreachable("redis://x", "refused"), 3),
        (BusClosed("closed"), 1),
        (ModelError("rate limited", retryable=True, status_code=429), 1),
        (ModelError("wrong key", status_code=401), 2),
        (ModelError("no such model", status_code=404), 2),
        (StreamBroken("cut"), 1),
        (BatonError("anything else of ours"), 1),
        (KeyboardInterrupt(), 130),
    ],
    ids=lambda value: type(value).__name__ if isinstance(value, BaseException) else str(value),
)
def test_each_error_ends_a_command_with_its_own_code(error: BaseException, code: int) -> None:
    async def fails() -> None:
        raise error

    with pytest.raises(typer.Exit) as ended:
        run_async(fails)
    assert ended.value.exit_code == code
    if isinstance(error, BatonError):
        assert error.exit_code == code and code in set(ExitCode)


def test_a_bug_keeps_its_traceback() -> None:
    async def fails() -> None:
        raise _Unexpected("a bug")

    with pytest.raises(_Unexpected):
        run_async(fails)


async def test_a_servers_session_defaults_apply_where_the_request_did_not_say(
    tmp_path: Path,
) -> None:
    """``baton serve --budget-calls`` and the like: every session the server starts gets them,
    unless its own config says otherwise (the budget is on the bus before the lead starts)."""
    server_budget, own_budget = SpendLimits(max_model_calls=50), SpendLimits(max_tokens=9000)
    defaults = {"budget": server_budget, "tool_choice": "required"}
    async with open_bus("memory://") as bus, anyio.create_task_group() as group:
        host = SessionHost(bus, group, builtin_profiles(), defaults)
        plain = await host.start(SessionConfig(task="write a line", media_dir=tmp_path))
        own = await host.start(
            SessionConfig(task="write a line", media_dir=tmp_path, budget=own_budget)
        )
        await host.aclose()
        assert (await bus.budget.totals(plain)).limits == server_budget
        assert (await bus.budget.totals(own)).limits == own_budget


def test_baton_serve_gives_its_sessions_the_profiles_files_lead_mcp_servers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``[lead.mcp.<server>]`` in the profiles file reaches the sessions ``baton serve`` starts
    (it resolves the profiles itself, so the file's lead tables travel in its defaults)."""
    import baton.server

    profiles = tmp_path / "p.toml"
    profiles.write_text(
        '[profiles.clock]\ndescription = "Tells the time."\n\n'
        '[lead.mcp.search]\nurl = "http://127.0.0.1:9/mcp"\n'
    )
    seen: list[object] = []

    async def serve(config: object) -> int:
        seen.append(config)
        return 0

    monkeypatch.setattr(baton.server, "serve", serve)
    result = CliRunner().invoke(app, ["serve", "--profiles", str(profiles), "--port", "0"])
    assert result.exit_code == 0, result.output
    [config] = seen
    assert isinstance(config, ServerConfig)
    lead = config.session_defaults["lead_mcp"]
    assert isinstance(lead, dict) and list(lead) == ["search"]
    assert lead["search"].url == "http://127.0.0.1:9/mcp"
