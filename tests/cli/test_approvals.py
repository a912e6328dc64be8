"""Approvals through the ``baton`` commands, with the built-in ``publisher`` (its ``publish``
needs approval and saves the text under the media directory, so "the tool ran" is a file): real
processes where two must meet or where docs/questions.md's commands run as written, in-process
(:func:`~tests.cli.helpers.invoke_baton`) otherwise.

``--approve auto|deny`` is the session's policy for every agent wherever it runs: in the run's
own process and on a remote ``baton worker`` over Redis, the sub-agent's call is decided at once
by the policy (the run ends long before the 120 s approval timeout, which the test's timeout
would not even reach). ``--approve ask`` without a terminal declines at once on the
in-process bus, where nobody could answer, and says what works; on a shared bus it prints the
``baton approve`` command — which docs/questions.md's approval flow, run as written, then uses.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests.cli.helpers import REPO, Proc, invoke_baton, run_baton

TASK = "publish a haiku"
QUICK_S = 10.0
"""Far below the 120 s approval timeout: a decision this fast was not a timeout."""


def _events(out: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def _ts(event: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(event["ts"].replace("Z", "+00:00"))


def _published(media: Path) -> list[Path]:
    return sorted(media.rglob("publisher-*.txt"))


def _the_decision(events: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The publisher's one ``approval.requested`` and the ``approval.decided`` of its call."""
    [asked] = [e for e in events if e["type"] == "approval.requested"]
    assert asked["agent"] == "publisher"
    [call] = asked["calls"]
    assert call["name"] == "publish"
    [decided] = [e for e in events if e["type"] == "approval.decided"]
    assert decided["call_id"] == call["call_id"] and decided["agent"] == "publisher"
    assert (_ts(decided) - _ts(asked)).total_seconds() < QUICK_S
    return asked, decided


def _publish_result(events: list[dict[str, Any]], call_id: str) -> dict[str, Any]:
    [result] = [
        e["result"]
        for e in events
        if e["type"] == "tool.result" and e["result"]["call_id"] == call_id
    ]
    return dict(result)


def _check_policy(events: list[dict[str, Any]], policy: str, media: Path) -> None:
    """The policy decided, said so in both events (nobody is asked: no surface shows the
    question), and the tool ran (auto) or did not (deny)."""
    asked, decided = _the_decision(events)
    assert asked["policy"] == decided["policy"] == policy
    assert decided["approved"] is (policy == "auto")
    assert f"approve={policy}" in decided["reason"]
    result = _publish_result(events, decided["call_id"])
    if policy == "auto":
        assert not result["synthetic"] and "Published" in result["content"]
        [published] = _published(media)
        assert published.read_text().strip() == TASK  # the offline sub-agent publishes its task
    else:
        assert result["synthetic"] and "did not run" in result["content"]
        assert _published(media) == []
    finished = events[-1]
    assert finished["type"] == "session.finished" and finished["status"] == "completed"


@pytest.mark.parametrize("policy", ["auto", "deny"])
def test_the_policy_decides_a_sub_agents_approval_in_process(
    policy: str, env: dict[str, str], tmp_path: Path
) -> None:
    code, out, err = invoke_baton("run", "--json", "--approve", policy, TASK, env=env)
    assert code == 0, err
    _check_policy(_events(out), policy, tmp_path / "media")
    assert "waits for approval" not in err and "nobody can answer" not in err


@pytest.mark.parametrize("policy", ["auto", "deny"])
def test_the_policy_decides_for_a_sub_agent_on_a_remote_worker(
    policy: str,
    start: Callable[..., Proc],
    redis_url: str,
    env: dict[str, str],
    tmp_path: Path,
) -> None:
    # One media directory for the worker and the session, as a deployment shares one volume: the
    # lead takes file:// media only inside its own (docs/protocol.md, "Who may say what").
    worker_media = tmp_path / "worker-media"
    shared = {**env, "BATON_MEDIA_DIR": str(worker_media)}
    worker = start("worker", "--bus", redis_url, env=shared)
    name = worker.expect(" ready: ", stream="err").split("baton worker ", 1)[1].split()[0]
    code, out, err = invoke_baton(
        "run", "--json", "--bus", redis_url, "--no-local-workers", "--approve", policy, TASK,
        env=shared,
    )  # fmt: skip
    assert code == 0, err
    events = _events(out)
    hosted = [e for e in events if e["type"] == "agent.claimed"]
    assert [e["worker"].split("/")[0] for e in hosted] == [name]  # the remote worker ran it
    _check_policy(events, policy, worker_media)


def test_ask_without_a_terminal_on_the_in_process_bus_declines_at_once_and_says_what_works(
    env: dict[str, str], tmp_path: Path
) -> None:
    code, out, err = invoke_baton("run", "--json", TASK, env=env)  # --approve ask is the default
    assert code == 0, err
    [line] = [line for line in err.splitlines() if "nobody can answer" in line]
    assert line.startswith("baton run: declined publisher's publish: ")
    for works in ("on a terminal", "--approve auto|deny", "--bus redis://", "`baton approve`"):
        assert works in line, works
    events = _events(out)
    _, decided = _the_decision(events)  # decided at once, not after the 120 s timeout
    assert decided["approved"] is False and decided["policy"] == "nobody"
    assert "nobody can answer" in decided["reason"]
    declined = _publish_result(events, decided["call_id"])
    assert declined["synthetic"] and "nobody could be asked" in declined["content"]
    assert "the user declined" not in declined["content"]  # no person said no
    assert _published(tmp_path / "media") == []


# -- the approval flow of docs/questions.md, as written -------------------------------------


def _doc_section(title: str) -> str:
    text = (REPO / "docs" / "questions.md").read_text()
    start = text.index(f"## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else None]


def _sh_blocks(text: str) -> list[str]:
    return re.findall(r"```sh\n(.*?)```", text, re.DOTALL)


@pytest.mark.process
def test_the_documented_auto_approval_command_runs_as_written(
    env: dict[str, str], tmp_path: Path
) -> None:
    first = _sh_blocks(_doc_section("Approvals"))[0]
    [command] = [line for line in first.splitlines() if "--approve auto" in line]
    args = shlex.split(command, comments=True)
    assert args[:2] == ["baton", "run"]
    code, out, err = run_baton(*args[1:], "--json", env=env)
    assert code == 0, err
    _check_policy(_events(out), "auto", tmp_path / "media")


def test_the_documented_remote_approval_flow_runs_as_written(
    start: Callable[..., Proc], redis_url: str, env: dict[str, str], tmp_path: Path
) -> None:
    section = _doc_section("Approvals")
    block = re.search(r"<!-- example: approve-remote -->\n```sh\n(.*?)```", section, re.DOTALL)
    assert block is not None
    lines = block[1].strip().splitlines()
    export, worker_line, run_line, printed, approve_line = lines
    readme_bus = "redis://localhost:6379/0"
    assert export == f"export BATON_BUS={readme_bus}"
    env = {**env, "BATON_BUS": redis_url}  # the one change: the test's own Redis

    worker_args = shlex.split(worker_line.removesuffix("&"))
    assert worker_line.endswith("&") and worker_args[0] == "baton"
    start(*worker_args[1:], env=env)
    run_args = shlex.split(run_line, comments=True)
    assert run_args[0] == "baton"
    run = start(*run_args[1:], env=env)

    # what baton run prints is what docs/questions.md shows (… stands for ids and the rest)
    assert printed.startswith("# ")
    shape = ".*?".join(re.escape(piece) for piece in printed[2:].split("…"))
    hint = run.expect(lambda line: re.fullmatch(shape, line.strip()) is not None, stream="err")
    asked = re.search(r"`baton approve (\S+) (\S+) --yes\|--no`", hint)
    assert asked is not None
    session, call_id = asked[1], asked[2]

    approve_args = shlex.split(approve_line, comments=True)
    assert approve_args[:2] == ["baton", "approve"] and approve_args[2:4] == ["SESSION", "CALL_ID"]
    code, out, err = run_baton("approve", session, call_id, *approve_args[4:], env=env)
    assert code == 0, err
    assert call_id in out and "approved" in out
    assert run.wait() == 0, run.transcript()
    [published] = _published(tmp_path / "media")  # the worker shares the test's media dir
    assert published.read_text().strip() == TASK
