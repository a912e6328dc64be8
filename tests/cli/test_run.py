"""``baton run`` end to end, offline: nothing running first, real media files at the end."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit
from urllib.request import url2pathname

from tests.cli.helpers import Proc, group_members, invoke_baton


def file_of(url: str) -> Path:
    parts = urlsplit(url)
    assert parts.scheme == "file", url
    return Path(url2pathname(parts.path))


def test_offline_run_cites_every_media_url_and_the_files_exist(
    env: dict[str, str], profiles_file: Path
) -> None:
    code, out, err = invoke_baton(
        "run", "--json", "--profiles", str(profiles_file), "--profile", "painter",
        "--profile", "sketcher",
        "paint a fox and paint a heron",
        env=env,
    )  # fmt: skip
    assert code == 0, err
    import json

    events = [json.loads(line) for line in out.splitlines()]  # --json: nothing but JSON lines
    results = [e for e in events if e["type"] == "agent.result"]
    media = [url for e in results for url in e["media_urls"]]
    assert len(media) >= 2
    finished = events[-1]
    assert finished["type"] == "session.finished" and finished["status"] == "completed"
    for url in media:
        assert url in finished["answer"]
        assert url in finished["media_urls"]
        assert file_of(url).read_bytes().startswith(b"\x89PNG")
    assert events[0]["type"] == "session.started" and events[0]["offline"] is True


def test_plain_run_lists_media_urls_at_the_end(env: dict[str, str]) -> None:
    code, out, err = invoke_baton("run", "paint a lighthouse", env=env)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("── session ") and "offline model" in lines[0]
    media_at = lines.index("media:")
    urls = [line.strip() for line in lines[media_at + 1 :]]
    assert urls and all(file_of(url).is_file() for url in urls)
    assert "── session " in lines[media_at - 1] and "completed" in lines[media_at - 1]


def test_sigint_exits_130_within_2s_with_sub_agents_shut_down(
    env: dict[str, str], profiles_file: Path, start: Callable[..., Proc]
) -> None:
    run = start(
        "run", "--json", "--profiles", str(profiles_file), "--profile", "sleeper",
        "ponder the sea and ponder the sky",
        env=env,
    )  # fmt: skip
    run.expect_event("tool.call", agent="sleeper")
    sent = time.monotonic()
    run.proc.send_signal(signal.SIGINT)
    code = run.wait(timeout=10)
    elapsed = time.monotonic() - sent
    assert code == 130, run.transcript()
    assert elapsed < 2.0, f"took {elapsed:.2f} s to stop"
    events = run.events()
    exited = {e["agent"]: e["reason"] for e in events if e["type"] == "agent.exited"}
    assert set(exited.values()) <= {"shutdown", "cancelled"}, run.transcript()
    assert events[-1]["type"] == "session.finished" and events[-1]["status"] == "cancelled"
    # The sub-agents ran in this process (in-process worker): the process group being empty
    # means every one of them is gone, mid-tool ones included.
    assert group_members(run.pid) == []
