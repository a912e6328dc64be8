"""The S3-compatible store against a real S3-compatible server (moto's, on loopback): objects under
the prefix with their content type, presigned URLs a plain GET opens, public URLs when the bucket
is public, and errors that say which bucket."""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import urlsplit

import httpx2
import pytest

from baton.bus.errors import ConfigError
from baton.lead.media import media_problem, media_root
from baton.media import MediaError, MediaStore, open_store
from baton.media.s3 import S3Store
from baton.subagents.png import PNG_SIGNATURE, picture_for
from baton.testing import S3Server

PNG = picture_for("a heron")


async def fetch(url: str) -> httpx2.Response:
    async with httpx2.AsyncClient() as client:
        return await client.get(url)


async def test_a_put_returns_a_presigned_url_anyone_can_get(bucket: str) -> None:
    store = open_store(f"s3://{bucket}/runs/today")
    assert isinstance(store, S3Store) and isinstance(store, MediaStore)
    url = await store.put(PNG, "s-1/painter-abc.png", "image/png")
    parts = urlsplit(url)
    assert parts.scheme == "http" and parts.netloc.startswith("127.0.0.1:")
    assert parts.path == f"/{bucket}/runs/today/s-1/painter-abc.png"
    assert "X-Amz-Signature=" in parts.query and "X-Amz-Expires=604800" in parts.query
    response = await fetch(url)  # no credentials: the signature in the URL is the permission
    assert response.status_code == 200
    assert response.content == PNG and response.content.startswith(PNG_SIGNATURE)
    assert response.headers["content-type"] == "image/png"
    assert media_problem(url, media_root(Path("media"))) is None  # the lead keeps it


async def test_the_object_is_under_the_prefix_with_its_content_type(
    bucket: str, s3_server: S3Server
) -> None:
    store = S3Store(bucket, "/p/")
    await store.put(b"hello\n", "s/note.txt", "text/plain; charset=utf-8")
    head = store.client().head_object(Bucket=bucket, Key="p/s/note.txt")
    assert head["ContentType"] == "text/plain; charset=utf-8"
    assert head["ContentLength"] == 6


async def test_the_expiry_setting_reaches_the_url(bucket: str) -> None:
    url = await open_store(f"s3://{bucket}", url_expiry_s=120).put(PNG, "s/a.png", "image/png")
    assert "X-Amz-Expires=120" in url
    assert (await fetch(url)).content == PNG


async def test_a_public_bucket_gets_plain_urls_under_its_base(
    bucket: str, s3_server: S3Server
) -> None:
    store = open_store(f"s3://{bucket}/pub", base_url=f"{s3_server.endpoint}/{bucket}/")
    assert isinstance(store, S3Store)
    private = await store.put(PNG, "s/private.png", "image/png")
    assert (await fetch(private)).status_code == 403  # the server checks: not public yet
    public_read = {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Principal": "*", "Action": "s3:GetObject",
                       "Resource": f"arn:aws:s3:::{bucket}/*"}],
    }  # fmt: skip
    store.client().put_bucket_policy(Bucket=bucket, Policy=json.dumps(public_read))
    url = await store.put(PNG, "s/a-fox.png", "image/png")
    assert url == f"{s3_server.endpoint}/{bucket}/pub/s/a-fox.png"  # no signature
    response = await fetch(url)
    assert response.status_code == 200 and response.content == PNG


async def test_a_missing_bucket_fails_the_put_naming_it(aws_env: dict[str, str]) -> None:
    store = open_store("s3://no-such-bucket/x")
    with pytest.raises(MediaError, match=r"s3://no-such-bucket/x/s/a\.png.*NoSuchBucket"):
        await store.put(PNG, "s/a.png", "image/png")


async def test_an_unreachable_store_fails_the_put_not_the_caller(
    aws_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from baton.testing import free_port

    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{free_port()}")
    with pytest.raises(MediaError, match=re.escape("cannot store s/a.png at s3://b-1/s/a.png")):
        await open_store("s3://b-1").put(PNG, "s/a.png", "image/png")


async def test_a_bad_name_is_refused_before_any_request(aws_env: dict[str, str]) -> None:
    with pytest.raises(MediaError, match="media name"):
        await open_store("s3://b-1/p").put(PNG, "../a.png", "image/png")


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("s3://", "name a bucket"),
        ("s3://bkt/../x", "media prefix"),
        ("s3://b?x=1", "no ?query"),
        ("s3://a/p", "not a bucket name"),
        ("gs://bucket/p", "use a directory, file:///path or s3://bucket/prefix"),
        ("file://host/x", "must name this machine"),
    ],
)
def test_a_setting_that_names_no_store_is_a_config_error(value: str, message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        open_store(value)


def test_presigned_urls_last_at_most_seven_days() -> None:
    with pytest.raises(ConfigError, match="1 s to 7 days"):
        open_store("s3://bucket", url_expiry_s=8 * 24 * 3600)
