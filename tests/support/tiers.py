"""The test tiers, kept honest: a test that starts a Python program must say so.

The markers (registered in ``pyproject.toml``) let a developer leave out what is slow:
``pytest -m "not process and not stress and not browser"`` runs in about a minute, the full run
(CI's) runs everything. A marker nobody checks drifts, so this plugin watches every process the
test run starts (Python's ``subprocess.Popen`` audit event, which ``asyncio`` and ``anyio``
subprocesses raise too) and fails a test, at its teardown, that started

- a Python program (``python``, or a console script of this environment such as ``baton``,
  ``moto_server``, an MCP server): a second or more of imports each, so ``process``;
- a browser (Chromium, Playwright's driver): ``browser``;

without the marker. Native programs that start in milliseconds (``redis-server``, ``redis-cli``,
``openssl``, ``git``) need none. Tests that use a fixture which starts such a program
(``PROCESS_FIXTURES``) are marked here at collection, so a module need not repeat it.

Long tests run first: with ``pytest-xdist`` the workers take them while the short ones fill the
gaps, instead of one worker finishing a long test alone at the end.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

PROCESS_FIXTURES = frozenset({"start", "s3_server"})
"""Fixtures that start a Python program: every test using one is a ``process`` test."""

SLOW_MARKS = ("stress", "process", "browser")
"""Scheduled first, in this order (the longest kinds first)."""

_BIN = Path(sys.executable).parent
_current: pytest.Item | None = None
_started: dict[str, list[str]] = {}


def _needs(program: str) -> str | None:
    """The marker a test that starts ``program`` needs, or None for a quick native program."""
    path = Path(program)
    name = path.name.lower()
    if "chrom" in name or name in {"node", "playwright.sh"}:
        return "browser"
    if name.startswith("python") or path.parent == _BIN:
        return "process"
    return None


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if event != "subprocess.Popen":
        return
    item = _current
    if item is None:
        return
    executable = os.fsdecode(args[0])
    needed = _needs(executable)
    if needed is not None and item.get_closest_marker(needed) is None:
        argv = args[1]
        shown = argv if isinstance(argv, str | bytes) else " ".join(map(os.fsdecode, argv))
        _started.setdefault(item.nodeid, []).append(f"{needed}: {shown!s:.200}")


sys.addaudithook(_audit)  # an audit hook cannot be removed: it is idle outside a test


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if PROCESS_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.process)

    def rank(item: pytest.Item) -> int:
        return next(
            (i for i, mark in enumerate(SLOW_MARKS) if item.get_closest_marker(mark)),
            len(SLOW_MARKS),
        )

    if os.environ.get("PYTEST_XDIST_WORKER"):  # only spread over workers: a serial run keeps
        items.sort(key=rank)  # the files' order (stable: within a rank, too)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None]:
    global _current
    _current = item
    return (yield)


@pytest.hookimpl(wrapper=True, trylast=True)
def pytest_runtest_teardown(item: pytest.Item) -> Generator[None]:
    global _current
    try:
        result = yield
    finally:
        _current = None
        unmarked = _started.pop(item.nodeid, [])
    if unmarked:
        kinds = sorted({line.split(":", 1)[0] for line in unmarked})
        pytest.fail(
            f"{item.nodeid} started what its tier leaves out; mark it "
            + " and ".join(f"@pytest.mark.{kind}" for kind in kinds)
            + " (or give it a fixture that is):\n  "
            + "\n  ".join(unmarked),
            pytrace=False,
        )
    return result
