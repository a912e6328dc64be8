"""Every part of the bus has its contract module here, and every test in it runs on both backends
(``make_bus``: the memory bus and a real ``redis-server``, which fails the run, never skips it,
when it cannot start)."""

from __future__ import annotations

import inspect
import re
from abc import ABC
from pathlib import Path

import baton.bus.parts as parts

HERE = Path(__file__).parent
MODULES = {
    "Inboxes": "inboxes",
    "EventLog": "log",
    "Spawns": "spawns",
    "Claims": "claims",
    "Workers": "workers",
    "Records": "records",
    "Budget": "budget",
    "Retention": "retention",
    "SessionStore": "store",
    "DeadLetters": "dead_letters",
}
"""Each part's contract module: ``test_<module>.py``."""


def test_every_part_has_a_contract_module_whose_tests_take_both_backends() -> None:
    interfaces = {
        name
        for name in parts.__all__
        if inspect.isclass(cls := getattr(parts, name)) and issubclass(cls, ABC)
    }
    assert interfaces == set(MODULES)  # a new part gets its line here, and its module
    for module in MODULES.values():
        text = (HERE / f"test_{module}.py").read_text(encoding="utf-8")
        tests = re.findall(r"^(?:async )?def (test_\w+)\((.*?)\)", text, re.M | re.S)
        assert tests, module
        assert all("make_bus" in arguments for _, arguments in tests), module
