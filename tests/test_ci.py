"""CI must run exactly the test command the README gives a newcomer."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_ci_runs_the_readme_test_command() -> None:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Run the tests", 1)[1]
    match = re.search(r"```sh\n(.+?)\n```", section, re.DOTALL)
    assert match, "the README lost its test command"
    command = match.group(1).strip()
    ci_lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert command in ci_lines
