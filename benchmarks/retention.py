"""Benchmark of what a long run leaves behind: many short sessions through one ``baton worker`` on
a real ``redis-server``, then the retention passes (issue 12).

Sessions are driven from this process with the public API (``baton.api``: one shared bus, as an
embedding application has, ``local_workers=False``), so their sub-agents run in the one worker
process, on the offline model. Each session gets a tiny ``retention_s`` (``--retention``, 1 s), so
its keys get an expiry as it ends and are gone a second later. Once the finished sessions are done,
``--running`` more sessions are started and held open (a publisher waiting for a person's approval,
which only comes at the very end): they must keep their keys and subscriptions throughout.

Prints one JSON object:

- ``sessions``: ``finished`` (statuses), ``running`` (held open while everything is measured),
  ``elapsed_s`` and ``per_s`` of the finished ones;
- ``redis``: ``finished_session_keys_at_end`` (what each finished session left as it ended, all
  sessions together: what would stay for ever without a retention) and
  ``finished_session_keys_at_end_without_ttl`` (target 0: every one expires),
  ``finished_session_keys_left`` once the retention passed (target 0) and
  ``retention_passed_after_s``; ``running_session_keys`` and ``running_keys_with_ttl`` (target 0:
  nothing of a running session expires; the lead's lease, a TTL by design, is not counted);
  ``other_keys``: keys of no session (pool queues, the session index, dead letters);
- ``subscriptions`` (``PUBSUB CHANNELS``/``NUMSUB``, every process): ``channels`` and
  ``subscribers`` in all, ``finished_sessions_subscribed`` (target 0), ``running_sessions`` and
  ``running_sessions_subscribed`` (target: all), ``pool_channels`` (the worker's pool);
- ``worker_rss_mb``: ``ready`` (started), ``warm`` (after ``--warmup`` sessions), ``after`` (after
  all of them), and ``growth_per_100_sessions`` from warm to after (target ≤ 0.5);
- ``consumers``: per consumer group of every stream left, before and after the retention passed:
  ``groups``, ``total``, ``max_per_group`` (bounded: the consumers of a pool's spawn stream are
  its live workers, however many sessions ran).

Run: ``.venv/bin/python benchmarks/retention.py [--sessions 600] [--concurrency 8] [--running 3]
[--retention 1]``; it asserts the targets above once the JSON is printed. ``--smoke`` (30 sessions)
runs in seconds, as CI does, and asserts them all but the RSS one (too noisy over 30 sessions:
it is printed).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import AsyncExitStack, contextmanager
from pathlib import Path
from typing import Any

import anyio
from redis.exceptions import ResponseError

REPO = Path(__file__).resolve().parents[1]
BATON = str(Path(sys.executable).parent / "baton")
PREFIX = "ret"
TASKS = ("paint a fox", "paint a heron and write a haiku about it", "write a haiku about rain")
"""What the finished sessions ask: one or two sub-agents each (the offline lead's split)."""
HELD_TASK = "publish a haiku"
"""The held sessions' request: the publisher asks a person, and waits."""
RSS_TARGET_MB_PER_100 = 0.5
SESSION_KEY = re.compile(r"^" + PREFIX + r":\{(?P<session>[^}]+)\}:(?P<rest>.+)$")


# --- the worker process ------------------------------------------------------------------------


class Worker:
    """One ``baton worker`` process; its stderr read on a thread (ready line, last words)."""

    def __init__(self, url: str, media: Path, env: dict[str, str]) -> None:
        args = [BATON, "worker", "--bus", url, "--prefix", PREFIX, "--media", str(media),
                "--lease", "5", "--shutdown-timeout", "5", "--log-level", "WARNING"]  # fmt: skip
        self.popen = subprocess.Popen(
            args, cwd=REPO, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, text=True, errors="replace",
        )  # fmt: skip
        self.lines: list[str] = []
        self.ready = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.popen.stderr is not None
        for line in self.popen.stderr:
            self.lines.append(line.rstrip("\n"))
            if " ready: " in line:
                self.ready.set()

    def wait_ready(self, timeout: float = 60.0) -> None:
        if not self.ready.wait(timeout):
            raise RuntimeError(f"the worker did not start: {self.lines[-5:]}")

    def rss_mb(self) -> float:
        """Resident set size, from ``/proc`` (Linux)."""
        for line in Path(f"/proc/{self.popen.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        raise RuntimeError("no VmRSS in /proc: is this Linux?")

    def stop(self) -> int | None:
        if self.popen.poll() is None:
            self.popen.terminate()
        try:
            return self.popen.wait(30)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            return self.popen.wait()
        finally:
            self._reader.join(5)


@contextmanager
def worker_process(url: str, media: Path) -> Iterator[Worker]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "BATON_"))}
    env.pop("REDIS_URL", None)
    env["PYTHONUNBUFFERED"] = "1"
    worker = Worker(url, media, env)
    try:
        worker.wait_ready()
        yield worker
    finally:
        code = worker.stop()
        if code not in (0, None):
            print(f"worker exit {code}: {worker.lines[-3:]}", file=sys.stderr)


# --- reading Redis -----------------------------------------------------------------------------


def _s(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


async def session_keys(r: Any) -> dict[str, list[str]]:
    """Every key of the prefix by session id (``""``: keys of no session)."""
    found: dict[str, list[str]] = {}
    async for raw in r.scan_iter(match=f"{PREFIX}:*", count=1000):
        key = _s(raw)
        match = SESSION_KEY.match(key)
        found.setdefault(match["session"] if match else "", []).append(key)
    return found


async def subscriptions(r: Any, finished: set[str], running: set[str]) -> dict[str, int]:
    channels = [_s(c) for c in await r.pubsub_channels(f"{PREFIX}:*")]
    counts = dict(await r.pubsub_numsub(*channels)) if channels else {}
    by_session: set[str] = set()
    pool = 0
    for channel in channels:
        match = SESSION_KEY.match(channel)
        if match:
            by_session.add(match["session"])
        else:
            pool += 1
    return {
        "channels": len(channels),
        "subscribers": sum(int(n) for n in counts.values()),
        "finished_sessions_subscribed": len(by_session & finished),
        "running_sessions": len(running),
        "running_sessions_subscribed": len(by_session & running),
        "pool_channels": pool,
    }


async def consumers(r: Any) -> dict[str, Any]:
    per_group: dict[str, int] = {}
    async for raw in r.scan_iter(match=f"{PREFIX}:*", count=1000, _type="stream"):
        key = _s(raw)
        try:
            groups = await r.xinfo_groups(key)
        except ResponseError as exc:  # gone since SCAN saw it (a session's inbox retired)
            if "no such key" not in str(exc):
                raise
            continue
        for group in groups:
            name = _s(group["name"])
            per_group[f"{key} {name}"] = int(group["consumers"])
    return {
        "groups": len(per_group),
        "total": sum(per_group.values()),
        "max_per_group": max(per_group.values(), default=0),
    }


# --- the run -----------------------------------------------------------------------------------


def session_config(media: Path, **fields: Any) -> Any:
    """A ``SessionConfig`` with the worker's media directory (one volume, as a deployment shares:
    the lead takes ``file://`` media only inside its own); on a baton from before retention
    existed, without ``retention_s`` (so this measures the "before" of issue 12 too)."""
    from baton.api import SessionConfig

    if "retention_s" not in SessionConfig.model_fields:
        fields.pop("retention_s")
    return SessionConfig(media_dir=media, **fields)


class Finished:
    """The finished sessions: their ids and statuses, and what each left in Redis as it ended
    (its keys, and how many of them had no expiry)."""

    def __init__(self) -> None:
        self.ids: set[str] = set()
        self.statuses: Counter[str] = Counter()
        self.keys_at_end = 0
        self.keys_without_ttl_at_end = 0


async def run_sessions(
    bus: Any, r: Any, media: Path, finished: Finished, count: int, args: argparse.Namespace
) -> None:
    from baton.api import Session

    limiter = anyio.CapacityLimiter(args.concurrency)

    async def one(n: int) -> None:
        async with limiter:
            config = session_config(
                media,
                task=f"{TASKS[n % len(TASKS)]} {n}",
                bus_url=bus.url,
                bus_prefix=PREFIX,
                local_workers=False,
                approve="auto",
                retention_s=args.retention,
            )
            async with Session(config, bus=bus) as session:
                finished.statuses[(await session.run()).status] += 1
            finished.ids.add(session.id)
            keys = [_s(k) async for k in r.scan_iter(match=f"{PREFIX}:{{{session.id}}}:*")]
            ttls = [await r.pttl(key) for key in keys]
            finished.keys_at_end += sum(1 for ttl in ttls if ttl != -2)  # -2: already gone
            finished.keys_without_ttl_at_end += sum(1 for ttl in ttls if ttl == -1)

    async with anyio.create_task_group() as group:
        for n in range(count):
            group.start_soon(one, n)


async def main(args: argparse.Namespace) -> dict[str, Any]:
    from redis.asyncio import Redis

    from baton.api import Session
    from baton.bus.events import ApprovalRequested
    from baton.bus.redis import RedisBus
    from baton.testing import RedisServer

    with tempfile.TemporaryDirectory() as tmp, RedisServer(appendfsync="everysec") as server:
        r = Redis.from_url(server.url)
        media = Path(tmp) / "media"
        with worker_process(server.url, media) as worker:
            rss_ready = worker.rss_mb()
            async with r, RedisBus(server.url, prefix=PREFIX) as bus:
                warmup = min(args.warmup, args.sessions)
                done = Finished()
                started = time.perf_counter()
                await run_sessions(bus, r, media, done, warmup, args)
                rss_warm = worker.rss_mb()
                rest = args.sessions - warmup
                await run_sessions(bus, r, media, done, rest, args)
                elapsed = time.perf_counter() - started
                rss_after = worker.rss_mb()
                finished = done.ids
                consumers_before = await consumers(r)

                async with AsyncExitStack() as stack:
                    held: list[Any] = []
                    asks: list[ApprovalRequested] = []
                    for n in range(args.running):
                        config = session_config(
                            media, task=f"{HELD_TASK} {n}", bus_url=bus.url, bus_prefix=PREFIX,
                            local_workers=False, approve="ask", retention_s=args.retention,
                        )  # fmt: skip
                        session = await stack.enter_async_context(Session(config, bus=bus))
                        session.start()
                        held.append(session)
                    running = {s.id for s in held}
                    with anyio.fail_after(60):
                        for session in held:
                            async for logged in bus.log.tail(session.id):
                                if isinstance(logged.event, ApprovalRequested):
                                    asks.append(logged.event)
                                    break
                        while True:  # the publisher subscribes as it starts waiting
                            subs = await subscriptions(r, finished, running)
                            if subs["running_sessions_subscribed"] == len(running):
                                break
                            await anyio.sleep(0.05)
                    retention_started = time.perf_counter()
                    with anyio.move_on_after(args.retention + 30):
                        while True:
                            keys = await session_keys(r)
                            if not any(keys.get(s) for s in finished):
                                break
                            await anyio.sleep(0.25)
                    passed_after = time.perf_counter() - retention_started
                    keys = await session_keys(r)
                    left = sum(len(keys.get(s, ())) for s in finished)
                    running_keys = [k for s in running for k in keys.get(s, ())]
                    lasting = [k for k in running_keys if not k.endswith(":lead:lease")]
                    with_ttl = [k for k in lasting if await r.pttl(k) >= 0]
                    subs_after = await subscriptions(r, finished, running)
                    consumers_after = await consumers(r)
                    for session, ask in zip(held, asks, strict=True):
                        await session.answer(ask.calls[0].call_id, approved=True)
                    held_statuses = Counter([(await s.run()).status for s in held])
    growth = (rss_after - rss_warm) / max(args.sessions - warmup, 1) * 100
    return {
        "sessions": {
            "finished": dict(done.statuses),
            "running": args.running,
            "running_then": dict(held_statuses),
            "elapsed_s": round(elapsed, 2),
            "per_s": round(args.sessions / elapsed, 1),
        },
        "redis": {
            "retention_s": args.retention,
            "finished_session_keys_at_end": done.keys_at_end,
            "finished_session_keys_at_end_without_ttl": done.keys_without_ttl_at_end,
            "finished_session_keys_left": left,
            "retention_passed_after_s": round(passed_after, 2),
            "running_session_keys": len(running_keys),
            "running_keys_with_ttl": len(with_ttl),
            "other_keys": sorted(keys.get("", [])),
        },
        "subscriptions": subs_after,
        "worker_rss_mb": {
            "ready": round(rss_ready, 1),
            "warm": round(rss_warm, 1),
            "after": round(rss_after, 1),
            "warmup_sessions": warmup,
            "growth_per_100_sessions": round(growth, 3),
            "target_per_100": RSS_TARGET_MB_PER_100,
        },
        "consumers": {"before_retention": consumers_before, "after_retention": consumers_after},
    }


def check(result: dict[str, Any], args: argparse.Namespace) -> None:
    """What the figures are held to, once printed; the RSS target only in a full run."""
    assert result["sessions"]["finished"] == {"completed": args.sessions}, result["sessions"]
    assert result["sessions"]["running_then"] == {"completed": args.running}, result["sessions"]
    redis = result["redis"]
    assert redis["finished_session_keys_at_end"] > 0, "no keys at all: nothing was measured"
    assert redis["finished_session_keys_at_end_without_ttl"] == 0, redis
    assert redis["finished_session_keys_left"] == 0, redis
    assert redis["running_session_keys"] > 0 and redis["running_keys_with_ttl"] == 0, redis
    subs = result["subscriptions"]
    assert subs["finished_sessions_subscribed"] == 0, subs
    assert subs["running_sessions_subscribed"] == args.running, subs
    # Left after the retention: the pool's spawn streams (one consumer: the worker) and the held
    # sessions' own streams (their lead, their agent's worker): none grows with the sessions run.
    after = result["consumers"]["after_retention"]
    assert after["max_per_group"] <= 3, after
    assert after["total"] <= 3 * after["groups"], after
    rss = result["worker_rss_mb"]
    if not args.smoke:
        assert rss["growth_per_100_sessions"] <= RSS_TARGET_MB_PER_100, rss


def cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=600)
    parser.add_argument("--warmup", type=int, default=100, help="sessions before the RSS baseline")
    parser.add_argument("--concurrency", type=int, default=8, help="sessions at once")
    parser.add_argument("--running", type=int, default=3, help="sessions held open meanwhile")
    parser.add_argument("--retention", type=float, default=1.0, help="retention_s of each session")
    parser.add_argument("--smoke", action="store_true", help="30 sessions, asserted, for CI")
    args = parser.parse_args()
    if args.smoke:
        args.sessions, args.warmup, args.concurrency, args.running = 30, 10, 4, 2
    # Every session here runs the offline model, on purpose: say so once, not once a session.
    print("sessions and sub-agents run the offline model", file=sys.stderr)
    logging.getLogger("baton.session.compose").setLevel(logging.ERROR)
    result = anyio.run(main, args)
    print(json.dumps(result))
    check(result, args)


if __name__ == "__main__":
    cli()
