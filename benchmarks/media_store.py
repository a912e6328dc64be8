"""What a media ``put`` costs: a 50 KB PNG stored through the directory store (a local folder)
and through the S3-compatible store (a real S3-compatible server on loopback: moto's, started
here in a process of its own), each put awaited one after another, as a tool does.

Prints one JSON object: ``png_bytes``, and per store (``directory``, ``s3``) ``puts``,
``median_ms``, ``p90_ms`` and ``max_ms`` of the put alone (the first puts, which make the client
and the folder, are warm-up and not counted), ``first_put_ms`` (that cold start: the boto3 client
is made on the first put), and ``url_scheme``; ``s3_over_directory`` is the ratio of the medians.
Every URL returned is checked to read back the same bytes (a plain HTTP GET for the bucket).

What the numbers are not: moto is a Python server, so the S3 figures are an HTTP round trip to a
slow store on the same machine, not AWS's latency; they bound what the client and the thread
hand-off cost baton (a real store adds its network round trip).

Run: ``.venv/bin/python benchmarks/media_store.py [--puts 200]``; ``--smoke`` (20 puts) runs in
seconds, as CI does, and asserts the same checks.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit
from urllib.request import url2pathname

import anyio
import httpx2

from baton.media import MediaStore, open_store
from baton.subagents.png import encode_png
from baton.testing import S3Server

SIZE = 130
"""A 130x130 picture of noise: ~50 KB as a PNG (noise does not compress)."""
WARMUP = 5


def png_of_50kb() -> bytes:
    rows = [os.urandom(3 * SIZE) for _ in range(SIZE)]
    return encode_png(SIZE, SIZE, rows)


async def measure(store: MediaStore, data: bytes, puts: int, label: str) -> dict[str, Any]:
    started = time.perf_counter()
    url = await store.put(data, f"bench/{label}-0.png", "image/png")
    first = time.perf_counter() - started
    for number in range(1, WARMUP):
        await store.put(data, f"bench/{label}-{number}.png", "image/png")
    times, urls = [], []
    for number in range(puts):
        started = time.perf_counter()
        urls.append(await store.put(data, f"bench/{label}-w{number}.png", "image/png"))
        times.append(time.perf_counter() - started)
    await check([*urls[:: max(1, puts // 10)], url], data)
    ordered = sorted(times)
    return {
        "puts": puts,
        "median_ms": round(statistics.median(times) * 1e3, 3),
        "p90_ms": round(ordered[int(0.9 * (len(ordered) - 1))] * 1e3, 3),
        "max_ms": round(ordered[-1] * 1e3, 3),
        "first_put_ms": round(first * 1e3, 3),
        "url_scheme": urlsplit(url).scheme,
    }


async def check(urls: list[str], data: bytes) -> None:
    async with httpx2.AsyncClient() as client:
        for url in urls:
            if url.startswith("file:"):
                body = await anyio.Path(url2pathname(urlsplit(url).path)).read_bytes()
            else:
                response = await client.get(url)
                assert response.status_code == 200, (url, response.status_code)
                body = response.content
            assert body == data, f"{url} read back {len(body)} bytes, not the {len(data)} put"


async def main(puts: int) -> dict[str, Any]:
    data = png_of_50kb()
    with tempfile.TemporaryDirectory(prefix="baton-media-bench-") as folder, S3Server() as s3:
        os.environ.update(s3.env())  # the store reads the standard AWS_* variables
        s3.create_bucket("bench")
        directory = await measure(open_store(Path(folder) / "media"), data, puts, "dir")
        bucket = await measure(open_store("s3://bench/media"), data, puts, "s3")
    assert directory["url_scheme"] == "file" and bucket["url_scheme"] == "http"
    return {
        "png_bytes": len(data),
        "directory": directory,
        "s3": bucket,
        "s3_over_directory": round(bucket["median_ms"] / max(directory["median_ms"], 1e-6), 1),
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--puts", type=int, default=200, help="measured puts per store")
    parser.add_argument("--smoke", action="store_true", help="20 puts per store, for CI")
    options = parser.parse_args()
    result = anyio.run(main, 20 if options.smoke else options.puts)
    print(json.dumps(result, indent=2))
