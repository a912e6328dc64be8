"""Helpers of the AG-UI tests: the one Node process a test file runs (the real @ag-ui/client,
``tests/clients/ag-ui/cases.mjs``), the servers it talks to, and readers of what it saw."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
from ag_ui.core import Event
from pydantic import TypeAdapter

from baton.session.compose import resolve_profiles
from baton.subagents.profiles import Profile, load_profiles
from tests.support.node import client, node
from tests.support.profiles import SURVEYORS

NODE_TIMEOUT_S = 100.0
DOCS = Path(__file__).resolve().parents[2] / "docs" / "ag-ui.md"
EVENTS: TypeAdapter[Event] = TypeAdapter(Event)
Json = dict[str, Any]


def run_cases(settings: Json) -> Json:
    """Run ``cases.mjs`` once with ``settings``; what it printed, parsed. The client is made
    ready first (:func:`tests.support.node.client`): installed once, outside the checkout."""
    folder = client("ag-ui")
    done = subprocess.run(
        [node(), str(folder / "cases.mjs")],
        input=json.dumps({"docs": str(DOCS), **settings}),
        capture_output=True,
        text=True,
        timeout=NODE_TIMEOUT_S,
        cwd=folder,
    )
    assert done.returncode == 0, (
        f"node failed ({done.returncode}):\n{done.stderr[-4000:]}\n{done.stdout[-2000:]}"
    )
    try:
        results: Json = json.loads(done.stdout)
    except ValueError:
        pytest.fail(f"node printed no JSON:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return results


def profiles(tmp: Path) -> dict[str, Profile]:
    """The built-in demo profiles (painter, publisher, reviewer...) and the surveyors, whose
    ``hold`` works until a release file appears and ``ponder`` for minutes."""
    path = tmp / "surveyors.toml"
    path.write_text(SURVEYORS)
    return {**resolve_profiles(None), **load_profiles(path)}


def case(results: Json, name: str) -> Json:
    found = results[name]
    assert "crashed" not in found, found.get("crashed")
    assert isinstance(found, dict)
    return found


def types(run: Json) -> list[str]:
    return [event["type"] for event in run["events"]]


def of_type(run: Json, kind: str) -> list[Json]:
    return [event for event in run["events"] if event["type"] == kind]


def terminal(run: Json) -> Json:
    event: Json = run["events"][-1]
    return event


def every_event(value: object) -> Iterator[Json]:
    """Every AG-UI event anywhere in the client's results (verified events and raw frames)."""
    if isinstance(value, dict):
        if isinstance(value.get("events"), list):
            yield from value["events"]
        if isinstance(value.get("frames"), list):
            yield from (frame["event"] for frame in value["frames"])
        if isinstance(value.get("received"), list):
            yield from (frame["event"] for frame in value["received"])
        for key, item in value.items():
            if key not in ("events", "frames", "received"):
                yield from every_event(item)
    elif isinstance(value, list):
        for item in value:
            yield from every_event(item)


def parse_all(events: Iterable[Json]) -> int:
    """Parse each as an ``ag_ui.core`` 1.0 event; how many there were."""
    count = 0
    for event in events:
        EVENTS.validate_python(event)
        count += 1
    return count
