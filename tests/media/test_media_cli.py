"""The media setting on the command line: a store that cannot be used stops ``baton run`` and
``baton worker`` at once with one line and exit 2, before any work is done."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.cli.helpers import invoke_baton, run_baton
from tests.support.media import file_path


@pytest.fixture
def without_s3_extra(env: dict[str, str], tmp_path: Path) -> dict[str, str]:
    """An environment where boto3 cannot be imported, as after ``pip install baton-orchestrator``
    without the ``s3`` extra: a ``sitecustomize`` blocks it in every process."""
    blocker = tmp_path / "block"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text("import sys\nsys.modules['boto3'] = None\n")
    return {**env, "PYTHONPATH": os.pathsep.join([str(blocker), env["PYTHONPATH"]])}


def one_line(err: str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


# A worker refuses memory:// first; the store is checked before the bus is opened, so no Redis
# needs to answer at this address.
@pytest.mark.parametrize(
    "command", [["run", "paint a fox"], ["worker", "--bus", "redis://127.0.0.1:9/0"]]
)
@pytest.mark.process
def test_a_bucket_without_the_s3_extra_says_which_extra_to_install(
    without_s3_extra: dict[str, str], command: list[str]
) -> None:
    code, _, err = run_baton(*command, "--media", "s3://pictures/baton", env=without_s3_extra)
    assert code == 2, err
    assert "Traceback" not in err
    line = one_line(err) if command[0] == "run" else err.splitlines()[-1]  # a worker logs too
    assert line.startswith(f"baton {command[0]}: "), line
    hint = "needs the 's3' extra (boto3 is not installed): pip install 'baton-orchestrator[s3]'"
    assert hint in line


def test_a_media_setting_that_names_no_store_is_one_line(env: dict[str, str]) -> None:
    code, _, err = invoke_baton("run", "--media", "gs://pictures", "paint a fox", env=env)
    assert code == 2, err
    assert one_line(err).startswith("baton run: bad setting --media: Value error, media 'gs://")


def test_a_directory_media_setting_is_where_the_pictures_go(
    env: dict[str, str], tmp_path: Path
) -> None:
    code, out, err = invoke_baton(
        "run", "--json", "--media", str(tmp_path / "pictures"), "paint a fox", env=env
    )
    assert code == 0, err
    finished = json.loads(out.splitlines()[-1])
    assert finished["status"] == "completed"
    (url,) = finished["media_urls"]  # kept by the lead: inside its media root, the same folder
    assert file_path(url).parent.parent == (tmp_path / "pictures").resolve()
    assert file_path(url).name.startswith("painter-") and file_path(url).suffix == ".png"
    assert not (tmp_path / "media").exists()  # BATON_MEDIA_DIR gave way to --media
