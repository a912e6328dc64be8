"""Media that travel: ``baton`` processes with ``BATON_MEDIA=s3://bucket/prefix`` and
``AWS_ENDPOINT_URL`` at a real S3-compatible server on loopback (moto's) put their pictures in the
bucket and hand on http URLs that the lead, and a plain GET from anyone, can open — PNGs.

Each process runs in a working directory of its own, as on separate machines: nothing is shared
but the bus and the bucket, and no process writes a picture to its own disk.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx2

from baton.llm import ScriptedServer
from baton.llm.offline import offline_reply
from baton.llm.scripted_images import ScriptedImages, tiny_png
from baton.subagents.png import PNG_SIGNATURE
from baton.testing import S3Server
from tests.cli.helpers import BATON, TIMEOUT_S, Proc, clean_env

PREFIX = "team/runs"


def s3_env(tmp_path: Path, s3_server: S3Server, bucket: str, **extra: str) -> dict[str, str]:
    return clean_env(tmp_path, **s3_server.env(), BATON_MEDIA=f"s3://{bucket}/{PREFIX}", **extra)


def folder(tmp_path: Path, name: str) -> Path:
    path = tmp_path / name
    path.mkdir()
    return path


def get_all(urls: list[str]) -> list[httpx2.Response]:
    with httpx2.Client() as client:  # anyone: no credentials, no baton
        return [client.get(url) for url in urls]


def assert_pngs_in_the_bucket(urls: list[str], bucket: str, session: str, count: int) -> None:
    assert len(urls) == count, urls
    for url in urls:
        parts = urlsplit(url)
        assert parts.scheme == "http" and parts.hostname == "127.0.0.1", url
        assert parts.path.startswith(f"/{bucket}/{PREFIX}/{session}/"), url
        assert parts.path.endswith(".png") and "X-Amz-Signature=" in parts.query, url
    for response in get_all(urls):
        assert response.status_code == 200
        assert response.headers["content-type"] == "image/png"
        assert response.content.startswith(PNG_SIGNATURE)


def no_pictures_under(*directories: Path) -> None:
    for directory in directories:
        if directory.exists():
            assert [p for p in directory.rglob("*") if p.is_file()] == [], directory


def run_in(here: Path, *args: str, env: dict[str, str]) -> tuple[int, str, str]:
    """``baton ARGS`` run to its end in the folder ``here``: (exit code, stdout, stderr)."""
    done = subprocess.run(
        [BATON, *args], cwd=here, env=env, stdin=subprocess.DEVNULL, capture_output=True,
        text=True, timeout=TIMEOUT_S,
    )  # fmt: skip
    return done.returncode, done.stdout, done.stderr


def finished_of(out: str) -> dict[str, Any]:
    import json

    finished: dict[str, Any] = json.loads(out.splitlines()[-1])
    assert finished["type"] == "session.finished", out[-2000:]
    return finished


def test_an_offline_run_paints_into_the_bucket(
    tmp_path: Path, s3_server: S3Server, bucket: str
) -> None:
    here = folder(tmp_path, "lead")
    code, out, err = run_in(
        here, "run", "--json", "--session", "s-fox-heron", "paint a fox and paint a heron",
        env=s3_env(here, s3_server, bucket),
    )  # fmt: skip
    assert code == 0, err
    finished = finished_of(out)
    assert finished["status"] == "completed"
    assert_pngs_in_the_bucket(finished["media_urls"], bucket, "s-fox-heron", 2)
    for url in finished["media_urls"]:
        assert url in finished["answer"]  # the lead took them: http URLs pass its media check
    no_pictures_under(here)


def test_workers_on_other_machines_return_urls_the_lead_and_anyone_can_open(
    tmp_path: Path,
    s3_server: S3Server,
    bucket: str,
    redis_url: str,
    start: Callable[..., Proc],
) -> None:
    illustrators, sketchers, lead = (folder(tmp_path, n) for n in ("a", "b", "lead"))
    (lead / "artists.toml").write_text(DRAWERS)
    hosts: dict[str, str] = {}
    for profile, home in (("illustrator", illustrators), ("sketcher", sketchers)):
        # Each worker knows one of the two profiles (no built-in has either), so each agent
        # lands on its own worker, in its own folder: two machines.
        (home / "profiles.toml").write_text(profile_block(profile))
        worker = start(
            "worker", "--bus", redis_url, "--profiles", "profiles.toml", "--lease", "5",
            env=s3_env(home, s3_server, bucket), cwd=home,
        )  # fmt: skip
        line = worker.expect(" ready: ", stream="err")
        hosts[profile] = line.split("baton worker ", 1)[1].split()[0]
    run = start(
        "run", "--json", "--bus", redis_url, "--no-local-workers", "--session", "s-remote",
        "--profiles", "artists.toml", "--profile", "illustrator", "--profile", "sketcher",
        "illustrate a fox and sketch a heron",
        env=s3_env(lead, s3_server, bucket), cwd=lead,
    )  # fmt: skip
    assert run.wait() == 0, run.transcript()
    events = run.events()
    spawned = {e["agent"]: e["worker"].split("/")[0] for e in events
               if e["type"] == "agent.claimed"}  # fmt: skip
    assert spawned == hosts  # one agent on each worker
    finished = events[-1]
    assert finished["type"] == "session.finished" and finished["status"] == "completed"
    assert_pngs_in_the_bucket(finished["media_urls"], bucket, "s-remote", 2)
    results = {e["agent"]: e["media_urls"] for e in events if e["type"] == "agent.result"}
    assert sorted(url for urls in results.values() for url in urls) == sorted(
        finished["media_urls"]
    )
    no_pictures_under(illustrators / "media", sketchers / "media", lead / "media")


DRAWERS = "".join(
    f"""
[profiles.{name}]
description = "Makes {kind} from a description and returns the image URLs."
system_prompt = "[baton:subagent] {verb} the task with generate_image, then report."
tools = ["generate_image"]
"""
    for name, verb, kind in (
        ("illustrator", "Illustrate", "pictures"),
        ("sketcher", "Sketch", "sketches"),
    )
)
"""Two profiles that make pictures, neither of them built in."""


def profile_block(name: str) -> str:
    (block,) = [b for b in DRAWERS.split("\n[profiles.") if b.startswith(f"{name}]")]
    return "\n[profiles." + block


async def test_with_a_model_endpoint_the_images_api_draws_into_the_bucket(
    tmp_path: Path, s3_server: S3Server, bucket: str
) -> None:
    here = folder(tmp_path, "lead")
    drawn = tiny_png((10, 200, 90))
    server = ScriptedServer(
        responder=offline_reply,  # the offline model's conversation, over the real client
        images=ScriptedImages(painter=lambda prompt: drawn, response_format="url"),
        record=True,
    )
    async with server.serve() as http:
        env = s3_env(
            here, s3_server, bucket,
            OPENAI_API_KEY="sk-test", OPENAI_BASE_URL=http.base_url, BATON_IMAGE_MODEL="img-test",
        )  # fmt: skip
        done = await anyio.run_process(
            [BATON, "run", "--json", "--session", "s-real", "paint a fox and paint a heron"],
            env=env, cwd=here, check=False,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()
    finished = finished_of(done.stdout.decode())
    assert finished["status"] == "completed"
    assert_pngs_in_the_bucket(finished["media_urls"], bucket, "s-real", 2)
    assert {r.content for r in get_all(finished["media_urls"])} == {drawn}  # the API's picture
    asked = [r.body for r in server.requests if r.path.endswith("/images/generations")]
    assert len(asked) == 2 and server.images.prompts == [body["prompt"] for body in asked]
    assert any("fox" in body["prompt"] for body in asked), asked
    assert any("heron" in body["prompt"] for body in asked), asked
    assert {body["model"] for body in asked} == {"img-test"}
    assert len([r for r in server.requests if r.method == "GET"]) == 2  # url answers fetched
    no_pictures_under(here)
