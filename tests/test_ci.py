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


def test_ci_runs_the_gates_after_the_tests() -> None:
    lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    tests = next(i for i, line in enumerate(lines) if ".venv/bin/pytest" in line)
    assert ".ci/check" in lines[tests + 1 :]


def test_every_benchmark_has_a_smoke_run_in_the_gates() -> None:
    check = (ROOT / ".ci" / "check").read_text()
    match = re.search(r"for bench in ([\w ]+); do", check)
    assert match, ".ci/check lost its benchmark loop"
    assert '"benchmarks/$bench.py" --smoke' in check
    benchmarks = sorted(path.stem for path in (ROOT / "benchmarks").glob("*.py"))
    assert sorted(match.group(1).split()) == benchmarks


def test_ci_fails_a_test_run_that_writes_into_the_checkout() -> None:
    lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    tests = next(i for i, line in enumerate(lines) if ".venv/bin/pytest" in line)
    assert "before=$(checkout)" in lines[:tests]
    assert any(line.startswith('if ! diff <(echo "$before") <(checkout)') for line in lines[tests:])
