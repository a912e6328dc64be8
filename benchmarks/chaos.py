"""Chaos suite: real ``baton`` processes on a real ``redis-server``, put under faults.

Each case starts its own ``redis-server`` (AOF on, ``appendfsync always``, so a kill -9 of Redis
loses nothing baton wrote) on a free loopback port, real ``baton worker`` / ``baton run`` /
``baton serve`` processes, and injects one kind of fault in a bounded loop. The offline model
answers (no key, nothing leaves the machine); sub-agents run :func:`slow_step`, a tool of this
module that the workers import by path (``benchmarks.chaos:slow_step``, ``PYTHONPATH`` = the
repository), so a fault can land while a tool runs. Cases (``--case NAME``, repeatable; all by
default):

- ``kill-workers``: kill -9 a random worker every ~0.7 s (``--kills``) while ``--sessions``
  sessions of ``--agents`` sub-agents (a 4 s tool each) run on 3 workers (lease ``LEASE_S``),
  each killed one replaced at once;
- ``kill-finishing``: the same, each kill timed to a sub-agent's ``finishing`` state (its result
  is decided and being delivered; seen with ``MONITOR``, writers held by ``CLIENT PAUSE WRITE``
  until the owner is dead);
- ``redis-outage``: kill -9 Redis while sessions run, restart it (AOF) after ``--outage`` s;
  a ``baton watch`` follows one session through it;
- ``cluster-failover``: the same fleet on a Redis Cluster (3 masters, a replica each,
  ``redis+cluster://``); kill -9 of a master while sessions run, its replica promoted;
- ``pubsub-kill``: ``CLIENT KILL TYPE pubsub`` every 200 ms while sessions run;
- ``poison``: bad entries on every key kind, non-UTF-8 bytes (``\\xff``) and bad JSON: a
  sub-agent's inbox, the lead's inbox (also an envelope addressed to someone else), the spawn
  queue, the event log, an approvals inbox (then the real approval); a session started after the
  poison shows whether the fleet still serves; ``baton watch`` and ``baton sessions`` read the
  poisoned log;
- ``serve-sessions``: ``--http-sessions`` concurrent sessions of 1-3 sub-agents ``POST``-ed to
  one ``baton serve`` (in-process workers), one every ``--http-stagger`` s;
- ``serve-unknown-streams``: ``--stream-requests`` event-stream requests for unknown or expired
  sessions (sessions that completed, then had their keys deleted, asked again with the
  ``Last-Event-ID`` a reconnecting ``EventSource`` sends, or ``?last_event_id=``) interleaved with
  as many new sessions ``POST``-ed to one ``baton serve``: every stream must be a ``404``, every
  session must complete, and ``/healthz`` must say so (issue 22: one such request wedged the
  server, every later session waiting at its first wake-up while ``/healthz`` said ok);
- ``sigint``: SIGINT to ``baton run`` while every remote sub-agent is inside a long tool
  (``--busy-tool-s``, 15 s);
- ``kill-lead``: kill -9 the ``baton run`` process mid-session, then ``baton resume SESSION``
  (which waits out the killed lead's lease: 3 s here, ``BATON_LEAD_LEASE``); reported as
  ``{"available": false}`` while there is no ``baton resume`` command.

``--on-cluster`` runs every case on a Redis Cluster instead (3 masters, a replica each): the
fleet's ``--bus`` is ``redis+cluster://``, ``pubsub-kill`` kills on every master, the poisoned
wake-ups are shard channels; ``redis-outage`` and ``kill-finishing`` are reported as skipped
(:data:`SINGLE_NODE_ONLY` says why).

Prints one JSON object, a key per case. The figures of a case (absent where they do not apply):

- ``sessions``: ``started``, ``completed`` (a ``session.finished`` with status ``completed``),
  ``statuses``, ``exit_codes`` of the ``baton run`` processes, ``several_answers`` (sessions with
  more than one ``session.finished``);
- ``agents``: sub-agents started (``agent.spawned``); ``lost``: whose final result never reached
  the session (a completed session: its answer does not list it — the offline lead lists every
  result it received; any other: no ``agent.result`` was ever logged for it); ``duplicates``:
  extra listings of one sub-agent in an answer (a final result taken twice);
  ``result_events_repeated`` / ``result_events_missing``: extra ``agent.result`` events (a
  resumed report logs it again), and results the lead got whose event was never logged;
  ``exit_reasons``: how the sub-agents ended (``agent.exited``; ``idle`` here means stuck: every
  sub-agent has exactly one task, and its idle timeout is cut to ``IDLE_TIMEOUT_S``);
  ``hosted_by_other_session``: sub-agents an in-process worker of another session ran (the
  worker named in ``agent.claimed`` is ``<session>-local``; ``serve-sessions`` only);
- ``crashed``: processes that exited without being told to, or with an exit code their role does
  not expect (workers and ``serve`` 0 on SIGTERM, ``baton run`` 0 — 130 after SIGINT, ``watch``
  and ``sessions`` 0), with ``crash_details`` (the last stderr line of each);
- ``dead_letters`` (entries in ``baton:dead``) and ``dead_letter_reasons``;
- ``recover_s``: how long the system took to recover from the fault (per case: kill → every
  orphaned sub-agent owned again or exited; Redis back → first new event logged; SIGINT → every
  sub-agent exited).

``--smoke`` runs every case at tiny sizes (well under 60 s in all) and asserts what the suite's
targets promise, so CI fails when one regresses:

1. no case raised (every case produced its figures);
2. no process crashed, in any case;
3. no sub-agent lost and none listed twice in an answer, in any case;
4. every session that was not interrupted on purpose completed (all but ``sigint`` and the killed
   run of ``kill-lead``; ``poison`` included);
5. ``poison``: every injected entry that a reader takes in (all but the event-log entries, which
   are reported when read) is in the dead-letter stream, and no inbox holds an entry afterwards;
6. ``sigint``: ``baton run`` exits 130, every sub-agent ends (reason not ``finished``) within
   ``CANCEL_TARGET_S`` (+ ``SMOKE_SLACK_S``) of the signal, and nothing is left in the
   session's inboxes;
7. ``kill-lead``, when ``baton resume`` exists: the resumed session completes with one answer;
8. ``serve-unknown-streams``: every stream request was a ``404``, and ``/healthz`` answers ``200``
   at the end (every session completing is 4).

Run: ``.venv/bin/python benchmarks/chaos.py [--case NAME]... [--sessions 10] [--agents 10]
[--kills 15] [--outage 10] [--http-sessions 120] [--stream-requests 100] [--seed 7] [--keep]``;
``--smoke`` for CI. The full run of the issue: the defaults, then ``--case redis-outage
--outage 60``. Progress goes to stderr; ``--keep`` leaves each case's folder (run outputs, every
process's stderr, Redis's AOF).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager, suppress
from datetime import datetime
from pathlib import Path
from typing import Any

import anyio

from baton.engine import Tool

REPO = Path(__file__).resolve().parents[1]
BATON = str(Path(sys.executable).parent / "baton")
PREFIX = "baton"
LEASE_S = 2.0  # workers' lease: a killed worker's agents are taken over after it
LEAD_LEASE_S = 3.0  # kill-lead's lead lease: a resume takes the session over after it
CANCEL_TARGET_S = 2.0
SMOKE_SLACK_S = 1.0  # what the smoke run allows on top of a time target, on a loaded CI machine
IDLE_TIMEOUT_S = 15.0
"""Sub-agents' idle timeout (60 s by default): each has one task here, so an agent that waits for
more is stuck (seen: one resumed after its worker died mid-round); it ends ``idle`` sooner."""
TOOL_ENV = "CHAOS_TOOL_S"
CASES = (
    "kill-workers",
    "kill-finishing",
    "redis-outage",
    "cluster-failover",
    "pubsub-kill",
    "poison",
    "serve-sessions",
    "serve-unknown-streams",
    "sigint",
    "kill-lead",
)
Figures = dict[str, Any]


# --- tools the worker processes load by import path -------------------------------------------


async def slow_step(text: str) -> str:
    """Work on the text for a while (``CHAOS_TOOL_S`` seconds), so a fault can land meanwhile.

    Args:
        text: what to work on
    """
    await anyio.sleep(float(os.environ.get(TOOL_ENV, "1")))
    return f"worked on {text!r}"


async def _guarded_step(text: str) -> str:
    """Do something a person must approve first.

    Args:
        text: what to do
    """
    return f"did {text!r}"


guarded_step = Tool(_guarded_step, name="guarded_step", needs_approval=True)


# --- processes --------------------------------------------------------------------------------


def note(message: str, *args: object) -> None:
    print("chaos: " + message % args, file=sys.stderr, flush=True)


class Proc:
    """One ``baton`` process: its stderr line by line (a thread reads it), how it ended, and
    whether that end was one its role expects."""

    def __init__(
        self,
        role: str,
        args: list[str],
        env: dict[str, str],
        *,
        stdout: Path | None = None,
        expected: frozenset[int] = frozenset({0}),
    ) -> None:
        self.role = role
        self.expected = expected
        self.name = ""  # a worker's name, once it said it is ready
        self.killed = False  # we ended it with SIGKILL: its exit code says nothing
        self.stopping = False  # we asked it to stop
        self.lines: list[str] = []
        self.ended_at: float | None = None  # monotonic time its stderr closed: it exited
        self._changed = threading.Condition()
        out = stdout.open("w") if stdout is not None else subprocess.DEVNULL
        self.popen = subprocess.Popen(
            [BATON, *args],
            cwd=REPO,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.PIPE,
            text=True,
            errors="replace",
        )
        if stdout is not None:
            out.close()  # type: ignore[union-attr]
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.popen.stderr is not None
        for line in self.popen.stderr:
            with self._changed:
                self.lines.append(line.rstrip("\n"))
                if not self.name and " ready: " in line and "baton worker " in line:
                    self.name = line.split("baton worker ", 1)[1].split()[0]
                self._changed.notify_all()
        with self._changed:
            self.ended_at = time.monotonic()
            self._changed.notify_all()

    def wait_line(self, text: str, timeout: float) -> str | None:
        """The first stderr line holding ``text``; None if the process ended or time ran out."""
        deadline = time.monotonic() + timeout
        with self._changed:
            seen = 0
            while True:
                for line in self.lines[seen:]:
                    if text in line:
                        return line
                seen = len(self.lines)
                left = deadline - time.monotonic()
                if left <= 0 or (not self._reader.is_alive() and self.popen.poll() is not None):
                    return None
                self._changed.wait(min(left, 0.5))

    @property
    def alive(self) -> bool:
        return self.popen.poll() is None

    def kill9(self) -> None:
        self.killed = True
        with suppress(ProcessLookupError):
            self.popen.kill()

    def send(self, sig: signal.Signals) -> None:
        with suppress(ProcessLookupError):
            self.popen.send_signal(sig)

    def wait(self, timeout: float) -> int | None:
        """Its exit code, or None (and it is killed) if it is still running after ``timeout``."""
        try:
            return self.popen.wait(max(timeout, 0.01))
        except subprocess.TimeoutExpired:
            self.kill9()
            self.popen.wait()
            self.lines.append(f"(still running after {timeout:.0f} s: killed)")
            self.killed = False  # a hang is a failure, not one of our kills
            return None

    def stop(self, timeout: float = 20.0) -> None:
        """SIGTERM (once: a second one means "now"), as an orchestrator stops it; SIGKILL if it
        has not gone after ``timeout``."""
        if self.alive and not self.stopping:
            self.stopping = True
            self.send(signal.SIGTERM)
        self.wait(timeout)
        self._reader.join(5)

    @property
    def crashed(self) -> bool:
        code = self.popen.poll()
        if self.killed or code is None:
            return False
        if code < 0:  # killed by a signal nobody here sent (we only SIGKILL, recorded)
            return True
        return code not in self.expected or (self.role in ("worker", "serve") and not self.stopping)

    def detail(self) -> str:
        """Its exit code and the line that says why: the last exception line (an exception
        group ends in box drawing, not in the error), else its last line."""
        said = [line.strip(" |+-") for line in self.lines if line.strip(" |+-")]
        errors = [line for line in said if re.match(r"[\w.]*(Error|Exception|Group)\b", line)]
        why = (errors or said or [""])[-1]
        return f"{self.role} {self.name} exit {self.popen.poll()}: {why[:300]}"


# --- the cluster of one case ------------------------------------------------------------------


def _profiles_toml(count: int) -> str:
    tables = [
        f'[profiles.a{i}]\ndescription = "Worker number {i}."\n'
        f'system_prompt = "[baton:subagent] Work on the task, then report."\n'
        f'tools = ["benchmarks.chaos:slow_step"]\n'
        f"limits = {{ idle_timeout_s = {IDLE_TIMEOUT_S} }}\n"
        for i in range(count)
    ]
    tables.append(
        '[profiles.guard]\ndescription = "Does what a person approves."\n'
        'system_prompt = "[baton:subagent] Do the task, then report."\n'
        'tools = ["benchmarks.chaos:guarded_step"]\n'
    )
    return "\n".join(tables)


def task_text(agents: int, tag: str = "item") -> str:
    """A request the offline lead splits into ``agents`` sub-tasks, one per profile ``a<i>``
    (no verb names a profile, so they go round-robin)."""
    return ", ".join(f"draw {tag} {i}" for i in range(agents))


def agent_profiles(agents: int) -> list[str]:
    return [f"a{i}" for i in range(agents)]


def _s(value: object) -> str:
    """A Redis reply as text (redis-py types replies as bytes or str, either maybe None)."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return "" if value is None else str(value)


def _parse_ts(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


class Cluster:
    """A case's ``redis-server``, its processes, and reading the bus as Redis holds it."""

    def __init__(
        self, name: str, tmp: Path, *, tool_s: float, profiles: int, on_cluster: bool = False
    ) -> None:
        import redis

        from baton.testing import RedisServer
        from baton.testing.redis_cluster import RedisCluster

        self.name = name
        self.tmp = tmp
        self.redis = RedisServer(appendfsync="always", data_dir=tmp / "redis")
        self.nodes: RedisCluster | None = None
        self.r: redis.Redis | redis.RedisCluster
        if on_cluster:  # a Redis Cluster instead (3 masters + 3 replicas): the failover case
            self.nodes = RedisCluster()
            self.nodes.start()
            self.url = self.nodes.url
            seed = self.nodes.master_nodes()[0].port
            self.r = redis.RedisCluster(
                host="127.0.0.1", port=seed, socket_timeout=5, socket_connect_timeout=2
            )
        else:
            (tmp / "redis").mkdir()
            self.redis.start()
            self.url = self.redis.url
            self.r = redis.Redis(port=self.redis.port, socket_timeout=5, socket_connect_timeout=2)
        self.profiles = tmp / "profiles.toml"
        self.profiles.write_text(_profiles_toml(profiles))
        self.media = tmp / "media"
        self.procs: list[Proc] = []
        self.env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("OPENAI_", "BATON_")) and k != "REDIS_URL"
        }
        self.env |= {
            "PYTHONPATH": str(REPO),
            "PYTHONUNBUFFERED": "1",
            TOOL_ENV: str(tool_s),
            "BATON_MAX_SENDS_PER_TURN": "50",
            "BATON_LOG_LEVEL": "INFO",
        }

    def common(self) -> list[str]:
        return ["--bus", self.url, "--prefix", PREFIX]

    # processes

    def start(self, role: str, args: list[str], **kw: Any) -> Proc:
        proc = Proc(role, args, self.env, **kw)
        self.procs.append(proc)
        return proc

    def worker(self, *, ready: bool = True) -> Proc:
        args = ["worker", *self.common(), "--profiles", str(self.profiles), "--media",
                str(self.media), "--lease", str(LEASE_S), "--shutdown-timeout", "5"]  # fmt: skip
        proc = self.start("worker", args)
        if ready and proc.wait_line(" ready: ", 60) is None:
            raise RuntimeError(f"a worker did not start: {proc.lines[-5:]}")
        return proc

    def run(
        self,
        session: str,
        task: str,
        profiles: list[str],
        *,
        timeout: float,
        extra: tuple[str, ...] = (),
        expected: frozenset[int] = frozenset({0}),
    ) -> Proc:
        args = ["run", "--json", *self.common(), "--no-local-workers", "--session", session,
                "--profiles", str(self.profiles), "--media", str(self.media),
                "--timeout", str(timeout), *extra]  # fmt: skip
        for profile in profiles:
            args += ["--profile", profile]
        return self.start(
            "run", [*args, task], stdout=self.tmp / f"{session}.jsonl", expected=expected
        )

    def start_workers(self, count: int) -> None:
        """``count`` workers started together, returning once every one is ready."""
        started = [self.worker(ready=False) for _ in range(count)]
        for proc in started:
            if proc.wait_line(" ready: ", 60) is None:
                raise RuntimeError(f"a worker did not start: {proc.lines[-5:]}")

    def workers(self) -> list[Proc]:
        return [p for p in self.procs if p.role == "worker"]

    def close(self) -> None:
        for proc in self.procs:  # all told at once, as an orchestrator stops a fleet
            if proc.alive:
                proc.stopping = True
                proc.send(signal.SIGTERM)
        for proc in self.procs:
            proc.stop()
        self.r.close()
        self.redis.kill()
        if self.nodes is not None:
            self.nodes.stop()

    # reading Redis

    def events(self, session: str) -> list[dict[str, Any]]:
        """The session's event log; entries that are not JSON events are left out."""
        out: list[dict[str, Any]] = []
        for entry_id, fields in self.r.xrange(f"{PREFIX}:{{{session}}}:events") or []:
            try:
                event = json.loads(_s((fields or {}).get(b"event")))
            except ValueError:
                continue
            if isinstance(event, dict):
                event["_id"] = _s(entry_id)
                out.append(event)
        return out

    def wait_events(
        self, sessions: list[str], done: Callable[[list[dict[str, Any]]], bool], timeout: float
    ) -> bool:
        """Poll until ``done(events)`` holds for every session (the harness cannot be woken for
        another process's progress)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if all(done(self.events(s)) for s in sessions):
                    return True
            except OSError:
                pass
            except Exception as exc:  # a Redis fault while polling: look again
                if type(exc).__module__.split(".")[0] != "redis":
                    raise
            time.sleep(0.1)
        return False

    def dead_letters(self) -> Figures:
        entries = self.r.xrange(f"{PREFIX}:dead") or []
        reasons = Counter(
            re.sub(r"[0-9a-f-]{20,}|\d+", "N", _s((f or {}).get(b"reason")))[:90]
            for _, f in entries
        )
        return {"dead_letters": len(entries), "dead_letter_reasons": dict(reasons.most_common(8))}

    def inbox_entries(self, session: str) -> dict[str, int]:
        """Entries still in each of the session's inboxes (acked ones are deleted at once)."""
        found: dict[str, int] = {}
        for key in self.r.scan_iter(match=f"{PREFIX}:{{{session}}}:inbox:*", count=500):
            length = self.r.xlen(key)
            if length:
                found[_s(key).rsplit(":", 1)[1]] = length
        return found

    def agent_states(self) -> dict[str, dict[str, str]]:
        states = {}
        for key in self.r.scan_iter(match=f"{PREFIX}:{{*}}:agent:*", count=1000):
            fields = self.r.hmget(key, ["status", "owner"])
            states[_s(key)] = {"status": _s(fields[0]), "owner": _s(fields[1])}
        return states

    def crashes(self) -> Figures:
        crashed = [p for p in self.procs if p.crashed]
        return {
            "crashed": len(crashed),
            "crashed_by_role": dict(Counter(p.role for p in crashed)),
            "crash_details": [p.detail() for p in crashed][:10],
        }


KEEP = False  # --keep: leave each case's folder (Redis data, run outputs, media) for a look
ON_CLUSTER = False  # --on-cluster: every case that can runs on a Redis Cluster

SINGLE_NODE_ONLY = {
    "redis-outage": "it kills the one Redis node; its cluster twin is cluster-failover",
    "kill-finishing": "it times kills with MONITOR and CLIENT PAUSE on the one node",
}
"""Cases ``--on-cluster`` leaves out, and why."""


@contextmanager
def cluster(
    name: str, *, tool_s: float, profiles: int = 12, on_cluster: bool = False
) -> Iterator[Cluster]:
    tmp = Path(tempfile.mkdtemp(prefix=f"baton-chaos-{name}-"))
    on_cluster = on_cluster or ON_CLUSTER
    c = Cluster(name, tmp, tool_s=tool_s, profiles=profiles, on_cluster=on_cluster)
    try:
        yield c
    finally:
        c.close()
        if KEEP:
            (tmp / "stderr.txt").write_text(
                "\n\n".join(
                    f"== {p.role} {p.name} {p.popen.args!r}\n" + "\n".join(p.lines) for p in c.procs
                )
            )
            note("%s: kept %s", name, tmp)
        else:
            shutil.rmtree(tmp, ignore_errors=True)


# --- figures from the event logs --------------------------------------------------------------

_ANSWER_LINE = re.compile(r"^- ([\w.-]+): ", re.MULTILINE)


def _agent_figures(session: str, events: list[dict[str, Any]]) -> tuple[str, Counter[str]]:
    """The session's last status and its sub-agents' figures.

    A result counts as delivered when the lead's answer lists it (a completed session: the
    offline lead lists every result it received, once each); in a session that did not complete,
    when its ``agent.result`` event was logged (the best evidence that it was sent)."""
    started = {e["agent"] for e in events if e.get("type") == "agent.spawned"}
    results = Counter(e["agent"] for e in events if e.get("type") == "agent.result")
    reasons = {e["agent"]: e["reason"] for e in events if e.get("type") == "agent.exited"}
    ends = [e for e in events if e.get("type") == "session.finished"]
    status = ends[-1]["status"] if ends else "unfinished"
    figures: Counter[str] = Counter(started=len(started), several_answers=int(len(ends) > 1))
    figures["result_events_repeated"] = sum(n - 1 for n in results.values())
    figures.update(f"reason:{reason}" for reason in reasons.values())
    # A session's in-process worker is named "<session>-local": any other such name hosting one
    # of this session's agents is another session's worker.
    figures["hosted_by_other_session"] = len(
        {e["agent"] for e in events if e.get("type") == "agent.claimed"
         and str(e.get("worker", "")).endswith("-local") and e["worker"] != f"{session}-local"}
    )  # fmt: skip
    delivered = set(results)
    if status == "completed":
        answered = Counter(_ANSWER_LINE.findall(ends[-1].get("answer", "")))
        delivered = set(answered) & started
        figures["duplicates"] = sum(n - 1 for a, n in answered.items() if a in started)
        figures["result_events_missing"] = len(delivered - set(results))
    for agent in sorted(started - delivered):
        figures["lost"] += 1
        figures[f"lost:{session}/{agent}"] = 1
    return status, figures


def session_figures(c: Cluster, sessions: list[str], runs: dict[str, Proc] | None) -> Figures:
    statuses: Counter[str] = Counter()
    totals: Counter[str] = Counter()
    for session in sessions:
        status, figures = _agent_figures(session, c.events(session))
        statuses[status] += 1
        totals.update(figures)
    lost = [name.split(":", 1)[1] for name in totals if name.startswith("lost:")]
    reasons = {k.split(":", 1)[1]: n for k, n in totals.items() if k.startswith("reason:")}
    result: Figures = {
        "sessions": {
            "started": len(sessions),
            "completed": statuses["completed"],
            "statuses": dict(statuses),
            "several_answers": totals["several_answers"],
        },
        "agents": {
            "started": totals["started"],
            "lost": totals["lost"],
            "duplicates": totals["duplicates"],
            "result_events_repeated": totals["result_events_repeated"],
            "result_events_missing": totals["result_events_missing"],
            "exit_reasons": reasons,
            "hosted_by_other_session": totals["hosted_by_other_session"],
        },
    }
    if lost:
        result["agents"]["lost_sample"] = lost[:5]
    if runs is not None:
        codes = Counter(str(p.popen.poll()) for p in runs.values())
        result["sessions"]["exit_codes"] = dict(codes)
    return result


def finished(events: list[dict[str, Any]]) -> bool:
    return any(e.get("type") == "session.finished" for e in events)


def tools_started(count: int) -> Callable[[list[dict[str, Any]]], bool]:
    """True once ``count`` sub-agents of the session have called their tool."""

    def check(events: list[dict[str, Any]]) -> bool:
        calling = {
            e["agent"] for e in events if e.get("type") == "tool.call" and e["agent"] != "lead"
        }
        return len(calling) >= count or finished(events)

    return check


def agents_exited(events: list[dict[str, Any]]) -> bool:
    """True once every sub-agent the session started has logged ``agent.exited``."""
    spawned = {e["agent"] for e in events if e.get("type") == "agent.spawned"}
    return spawned <= {e["agent"] for e in events if e.get("type") == "agent.exited"}


def wait_runs(runs: dict[str, Proc], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    for proc in runs.values():
        proc.wait(deadline - time.monotonic())


def sessions_named(case: str, count: int) -> list[str]:
    return [f"{case}-{i}" for i in range(count)]


# --- cases ------------------------------------------------------------------------------------


class KillLog:
    """Kills done, and per kill how long until the victim's sub-agents were owned again."""

    def __init__(self, c: Cluster) -> None:
        self.c = c
        self.kills = 0
        self.at_finishing = 0
        self.recover: list[float | None] = []
        self._threads: list[threading.Thread] = []

    def kill(self, victim: Proc) -> None:
        victim.kill9()
        killed_at = time.monotonic()
        self.kills += 1
        self.c.worker(ready=False)  # its replacement, as a supervisor would start one
        watcher = threading.Thread(target=self._watch, args=(victim.name, killed_at))
        watcher.start()  # the scan runs there: a kill loop timed to a moment must not wait
        self._threads.append(watcher)

    def _watch(self, victim: str, killed_at: float) -> None:
        orphans = [  # a dead worker changes nothing: what it owned is what it left
            key
            for key, s in self.c.agent_states().items()
            if s["owner"].startswith(victim + "/") and s["status"] in ("running", "finishing")
        ]
        left = set(orphans)
        while left and time.monotonic() - killed_at < 60:
            for key in list(left):
                with suppress(Exception):
                    status, owner = self.c.r.hmget(key, ["status", "owner"])
                    if _s(status) == "exited" or not _s(owner).startswith(victim + "/"):
                        left.discard(key)
            time.sleep(0.05)
        if orphans:
            self.recover.append(None if left else time.monotonic() - killed_at)

    def figures(self) -> Figures:
        for thread in self._threads:
            thread.join(65)
        done = [s for s in self.recover if s is not None]
        return {
            "kills": self.kills,
            "kills_with_orphans": len(self.recover),
            "orphans_never_recovered": sum(1 for s in self.recover if s is None),
            "recover_s": {
                "median": round(statistics.median(done), 2) if done else None,
                "max": round(max(done), 2) if done else None,
            },
        }


def live_victims(c: Cluster) -> list[Proc]:
    return [w for w in c.workers() if w.alive and w.name and not w.killed]


def case_kill_workers(args: argparse.Namespace, *, at_finishing: bool = False) -> Figures:
    name = "kill-finishing" if at_finishing else "kill-workers"
    tool_s = (0.5 if at_finishing else 4.0) * args.tool_scale
    with cluster(name, tool_s=tool_s, profiles=args.agents) as c:
        c.start_workers(3)
        sessions = sessions_named(name, args.sessions)
        timeout = 120.0 + args.kills * 3
        runs = {
            s: c.run(s, task_text(args.agents, s), agent_profiles(args.agents), timeout=timeout)
            for s in sessions
        }
        log = KillLog(c)
        rng = random.Random(args.seed)
        began = time.monotonic()
        c.wait_events(sessions[:1], tools_started(1), 60)  # kills land on hosted agents
        if at_finishing:
            kill_at_finishing(c, runs, log, args.kills)
        else:
            while log.kills < args.kills and any(p.alive for p in runs.values()):
                time.sleep(rng.uniform(0.35, 1.05))
                victims = live_victims(c)
                if len(victims) >= 2:
                    log.kill(rng.choice(victims))
        wait_runs(runs, timeout + 30)
        figures: Figures = {"elapsed_s": round(time.monotonic() - began, 1)} | log.figures()
        figures["kills_at_finishing"] = log.at_finishing if at_finishing else None
        return figures | session_figures(c, sessions, runs) | c.crashes() | c.dead_letters()


def kill_at_finishing(c: Cluster, runs: dict[str, Proc], log: KillLog, kills: int) -> None:
    """Kill the owner of a sub-agent the moment it records ``finishing`` (its final report is
    decided, and being delivered). Redis's ``MONITOR`` shows that ``HSET`` as it runs, and
    ``CLIENT PAUSE WRITE`` holds every writer until the kill is done, so it lands inside the few
    commands the delivery takes (mostly before the result is sent, sometimes just after)."""
    with c.r.monitor() as monitor:  # type: ignore[no-untyped-call]
        while log.kills < kills and any(p.alive for p in runs.values()):
            try:
                command = str(monitor.next_command()["command"])
            except Exception:  # a quiet moment: the read timed out; look again
                continue
            words = re.findall(r'[^\s"]+', command[:300])
            if len(words) < 4 or words[0].upper() != "HSET" or ":agent:" not in words[1]:
                continue
            if "finishing" not in words[2:6]:
                continue
            c.r.client_pause(500, all=False)  # writes wait: the delivery stops where it is
            try:
                owner = _s(c.r.hget(words[1], "owner"))
                victim = next((w for w in live_victims(c) if owner.startswith(w.name + "/")), None)
                if victim is not None and len(live_victims(c)) >= 2:
                    log.at_finishing += 1
                    log.kill(victim)
            finally:
                c.r.client_unpause()


def case_redis_outage(args: argparse.Namespace) -> Figures:
    # Not scaled: the tools must outlast the watch's start and Redis's death, even in --smoke.
    with cluster("redis-outage", tool_s=3.0, profiles=args.agents) as c:
        c.start_workers(2)
        sessions = sessions_named("outage", min(args.sessions, 4))
        agents = min(args.agents, 3)
        timeout = args.outage + 120
        runs = {s: c.run(s, task_text(agents, s), agent_profiles(agents), timeout=timeout)
                for s in sessions}  # fmt: skip
        c.wait_events(sessions, tools_started(agents), 60)
        out = c.tmp / "watch.jsonl"
        command = ["watch", sessions[0], "--json", "--from-start", *c.common()]
        watch = c.start("watch", command, stdout=out)
        deadline = time.monotonic() + 30
        while out.stat().st_size == 0 and watch.alive and time.monotonic() < deadline:
            time.sleep(0.05)  # it follows the log once it printed the past (a start with no bus
            # is another matter: exit 3 at once, as documented)
        c.redis.kill()
        killed = time.monotonic()
        note("redis-outage: Redis killed; back in %s s", args.outage)
        time.sleep(args.outage)
        c.redis.start()
        up = time.time()
        up_mono = time.monotonic()
        first_new: float | None = None
        while first_new is None and time.monotonic() - up_mono < 60:
            with suppress(Exception):
                if any(int(e["_id"].split("-")[0]) / 1000 > up for s in sessions
                       for e in c.events(s)):  # fmt: skip
                    first_new = time.monotonic() - up_mono
                if not any(p.alive for p in runs.values()) and all(
                    agents_exited(c.events(s)) for s in sessions
                ):
                    break  # everything ended before the outage did: nothing to recover
            time.sleep(0.1)
        wait_runs(runs, timeout + 30)
        c.wait_events(sessions, agents_exited, 30)  # the workers' side, whatever the sessions did
        watch.wait(30)
        figures: Figures = {
            "outage_s": args.outage,
            "recover_s": round(first_new, 2) if first_new is not None else None,
            "runs_ended_s_after_redis_died": sorted(
                round(p.ended_at - killed, 1) for p in runs.values() if p.ended_at is not None
            ),
            "watch_exit": watch.popen.poll(),
        }
        return figures | session_figures(c, sessions, runs) | c.crashes() | c.dead_letters()


def case_cluster_failover(args: argparse.Namespace) -> Figures:
    """kill -9 of a Redis Cluster master while sessions run on the cluster; its replica takes
    over after the node timeout (1 s) and the cluster's vote."""
    with cluster("cluster-failover", tool_s=3.0, profiles=args.agents, on_cluster=True) as c:
        assert c.nodes is not None
        c.start_workers(3)
        sessions = sessions_named("failover", args.sessions)
        timeout = 180.0
        runs = {
            s: c.run(s, task_text(args.agents, s), agent_profiles(args.agents), timeout=timeout)
            for s in sessions
        }
        c.wait_events(sessions, tools_started(1), 60)
        victim = c.nodes.kill_master(0)
        killed = time.monotonic()
        note("cluster-failover: master on port %s killed", victim.port)
        c.nodes.wait_ok(60)
        settled = time.monotonic() - killed
        wait_runs(runs, timeout + 30)
        c.wait_events(sessions, agents_exited, 30)
        figures: Figures = {
            "cluster_settled_s": round(settled, 2),
            "runs_ended_s_after_kill": sorted(
                round(p.ended_at - killed, 1) for p in runs.values() if p.ended_at is not None
            ),
        }
        return figures | session_figures(c, sessions, runs) | c.crashes() | c.dead_letters()


def case_pubsub_kill(args: argparse.Namespace) -> Figures:
    with cluster("pubsub-kill", tool_s=1.0 * args.tool_scale, profiles=args.agents) as c:
        c.start_workers(2)
        sessions = sessions_named("pubsub", args.sessions)
        agents = min(args.agents, 5)
        runs = {s: c.run(s, task_text(agents, s), agent_profiles(agents), timeout=180)
                for s in sessions}  # fmt: skip
        commands = killed = 0
        began = time.monotonic()
        while any(p.alive for p in runs.values()) and time.monotonic() - began < 210:
            time.sleep(0.2)
            with suppress(Exception):
                killed += kill_pubsub(c)
                commands += 1
        wait_runs(runs, 30)
        figures: Figures = {
            "kill_commands": commands,
            "pubsub_connections_killed": killed,
            "elapsed_s": round(time.monotonic() - began, 1),
        }
        return figures | session_figures(c, sessions, runs) | c.crashes() | c.dead_letters()


def kill_pubsub(c: Cluster) -> int:
    """``CLIENT KILL TYPE pubsub`` on the node, or on every master of a cluster."""
    if c.nodes is None:
        return int(c.r.client_kill_filter(_type="pubsub"))
    killed = 0
    for node in c.nodes.master_nodes():
        with c.nodes.client(node) as client:
            killed += int(client.client_kill_filter(_type="pubsub"))
    return killed


Poison = tuple[str, str, str, bytes, str | None]
"""A poison entry: its kind, the stream, the field, the value, the wake-up channel (if any)."""


def _poison(c: Cluster, key: str, field: str, value: bytes, wake: str | None) -> None:
    c.r.xadd(key, {field: value})
    if wake is not None:  # a cluster's wake-ups are shard channels (docs/bus.md)
        publish = "SPUBLISH" if c.nodes else "PUBLISH"
        c.r.execute_command(publish, wake, b"poison")  # type: ignore[no-untyped-call]


def _foreign_envelope(session: str) -> bytes:
    """A valid envelope sitting in the lead's inbox but addressed to someone else."""
    return json.dumps(
        {
            "v": 1,
            "id": "01931f6e-8b4a-7cc0-9d1e-3f5a2b7c9d02",
            "session": session,
            "sender": "intruder",
            "recipient": "somebody-else",
            "type": "message",
            "content": "not for the lead",
        }
    ).encode()


def case_poison(args: argparse.Namespace) -> Figures:
    with cluster("poison", tool_s=6.0 * args.tool_scale, profiles=2) as c:
        c.start_workers(2)
        work, guard, later = "poison-work", "poison-guard", "poison-later"
        p = f"{PREFIX}:{{{work}}}"
        g = f"{PREFIX}:{{{guard}}}"
        # A sub-agent reads its inbox when it starts and between turns, not during one: the
        # poison is there before its task, so its first read takes both in.
        inboxes: list[Poison] = [
            ("subagent-inbox", f"{p}:inbox:a0", "msg", b"\xff", f"{p}:wake:a0"),
            ("subagent-inbox", f"{p}:inbox:a1", "msg", b'{"v": 1, "id": ', f"{p}:wake:a1"),
        ]
        for _kind, key, field, value, wake in inboxes:
            _poison(c, key, field, value, wake)
        runs = {
            work: c.run(work, task_text(2, "x"), ["a0", "a1"], timeout=90),
            guard: c.run(
                guard, "guard the gate", ["guard"], timeout=90, extra=("--approve", "ask")
            ),
        }
        c.wait_events([work], tools_started(1), 60)  # the lead waits for results now
        asked = [
            e for e in _events_when(c, guard, "approval.requested", 60) if e["agent"] == "guard"
        ]
        entries: list[Poison] = [  # in the order they go in
            ("lead-inbox", f"{p}:inbox:lead", "msg", b"\xff\xfe\xfd", f"{p}:wake:lead"),
            ("lead-inbox", f"{p}:inbox:lead", "msg", _foreign_envelope(work), f"{p}:wake:lead"),
            ("approvals", f"{g}:inbox:guard.approvals", "msg", b"\xff",
             f"{g}:wake:guard.approvals"),
            ("event-log", f"{p}:events", "event", b"\xff\xfe", None),
            ("event-log", f"{p}:events", "event", b'{"type": "no.such.event"}', None),
            ("spawn-queue", f"{PREFIX}:spawn", "req", b"\xff", f"{PREFIX}:spawn"),
            ("spawn-queue", f"{PREFIX}:spawn", "req", b"not json", f"{PREFIX}:spawn"),
        ]  # fmt: skip
        crashed_after = {"subagent-inbox": sum(1 for w in c.workers() if w.crashed)}
        for kind, key, field, value, wake in entries:
            _poison(c, key, field, value, wake)
            time.sleep(1.0 * args.tool_scale)
            crashed_after[kind] = sum(1 for w in c.workers() if w.crashed)
        approval = None
        if asked:
            call = asked[0]["calls"][0]["call_id"]
            command = ["approve", guard, call, "--yes", *c.common()]
            # 2: "already decided" (the poison ended the wait): reported, not a crash.
            approval = c.start("approve", command, expected=frozenset({0, 2})).wait(30)
        runs[later] = c.run(later, task_text(1, "y"), ["a0"], timeout=30)
        wait_runs(runs, 120)
        watch = c.start("watch", ["watch", work, "--from-start", "--json", *c.common()])
        listing = c.start("sessions", ["sessions", "--json", *c.common()])
        watch.wait(30)
        listing.wait(30)
        sessions = [work, guard, later]
        entries += inboxes
        figures: Figures = {
            "injected": dict(Counter(kind for kind, *_ in entries)),
            "injected_taken_in": sum(1 for kind, *_ in entries if kind != "event-log"),
            "workers_crashed_after": crashed_after,
            "approval_exit": approval,
            "approval_asked": bool(asked),
            "watch_exit": watch.popen.poll(),
            "sessions_exit": listing.popen.poll(),
            "inbox_entries_left": {s: c.inbox_entries(s) for s in sessions if c.inbox_entries(s)},
            "spawn_entries_pending": _spawn_pending(c),
        }
        return figures | session_figures(c, sessions, runs) | c.crashes() | c.dead_letters()


def _spawn_pending(c: Cluster) -> int | None:
    with suppress(Exception):
        return int(c.r.xpending(f"{PREFIX}:spawn", "workers")["pending"])
    return None


def _events_when(c: Cluster, session: str, kind: str, timeout: float) -> list[dict[str, Any]]:
    c.wait_events([session], lambda es: any(e.get("type") == kind for e in es), timeout)
    return [e for e in c.events(session) if e.get("type") == kind]


def case_serve_sessions(args: argparse.Namespace) -> Figures:
    from baton.testing import free_port

    with cluster("serve", tool_s=0.5 * args.tool_scale, profiles=3) as c:
        port = free_port()
        serve = c.start("serve", ["serve", "--port", str(port), *c.common(), "--profiles",
                                  str(c.profiles), "--media", str(c.media)])  # fmt: skip
        if serve.wait_line("baton serve:", 60) is None:
            raise RuntimeError(f"baton serve did not start: {serve.lines[-5:]}")
        began = time.monotonic()
        url = f"http://127.0.0.1:{port}"
        codes, ids = anyio.run(_post_sessions, url, args.http_sessions, args.http_stagger)
        posted_s = time.monotonic() - began
        c.wait_events(ids, lambda es: finished(es) or not serve.alive, 120 + args.http_sessions)
        figures: Figures = {
            "http_sessions": args.http_sessions,
            "http_status": dict(Counter(str(code) for code in codes)),
            "post_all_s": round(posted_s, 2),
            "elapsed_s": round(time.monotonic() - began, 1),
            "serve_alive_at_end": serve.alive,
        }
        figures |= session_figures(c, ids, None)
        figures["sessions"] |= {"started": args.http_sessions, "accepted": len(ids)}
        return figures | c.crashes() | c.dead_letters()


async def _post_sessions(url: str, count: int, stagger: float) -> tuple[list[int], list[str]]:
    import httpx2

    codes: list[int] = []
    ids: list[str] = []
    limits = httpx2.Limits(max_connections=None, max_keepalive_connections=None)
    async with httpx2.AsyncClient(base_url=url, limits=limits, timeout=60) as http:

        async def post(number: int) -> None:
            # Staggered, of 1-3 sub-agents each: sessions end while others still spawn theirs.
            await anyio.sleep(number * stagger)
            agents = 1 + number % 3
            body = {"task": task_text(agents, "h"), "profiles": agent_profiles(agents)}
            try:
                response = await http.post("/sessions", json=body | {"timeout_s": 300})
            except httpx2.HTTPError:
                codes.append(0)
                return
            codes.append(response.status_code)
            if response.status_code == 201:
                ids.append(response.json()["id"])

        async with anyio.create_task_group() as group:
            for number in range(count):
                group.start_soon(post, number)
    return codes, ids


EXPIRED = 3
"""Sessions of ``serve-unknown-streams`` run to the end, then deleted: the "expired" ones."""


def case_serve_unknown_streams(args: argparse.Namespace) -> Figures:
    from baton.testing import free_port

    with cluster("unknown", tool_s=0.2 * args.tool_scale, profiles=3) as c:
        port = free_port()
        serve = c.start("serve", ["serve", "--port", str(port), *c.common(), "--profiles",
                                  str(c.profiles), "--media", str(c.media)])  # fmt: skip
        if serve.wait_line("baton serve:", 60) is None:
            raise RuntimeError(f"baton serve did not start: {serve.lines[-5:]}")
        url = f"http://127.0.0.1:{port}"
        _, warm = anyio.run(_post_sessions, url, EXPIRED, 0.0)
        if not c.wait_events(warm, finished, 120):
            raise RuntimeError(f"the sessions to expire did not finish: {warm}")
        expired = {session: c.events(session)[-1]["_id"] for session in warm}
        for session in warm:  # what expiry (or `baton clean`) leaves of them: nothing
            keys = list(c.r.scan_iter(match=f"{PREFIX}:{{{session}}}*", count=500))
            c.r.delete(*keys)
        began = time.monotonic()
        run = _interleave(url, args.stream_requests, args.http_stagger, expired)
        streams, codes, ids = anyio.run(run)
        posted_s = time.monotonic() - began
        done = c.wait_events(ids, lambda es: finished(es) or not serve.alive, 60 + len(ids))
        health = _healthz(url)
        figures: Figures = {
            "stream_requests": args.stream_requests,
            "stream_status": dict(Counter(str(code) for code in streams)),
            "http_status": dict(Counter(str(code) for code in codes)),
            "post_all_s": round(posted_s, 2),
            "all_finished": done,
            "elapsed_s": round(time.monotonic() - began, 1),
            "healthz_at_end": health,
            "serve_alive_at_end": serve.alive,
        }
        figures |= session_figures(c, ids, None)
        figures["sessions"] |= {"started": args.stream_requests, "accepted": len(ids)}
        return figures | c.crashes() | c.dead_letters()


def _interleave(
    url: str, count: int, stagger: float, expired: dict[str, str]
) -> Callable[[], Awaitable[tuple[list[int], list[int], list[str]]]]:
    """``count`` new sessions and ``count`` stream requests for unknown or expired sessions,
    alternating (a stream request, then a session, one pair every ``stagger`` s)."""
    import httpx2

    async def run() -> tuple[list[int], list[int], list[str]]:
        streams: list[int] = []
        codes: list[int] = []
        ids: list[str] = []
        gone = list(expired.items())
        limits = httpx2.Limits(max_connections=None, max_keepalive_connections=None)
        async with httpx2.AsyncClient(base_url=url, limits=limits, timeout=30) as http:

            async def stream(number: int) -> None:
                await anyio.sleep(number * stagger)
                headers: dict[str, str] = {}
                if number % 2 == 0 or not gone:
                    path = f"/sessions/s-nosuch{number:06d}/events"  # never was
                else:  # expired: its EventSource comes back with the last id it got
                    session, cursor = gone[number % len(gone)]
                    path = f"/sessions/{session}/events"
                    if number % 4 == 1:
                        headers["Last-Event-ID"] = cursor
                    else:
                        path += f"?last_event_id={cursor}"
                try:
                    async with http.stream("GET", path, headers=headers) as answer:
                        streams.append(answer.status_code)
                except httpx2.HTTPError:
                    streams.append(0)

            async def post(number: int) -> None:
                await anyio.sleep(number * stagger + stagger / 2)
                agents = 1 + number % 3
                body = {"task": task_text(agents, "u"), "profiles": agent_profiles(agents)}
                try:
                    response = await http.post("/sessions", json=body | {"timeout_s": 300})
                except httpx2.HTTPError:
                    codes.append(0)
                    return
                codes.append(response.status_code)
                if response.status_code == 201:
                    ids.append(response.json()["id"])

            async with anyio.create_task_group() as group:
                for number in range(count):
                    group.start_soon(stream, number)
                    group.start_soon(post, number)
        return streams, codes, ids

    return run


def _healthz(url: str) -> Figures:
    import httpx2

    try:
        answer = httpx2.get(url + "/healthz", timeout=10)
    except httpx2.HTTPError as exc:
        return {"status": 0, "error": str(exc)}
    return {"status": answer.status_code, "body": answer.json()}


def case_sigint(args: argparse.Namespace) -> Figures:
    tool_s = args.busy_tool_s
    agents = min(args.agents, 6)
    with cluster("sigint", tool_s=tool_s, profiles=agents) as c:
        c.start_workers(2)
        session = "sigint-0"
        run = c.run(session, task_text(agents, "s"), agent_profiles(agents), timeout=120,
                    expected=frozenset({130}))  # fmt: skip
        c.wait_events([session], tools_started(agents), 60)
        time.sleep(0.3)
        sent = time.time()
        sent_mono = time.monotonic()
        run.send(signal.SIGINT)
        code = run.wait(30)
        exit_s = time.monotonic() - sent_mono
        spawned = {e["agent"] for e in c.events(session) if e.get("type") == "agent.spawned"}
        c.wait_events([session], agents_exited, tool_s + 10)
        time.sleep(1.0)  # what arrives late is what this case looks for
        events = c.events(session)
        exits = {e["agent"]: e for e in events if e.get("type") == "agent.exited"}
        ended = [e for e in events if e.get("type") == "session.finished"]
        after_end = [e for e in events if ended and e["_id"] > ended[0]["_id"]]
        latest = max((_parse_ts(e["ts"]) - sent for e in exits.values()), default=None)
        figures: Figures = {
            "run_exit": code,
            "run_exit_s": round(exit_s, 2),
            "agents_busy": len(spawned),
            "agents_exited": len(exits),
            "exit_reasons": dict(Counter(e["reason"] for e in exits.values())),
            "recover_s": round(latest, 2) if latest is not None and len(exits) == len(spawned)
            else None,
            "tools_finished_after_sigint": sum(
                1 for e in events if e.get("type") == "tool.result"
                and e["result"]["name"] == "slow_step" and _parse_ts(e["ts"]) > sent
            ),
            "events_after_session_finished": len(after_end),
            "inbox_entries_left": c.inbox_entries(session),
        }  # fmt: skip
        return figures | session_figures(c, [session], {session: run}) | c.crashes()


def resume_help() -> str | None:
    """``baton resume --help``, or None when there is no such command."""
    done = subprocess.run([BATON, "resume", "--help"], capture_output=True, text=True, cwd=REPO)
    return done.stdout if done.returncode == 0 else None


def case_kill_lead(args: argparse.Namespace) -> Figures:
    usage = resume_help()
    if usage is None:
        return {"available": False, "reason": "there is no `baton resume` command"}
    agents = min(args.agents, 4)
    with cluster("kill-lead", tool_s=3.0 * args.tool_scale, profiles=agents) as c:
        # The resume waits out the killed lead's lease: short here, as the workers' (LEASE_S),
        # so the case measures the recovery rather than the default lease (10 s).
        c.env["BATON_LEAD_LEASE"] = str(LEAD_LEASE_S)
        c.start_workers(2)
        session = "kill-lead-0"
        run = c.run(session, task_text(agents, "k"), agent_profiles(agents), timeout=120)
        c.wait_events([session], tools_started(agents), 60)
        run.kill9()
        run.wait(10)
        killed = time.monotonic()
        extra = ["--json", *c.common()]
        for flag, value in (("--no-local-workers", None), ("--profiles", str(c.profiles)),
                            ("--media", str(c.media))):  # fmt: skip
            if flag in usage:
                extra += [flag] if value is None else [flag, value]
        resumed = c.start("resume", ["resume", session, *extra],
                          stdout=c.tmp / "resume.jsonl")  # fmt: skip
        code = resumed.wait(150)
        figures: Figures = {
            "available": True,
            "resume_exit": code,
            "recover_s": round(time.monotonic() - killed, 2),
        }
        return figures | session_figures(c, [session], None) | c.crashes() | c.dead_letters()


RUNNERS: dict[str, Callable[[argparse.Namespace], Figures]] = {
    "kill-workers": case_kill_workers,
    "kill-finishing": lambda a: case_kill_workers(a, at_finishing=True),
    "redis-outage": case_redis_outage,
    "cluster-failover": case_cluster_failover,
    "pubsub-kill": case_pubsub_kill,
    "poison": case_poison,
    "serve-sessions": case_serve_sessions,
    "serve-unknown-streams": case_serve_unknown_streams,
    "sigint": case_sigint,
    "kill-lead": case_kill_lead,
}


# --- the smoke run's assertions (listed in the module docstring) ------------------------------


def smoke_failures(report: dict[str, Figures]) -> list[str]:
    failures = []
    for case, f in report.items():
        if "error" in f:
            failures.append(f"{case}: raised {f['error']}")  # 1
            continue
        if f.get("crashed"):
            failures.append(f"{case}: crashed {f['crash_details']}")  # 2
        agents = f.get("agents", {})
        if agents.get("lost") or agents.get("duplicates"):
            failures.append(f"{case}: agents {agents}")  # 3
        sessions = f.get("sessions", {})
        if case not in ("sigint", "kill-lead") and sessions.get("completed") != sessions.get(
            "started"
        ):
            failures.append(f"{case}: sessions {sessions}")  # 4
    failures += _poison_failures(report.get("poison"))
    failures += _unknown_stream_failures(report.get("serve-unknown-streams"))
    failures += _sigint_failures(report.get("sigint"))
    lead = report.get("kill-lead")
    if (
        lead
        and lead.get("available")
        and (
            lead.get("resume_exit") != 0
            or lead["sessions"]["completed"] != 1
            or lead["sessions"]["several_answers"]
        )
    ):
        failures.append(f"kill-lead: {lead}")  # 7
    return failures


def _poison_failures(f: Figures | None) -> list[str]:
    if not f or "error" in f:
        return []
    if f["dead_letters"] < f["injected_taken_in"] or f["inbox_entries_left"]:  # 5
        return [f"poison: {f['dead_letters']} dead letters, left {f['inbox_entries_left']}"]
    return []


def _unknown_stream_failures(f: Figures | None) -> list[str]:
    if not f or "error" in f:
        return []
    if f["stream_status"] != {"404": f["stream_requests"]} or f["healthz_at_end"]["status"] != 200:
        return [f"serve-unknown-streams: {f}"]  # 8
    return []


def _sigint_failures(f: Figures | None) -> list[str]:
    if not f or "error" in f:
        return []
    late = f["recover_s"] is None or f["recover_s"] > CANCEL_TARGET_S + SMOKE_SLACK_S
    if f["run_exit"] != 130 or late or "finished" in f["exit_reasons"] or f["inbox_entries_left"]:
        return [f"sigint: {f}"]  # 6
    return []


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--case", action="append", choices=CASES, help="run only this case")
    parser.add_argument("--sessions", type=int, default=10, help="sessions per case")
    parser.add_argument("--agents", type=int, default=10, help="sub-agents per session")
    parser.add_argument("--kills", type=int, default=15, help="worker kills per kill case")
    parser.add_argument("--outage", type=float, default=10.0, help="seconds Redis stays down")
    parser.add_argument("--http-sessions", type=int, default=120)
    parser.add_argument("--http-stagger", type=float, default=0.05, help="seconds between POSTs")
    parser.add_argument(
        "--stream-requests", type=int, default=100, help="unknown streams, and as many sessions"
    )
    parser.add_argument("--busy-tool-s", type=float, default=15.0, help="the sigint case's tool")
    parser.add_argument("--tool-scale", type=float, default=1.0, help="× every case's tool time")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes and assertions, for CI")
    parser.add_argument("--keep", action="store_true", help="keep each case's folder")
    parser.add_argument(
        "--on-cluster",
        action="store_true",
        help="every case on a Redis Cluster (3 masters, a replica each), but the single-node ones",
    )
    args = parser.parse_args()
    global KEEP, ON_CLUSTER
    KEEP, ON_CLUSTER = args.keep, args.on_cluster
    if args.smoke:
        args.sessions, args.agents, args.kills, args.outage, args.http_sessions = 1, 3, 2, 1.0, 4
        args.stream_requests = 6
        args.busy_tool_s, args.tool_scale = 6.0, 0.25
    report: dict[str, Figures] = {}
    for case in args.case or CASES:
        if ON_CLUSTER and case in SINGLE_NODE_ONLY:
            report[case] = {"skipped": f"not on a cluster: {SINGLE_NODE_ONLY[case]}"}
            continue
        note("%s …", case)
        began = time.monotonic()
        try:
            report[case] = RUNNERS[case](args)
        except Exception as exc:
            traceback.print_exc()
            report[case] = {"error": f"{type(exc).__name__}: {exc}"}
        report[case]["case_s"] = round(time.monotonic() - began, 1)
        note("%s: %s", case, json.dumps(report[case]))
    print(json.dumps(report, indent=2))
    if args.smoke:
        failures = smoke_failures(report)
        assert not failures, "\n".join(failures)


if __name__ == "__main__":
    main()
