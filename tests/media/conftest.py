"""Fixtures of the media tests: one real S3-compatible server (moto's) for the whole run, a bucket
of its own per test, and this process's ``AWS_*`` variables pointed at it."""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator

import pytest

from baton.testing import S3Server
from tests.cli.conftest import env, profiles_file, redis_url, start

__all__ = ["env", "profiles_file", "redis_url", "start"]  # the CLI tests' fixtures, shared

_buckets = itertools.count(1)


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    with S3Server() as server:
        yield server


@pytest.fixture
def aws_env(s3_server: S3Server, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The ``AWS_*`` variables that reach the test server, set here (none of the shell's own)."""
    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)
    variables = s3_server.env()
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    return variables


@pytest.fixture
def bucket(s3_server: S3Server, aws_env: dict[str, str]) -> str:
    name = f"media-{os.getpid()}-{next(_buckets)}"
    s3_server.create_bucket(name)
    return name
