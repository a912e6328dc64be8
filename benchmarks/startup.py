"""Where ``baton run``'s start-up goes, up to the lead's first token: what it imports and builds.

``benchmarks/session.py`` says how long the first token takes; this says what that time is made
of, so a change to start-up can be aimed and checked. Each run is a fresh interpreter that imports
``openai`` first (the floor every model-talking program pays), then runs ``baton run --json TASK``
with the offline model in the same process until the lead's first ``text.delta``. Prints one JSON
object (medians over the runs):

- ``first_token_ms``: from after ``import openai`` to the lead's first text delta;
- ``import_ms``: the part of it spent importing (every module first imported in that span);
- ``modules`` / ``baton_modules``: how many modules that span imported, and how many are baton's;
- ``dataclasses`` / ``dataclasses_ms``: baton's dataclasses made in that span, and the time their
  decorator took (on Python 3.11 it compiles each generated method on its own: ``__init__``,
  ``__repr__``, ``__eq__``, and a frozen class's ``__hash__``, ``__setattr__``, ``__delattr__``);
- ``models`` / ``models_ms``: baton's pydantic models made in that span, and their class
  creation time (fields collected, annotations evaluated, the schema built unless deferred);
- ``other_import_ms``: ``import_ms`` less those two (finding, reading and running the modules'
  code, regular expressions compiled at import, typing's generics);
- ``run_ms``: ``first_token_ms - import_ms`` (settings, the session's build, two lead turns and a
  sub-agent's start, schemas built on first use).

The timers only wrap the two class factories (``dataclasses``' and pydantic's metaclass) to
read a clock around them; nothing is changed or skipped. Bytecode comes from a cache of this
run warmed by one untimed start, as ``benchmarks/session.py`` does.

Run: ``.venv/bin/python benchmarks/startup.py [--runs 5] [--smoke]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from session import program_env

REPO = Path(__file__).resolve().parents[1]
TASK = "paint a fox"

CHILD = r"""
import json, os, sys, time
import openai  # the floor, not counted
import dataclasses
import pydantic._internal._model_construction as construction

spent = {"dataclasses": 0.0, "models": 0.0, "imports": 0.0}
counts = {"dataclasses": 0, "models": 0}
before = set(sys.modules)


def timed(kind, make):
    def wrapper(*args, **kwargs):
        started = time.perf_counter()
        made = make(*args, **kwargs)
        if isinstance(made, type) and made.__module__.startswith("baton"):
            spent[kind] += time.perf_counter() - started
            counts[kind] += 1
        return made
    return wrapper


dataclasses._process_class = timed("dataclasses", dataclasses._process_class)
construction.ModelMetaclass.__new__ = timed("models", construction.ModelMetaclass.__new__)

import builtins
real_import = builtins.__import__
depth = 0


def counting_import(*args, **kwargs):
    global depth
    if depth:
        return real_import(*args, **kwargs)
    depth += 1
    started = time.perf_counter()
    try:
        return real_import(*args, **kwargs)
    finally:
        spent["imports"] += time.perf_counter() - started
        depth -= 1


builtins.__import__ = counting_import
started = time.perf_counter()


class FirstToken:
    def __init__(self):
        self.pending = ""

    def write(self, text):
        self.pending += text
        while "\n" in self.pending:
            line, self.pending = self.pending.split("\n", 1)
            event = json.loads(line)
            if event["type"] == "text.delta" and event["agent"] == "lead":
                elapsed = time.perf_counter() - started
                new = set(sys.modules) - before
                report = {
                    "first_token_ms": elapsed * 1000,
                    "import_ms": spent["imports"] * 1000,
                    "modules": len(new),
                    "baton_modules": sum(1 for name in new if name.startswith("baton")),
                    "dataclasses": counts["dataclasses"],
                    "dataclasses_ms": spent["dataclasses"] * 1000,
                    "models": counts["models"],
                    "models_ms": spent["models"] * 1000,
                }
                sys.__stderr__.write("STARTUP " + json.dumps(report) + "\n")
                sys.__stderr__.flush()
                os._exit(0)
        return len(text)

    def flush(self):
        pass


sys.stdout = FirstToken()
sys.argv = ["baton", "run", "--json", TASK]
from baton.cli import main

main()
sys.__stderr__.write("no lead text\n")
os._exit(1)
"""


def one_run(env: dict[str, str]) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-c", CHILD.replace("TASK", repr(TASK))],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = [line for line in done.stderr.splitlines() if line.startswith("STARTUP ")]
    assert done.returncode == 0 and lines, done.stderr[-2000:]
    report: dict[str, float] = json.loads(lines[-1].removeprefix("STARTUP "))
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--smoke", action="store_true", help="one run, for CI")
    args = parser.parse_args()
    runs = 1 if args.smoke else args.runs
    with tempfile.TemporaryDirectory() as tmp:
        env = program_env(Path(tmp) / "media", Path(tmp) / "pycache")  # as session.py starts them
        one_run(env)  # warms the bytecode cache
        reports = [one_run(env) for _ in range(runs)]
    result = {key: round(statistics.median(r[key] for r in reports), 1) for key in reports[0]}
    result["other_import_ms"] = round(
        result["import_ms"] - result["dataclasses_ms"] - result["models_ms"], 1
    )
    result["run_ms"] = round(result["first_token_ms"] - result["import_ms"], 1)
    assert result["baton_modules"] > 0 and result["import_ms"] <= result["first_token_ms"], result
    result["runs"] = runs
    print(json.dumps(result))


if __name__ == "__main__":
    main()
