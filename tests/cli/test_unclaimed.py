"""``baton run --no-local-workers`` with no worker serving its pool: one warning line naming the
pool and the profile, then the run fails on its own with the reason (exit 1), long before its
timeout. It used to print "painter spawned" and wait in silence for the whole timeout.

The command runs in-process (:func:`~tests.cli.helpers.invoke_baton`, as the console script
would): the exit code and the one stderr line are the point."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from baton.bus.errors import ExitCode
from baton.cli.run import session_settings
from baton.session import SessionConfig
from baton.settings import load_settings
from tests.cli.helpers import Proc, invoke_baton

TIMEOUT = "300"
"""The session's timeout: the run must end long before it."""


def test_run_with_no_worker_for_its_pool_warns_once_and_ends_naming_pool_and_profile(
    start: Callable[..., Proc], redis_url: str, env: dict[str, str]
) -> None:
    # A live worker of another pool knows the painter: it is not asked, and does not count.
    elsewhere = start("worker", "--bus", redis_url, "--pool", "cpu", env=env)
    elsewhere.expect(" ready: ", stream="err")
    env = {**env, "BATON_UNCLAIMED_TIMEOUT": "1"}
    began = time.monotonic()
    code, out, err = invoke_baton(
        "run", "--json", "--bus", redis_url, "--no-local-workers", "--pool", "gpu",
        "--timeout", TIMEOUT, "paint a fox",
        env=env,
    )  # fmt: skip
    took = time.monotonic() - began
    assert code == ExitCode.FAILED, err
    assert took < 45, f"took {took:.0f} s"
    events = [json.loads(line) for line in out.splitlines()]
    [warned] = [e for e in events if e["type"] == "agent.unclaimed"]
    assert (warned["pool"], warned["profile"], warned["workers"]) == ("gpu", "painter", 0)
    assert [e["agent"] for e in events if e["type"] == "agent.spawned"] == ["painter"]
    assert not [e for e in events if e["type"] == "agent.claimed"]
    line = err.strip()
    assert "\n" not in line, err  # one line
    assert "no worker of pool 'gpu' serves profile 'painter'" in line, line


def test_the_bound_is_a_setting_like_the_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert "unclaimed_s" not in session_settings(load_settings())  # the session's own default
    assert SessionConfig(task="t").unclaimed_s == 15
    config = tmp_path / "baton.toml"
    config.write_text("unclaimed_timeout = 40\n")
    assert session_settings(load_settings(config))["unclaimed_s"] == 40
    monkeypatch.setenv("BATON_UNCLAIMED_TIMEOUT", "5")
    assert session_settings(load_settings(config))["unclaimed_s"] == 5


def test_the_plain_view_shows_the_wait_as_one_warning_line(
    redis_url: str, env: dict[str, str]
) -> None:
    env = {**env, "BATON_UNCLAIMED_TIMEOUT": "1"}
    code, out, err = invoke_baton(
        "run", "--bus", redis_url, "--no-local-workers", "--pool", "gpu", "--timeout", TIMEOUT,
        "paint a fox", env=env,
    )  # fmt: skip
    assert code == ExitCode.FAILED, err
    warnings = [line for line in out.splitlines() if "has claimed it" in line]
    assert warnings == [
        "! painter: no worker of pool gpu has claimed it in 1 s (profile painter): no live "
        "worker of the pool serves that profile, so it is ended"
    ], out
