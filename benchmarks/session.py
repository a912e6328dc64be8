"""Benchmark of a whole session and of the ``baton`` command's start-up.

Prints one JSON object:

- ``cli_startup_ms``: ``baton --help``, process start to exit (median); target ≤ 300 ms, which
  holds only because every command defers its heavy imports;
- ``import_openai_ms``: ``python -c 'import openai'``, process start to exit (median), measured in
  the same run as the floor of anything that talks to a model;
- ``first_token_ms``: ``baton run --json TASK`` with the offline model, process start to the first
  lead ``text.delta`` line on stdout (median); target: ``first_token_ms - import_openai_ms`` ≤ 250;
- ``first_token_over_openai_ms``: that difference;
- ``import_openai_loaded_ms``: ``python -c 'import openai'`` up to the import's end, without the
  interpreter's teardown (``os._exit``), which ``import_openai_ms`` includes and a first token
  never waits for (about 85 ms of it on a 2-core machine); ``first_token_over_loaded_openai_ms``:
  the first token less that, baton's whole own cost up to its first token (imports, settings,
  the session's build and its first two lead turns: ``benchmarks/startup.py`` breaks it down);
- ``session_10_subagents_s``: in this process, a session whose lead delegates to 10 sub-agents
  (10 profiles, the offline model, in-process bus and worker), start to ``SessionFinished``
  (median of the runs after the first); ``session_10_subagents_first_s``: the first of them,
  which also pays for the imports and the models' first validation.

The programs it starts read their bytecode from a cache of this run, warmed by one untimed start:
as an installed package does (pip compiles at install). A shell that sets
``PYTHONDONTWRITEBYTECODE`` would otherwise have every start compile baton's own modules (its
dependencies, compiled at install, would not), which grows with the code and is no start-up cost
a user pays; ``--no-bytecode-cache`` measures that way anyway (``bytecode`` in the output says
which).

Run: ``.venv/bin/python benchmarks/session.py [--runs 5] [--smoke]`` (``--smoke``: one run of each,
as CI does, to prove it still works).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio

REPO = Path(__file__).resolve().parents[1]
BATON = str(Path(sys.executable).parent / "baton")


def program_env(media: Path, bytecode: Path | None) -> dict[str, str]:
    """The started programs' environment: no model or baton settings from the shell, and with
    ``bytecode`` a bytecode cache there (None: as the shell has it)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "BATON_"))}
    env["BATON_MEDIA_DIR"] = str(media)
    env["PYTHONUNBUFFERED"] = "1"
    if bytecode is not None:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(bytecode)
    return env


def wall_ms(args: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(args, env=env, cwd=REPO, check=True, stdout=subprocess.DEVNULL)
    return (time.perf_counter() - started) * 1000


def first_token_ms(env: dict[str, str]) -> float:
    """Process start of ``baton run --json`` to its first lead text delta on stdout."""
    started = time.perf_counter()
    proc = subprocess.Popen(
        [BATON, "run", "--json", "paint a fox"],
        env=env,
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    elapsed = float("nan")
    for line in proc.stdout:
        event = json.loads(line)
        if event["type"] == "text.delta" and event["agent"] == "lead":
            elapsed = (time.perf_counter() - started) * 1000
            break
    proc.stdout.close()
    proc.wait(60)
    return elapsed


async def session_subagents(media: Path, count: int) -> float:
    """Seconds for one session whose lead delegates one picture to each of ``count`` sub-agents."""
    from baton.api import Profile, Session, SessionConfig
    from baton.lead import DelegationLimits
    from baton.subagents.tools import builtin_tools

    paint = builtin_tools()["generate_image"]
    # The offline lead sends a sub-task to the agent its verb names ("paint …" → "painter…"), so
    # ten painters would all get the ten tasks. Names no verb matches spread the tasks one each.
    names = [f"artist{i}" for i in range(count)]
    profiles = [
        Profile(
            name=name,
            description=f"Artist number {i}.",
            system_prompt="[baton:subagent] Paint the task, then report.",
            tools=(paint,),
        )
        for i, name in enumerate(names)
    ]
    task = ", ".join(f"paint picture {i}" for i in range(count))
    # Ten sends in one turn is the point here, so the per-turn cap (8 by default) is raised.
    delegation = DelegationLimits(max_sends_per_turn=count, max_new_agents_per_profile=count)
    config = SessionConfig(task=task, profiles=profiles, media_dir=media, delegation=delegation)
    started = time.perf_counter()
    async with Session(config) as session:
        result = await session.run()
    elapsed = time.perf_counter() - started
    assert result.status == "completed", result
    # One picture from each sub-agent: media files are named after the agent that made them.
    painters = sorted(Path(url).name.split("-", 1)[0] for url in result.media_urls)
    assert painters == sorted(names), result.media_urls
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--smoke", action="store_true", help="one run of each, for CI")
    parser.add_argument(
        "--no-bytecode-cache",
        action="store_true",
        help="start the programs as the shell would (PYTHONDONTWRITEBYTECODE included)",
    )
    args = parser.parse_args()
    if args.smoke:
        args.runs = 1
    with tempfile.TemporaryDirectory() as tmp:
        media = Path(tmp) / "media"
        bytecode = None if args.no_bytecode_cache else Path(tmp) / "pycache"
        env = program_env(media, bytecode)
        if bytecode is not None:  # warm the cache: one untimed start of each
            wall_ms([BATON, "--help"], env)
            wall_ms([sys.executable, "-c", "import openai"], env)
            first_token_ms(env)
        runs = range(args.runs)
        cli = statistics.median(wall_ms([BATON, "--help"], env) for _ in runs)
        openai = statistics.median(
            wall_ms([sys.executable, "-c", "import openai"], env) for _ in runs
        )
        loaded = statistics.median(
            wall_ms([sys.executable, "-c", "import openai, os; os._exit(0)"], env) for _ in runs
        )
        token = statistics.median(first_token_ms(env) for _ in runs)
        assert not math.isnan(token), "baton run --json streamed no lead text"
        sessions = [anyio.run(session_subagents, media, 10) for _ in range(args.runs + 1)]
    print(
        json.dumps(
            {
                "cli_startup_ms": round(cli, 1),
                "import_openai_ms": round(openai, 1),
                "first_token_ms": round(token, 1),
                "first_token_over_openai_ms": round(token - openai, 1),
                "import_openai_loaded_ms": round(loaded, 1),
                "first_token_over_loaded_openai_ms": round(token - loaded, 1),
                "session_10_subagents_s": round(statistics.median(sessions[1:]), 3),
                "session_10_subagents_first_s": round(sessions[0], 3),
                "bytecode": "shell" if bytecode is None else "cached",
                "runs": args.runs,
            }
        )
    )


if __name__ == "__main__":
    main()
