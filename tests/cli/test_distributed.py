"""``baton run`` on Redis with its sub-agents on separate ``baton worker`` processes, observed by
``baton watch`` from a third process, steered by ``baton post`` and ``baton approve``.

Workers take one agent each (``--concurrency 1``) and the agents' tool holds until the test
creates a release file, so two agents are certain to land on two different workers. Every step
waits on a line a process printed; none on a timer.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.cli.helpers import Proc, invoke_baton

SESSION = "s-distributed"


def start_worker(
    start: Callable[..., Proc], redis_url: str, profiles_file: Path, env: dict[str, str]
) -> str:
    worker = start(
        "worker", "--bus", redis_url, "--profiles", str(profiles_file), "--concurrency", "1",
        "--lease", "5",
        env=env,
    )  # fmt: skip
    line = worker.expect(" ready: ", stream="err")
    return line.split("baton worker ", 1)[1].split()[0]


def test_remote_workers_do_the_work_while_watch_sees_it_and_post_adds_a_follow_up(
    start: Callable[..., Proc],
    redis_url: str,
    profiles_file: Path,
    env: dict[str, str],
    tmp_path: Path,
) -> None:
    workers = {start_worker(start, redis_url, profiles_file, env) for _ in range(2)}
    watch = start("watch", SESSION, "--wait", "--json", "--bus", redis_url, env=env)
    run = start(
        "run", "--json", "--bus", redis_url, "--no-local-workers", "--session", SESSION,
        "--profiles", str(profiles_file), "--profile", "north", "--profile", "south",
        "survey the north and survey the south",
        env=env,
    )  # fmt: skip

    claimed = watch.expect_each("agent.claimed", {"north", "south"})
    hosts = {event["worker"].split("/")[0] for event in claimed.values()}
    assert hosts == workers  # one agent on each worker
    watch.expect_each("tool.call", {"north", "south"})  # both are mid-work, holding

    code, out, err = invoke_baton(
        "post", "--bus", redis_url, "--session", SESSION, "--to", "lead", "--type", "message",
        "also survey the east",
        env=env,
    )  # fmt: skip
    assert code == 0, err
    assert len(out.split()) == 1  # the envelope id

    def delegates_east(line: str) -> bool:
        return '"send_message"' in line and "survey the east" in line

    run.expect(delegates_east)  # the lead took the follow-up in the same session
    (tmp_path / "release").touch()

    assert run.wait() == 0, run.transcript()
    finished = run.events()[-1]
    assert finished["type"] == "session.finished" and finished["status"] == "completed"
    assert finished["session"] == SESSION
    assert "east" in finished["answer"]

    assert watch.wait() == 0, watch.transcript()  # watch ends with the session
    seen = watch.events()
    for kind in ("agent.spawned", "agent.claimed", "agent.progress", "agent.result"):
        assert {e["agent"] for e in seen if e["type"] == kind} >= {"north", "south"}, kind
    assert seen[-1]["type"] == "session.finished"

    code, out, _ = invoke_baton("sessions", "--bus", redis_url, env=env)
    assert code == 0
    assert any(line.split()[:2] == [SESSION, "completed"] for line in out.splitlines())


def test_approve_answers_a_sub_agent_on_a_remote_worker(
    start: Callable[..., Proc], redis_url: str, profiles_file: Path, env: dict[str, str]
) -> None:
    start_worker(start, redis_url, profiles_file, env)
    run = start(
        "run", "--json", "--bus", redis_url, "--no-local-workers", "--session", "s-approve",
        "--profiles", str(profiles_file), "--profile", "publisher",
        "publish the news",
        env=env,
    )  # fmt: skip
    asked = run.expect_event("approval.requested", agent="publisher")
    call_id = asked["calls"][0]["call_id"]
    assert asked["calls"][0]["name"] == "publish"

    code, out, err = invoke_baton(
        "approve", "s-approve", call_id, "--yes", "--bus", redis_url, env=env
    )
    assert code == 0, err
    assert call_id in out and "approved" in out

    decided = run.expect_event("approval.decided", call_id=call_id)
    assert decided["approved"] is True
    published = run.expect_event("tool.result", agent="publisher")
    assert published["result"]["content"].startswith("published")
    assert run.wait() == 0, run.transcript()
    assert run.events()[-1]["status"] == "completed"

    code, _, err = invoke_baton(
        "approve", "s-approve", call_id, "--no", "--bus", redis_url, env=env
    )
    assert code == 2 and "already decided" in err  # one answer per question


def test_the_budget_of_a_run_binds_the_agents_of_remote_workers(
    start: Callable[..., Proc], redis_url: str, env: dict[str, str]
) -> None:
    worker = start_worker_with_builtin_profiles(start, redis_url, env)
    run = start(
        "run", "--json", "--bus", redis_url, "--no-local-workers", "--session", "s-budget",
        "--budget-calls", "2", "paint a fox and paint a heron",
        env=env,
    )  # fmt: skip
    code = run.wait()
    events = run.events()
    finished = events[-1]
    assert finished["type"] == "session.finished" and finished["status"] == "failed"
    assert code == 1, run.transcript()
    spent = [(e["calls"], e["max_calls"]) for e in events if e["type"] == "budget.updated"]
    assert spent and max(spent) == (2, 2), spent  # never a third call, whoever made it
    exits = {e["agent"]: e["reason"] for e in events if e["type"] == "agent.exited"}
    assert exits and set(exits.values()) == {"budget"}, exits
    hosted = [e for e in events if e["type"] == "agent.claimed"]
    assert {e["worker"].split("/")[0] for e in hosted} == {worker}


def start_worker_with_builtin_profiles(
    start: Callable[..., Proc], redis_url: str, env: dict[str, str]
) -> str:
    worker = start("worker", "--bus", redis_url, "--lease", "5", env=env)
    line = worker.expect(" ready: ", stream="err")
    return line.split("baton worker ", 1)[1].split()[0]
