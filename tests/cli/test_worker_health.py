"""``baton worker --health-file`` and ``--check --health-file``: the compose health check asks
the worker itself, not Redis.

A real ``baton worker`` process on the test's Redis beats into its health file; ``baton worker
--check`` reads it (in-process: :func:`~tests.cli.helpers.invoke_baton`). The worker removes the
file when it stops, so the check fails at once, and a file the worker stopped touching fails once
it is stale.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from baton.bus.errors import ExitCode
from baton.cli.worker import HEALTH_STALE_S
from tests.cli.helpers import Proc, clean_env, invoke_baton


@pytest.mark.process
def test_the_check_follows_a_real_worker_from_start_to_stop(tmp_path: Path, redis_url: str) -> None:
    env = clean_env(tmp_path)
    health = tmp_path / "worker.health"
    check = ("worker", "--check", "--health-file", str(health))

    code, _, err = invoke_baton(*check, env=env)
    assert code == ExitCode.FAILED and "no health file" in err, err  # not started yet

    worker = Proc(["worker", "--bus", redis_url, "--health-file", str(health),
                   "--shutdown-timeout", "2"], env)  # fmt: skip
    try:
        worker.expect("health: beating into", stream="err")  # logged after the first touch
        assert health.is_file()
        code, out, err = invoke_baton(*check, env=env)
        assert code == ExitCode.OK, err
        assert "worker alive" in out

        worker.proc.send_signal(signal.SIGTERM)
        assert worker.wait() == ExitCode.OK
    finally:
        worker.kill()
    assert not health.exists(), "a stopped worker leaves no health file behind"
    code, _, err = invoke_baton(*check, env=env)
    assert code == ExitCode.FAILED and "has stopped" in err, err


def test_a_stale_health_file_fails_the_check(tmp_path: Path) -> None:
    """A worker that stopped beating (stuck, or its bus gone) is unhealthy; no bus is asked."""
    health = tmp_path / "worker.health"
    health.touch()
    old = time.time() - HEALTH_STALE_S - 5
    os.utime(health, (old, old))
    env = clean_env(tmp_path, BATON_BUS="redis://127.0.0.1:9/0")  # unreachable: never used
    code, _, err = invoke_baton("worker", "--check", "--health-file", str(health), env=env)
    assert code == ExitCode.FAILED
    assert "stale" in err and err.count("\n") == 1, err
