"""The in-process runner of the CLI tests (:func:`tests.cli.helpers.invoke_baton`) reads as the
console script would: what a process prints on stderr, it returns in stderr.

A test of "exactly one line on stderr, never a traceback" moved in-process is only as honest as
this: a crash must come back as a traceback, and a warning a library logs (which a fresh
interpreter prints on stderr through logging's last resort) must not vanish into pytest's own
log capture."""

from __future__ import annotations

import importlib.metadata
import logging
import os

import pytest

from tests.cli.helpers import invoke_baton


def test_a_crash_comes_back_as_a_traceback(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(name: str) -> str:
        raise RuntimeError("a bug, not a user error")

    monkeypatch.setattr(importlib.metadata, "version", broken)
    code, out, err = invoke_baton("version")
    assert code == 1
    assert out == ""
    assert err.startswith("Traceback (most recent call last):")
    assert err.rstrip().endswith("RuntimeError: a bug, not a user error")


def test_a_warning_logged_inside_a_command_reaches_stderr(monkeypatch: pytest.MonkeyPatch) -> None:
    def warns(name: str) -> str:
        logging.getLogger("some.library").warning("something looks off")
        return "1.2.3"

    monkeypatch.setattr(importlib.metadata, "version", warns)
    code, out, err = invoke_baton("version")
    assert (code, out) == (0, "1.2.3\n")
    assert err == "something looks off\n"  # what logging's last resort prints in a new process


def test_the_root_logger_is_given_back(monkeypatch: pytest.MonkeyPatch) -> None:
    root = logging.getLogger()
    before = (root.handlers[:], root.level)
    code, _, _ = invoke_baton("version")
    assert code == 0
    assert (root.handlers, root.level) == before


def test_env_reaches_the_command_and_goes_away_after() -> None:
    code, out, err = invoke_baton("run", "paint a fox", env={"BATON_APPROVE": "sometimes"})
    assert code == 2 and out == ""
    assert err.startswith("baton run: ") and "BATON_APPROVE" in err and err.count("\n") == 1, err
    assert "BATON_APPROVE" not in os.environ
