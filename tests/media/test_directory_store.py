"""The directory store: files under the media root, ``file://`` URLs the lead keeps, or http ones
where ``baton serve`` serves the folder; names that cannot climb out."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote, urlsplit

import anyio
import pytest

from baton.lead.media import media_problem, media_root
from baton.media import DirectoryStore, MediaError, MediaStore, open_store
from baton.server.media import resolve_media
from baton.subagents.png import picture_for
from tests.support.media import file_path

PNG = picture_for("a fox")


async def test_put_writes_the_file_and_its_url_is_one_the_lead_keeps(tmp_path: Path) -> None:
    store = DirectoryStore(tmp_path / "media")
    assert isinstance(store, MediaStore)
    url = await store.put(PNG, "s-1/painter-abc.png", "image/png")
    assert url.startswith("file:///")
    path = file_path(url)
    assert path == (tmp_path / "media" / "s-1" / "painter-abc.png").resolve()
    assert path.read_bytes() == PNG
    assert media_problem(url, media_root(tmp_path / "media")) is None
    assert media_problem(url, media_root(tmp_path / "elsewhere")) is not None
    assert [p.name for p in path.parent.iterdir()] == ["painter-abc.png"]  # no .part left


async def test_a_second_put_replaces_the_file_whole(tmp_path: Path) -> None:
    store = DirectoryStore(tmp_path)
    first = await store.put(b"one", "s/a.txt", "text/plain")
    second = await store.put(b"two", "s/a.txt", "text/plain")
    assert first == second and file_path(second).read_bytes() == b"two"


async def test_many_puts_of_one_name_at_once_leave_one_whole_file(tmp_path: Path) -> None:
    store = DirectoryStore(tmp_path)
    bodies = [bytes([i]) * 4096 for i in range(20)]
    async with anyio.create_task_group() as group:
        for body in bodies:
            group.start_soon(store.put, body, "s/same.bin", "application/octet-stream")
    assert (tmp_path / "s" / "same.bin").read_bytes() in bodies
    assert sorted(p.name for p in (tmp_path / "s").iterdir()) == ["same.bin"]


@pytest.mark.parametrize(
    "name",
    ["../escape.png", "s/../../escape.png", "/etc/passwd", "s//a.png", ".hidden", "s/.a.png",
     "s\\a.png", "", "s/a b.png", "s/a\x00.png", "a" * 1025],
)  # fmt: skip
async def test_a_name_that_could_leave_the_root_is_refused(tmp_path: Path, name: str) -> None:
    store = DirectoryStore(tmp_path / "media")
    with pytest.raises(MediaError, match="media name"):
        await store.put(PNG, name, "image/png")
    assert not (tmp_path / "media").exists() or not any((tmp_path / "media").rglob("*"))
    assert not (tmp_path / "escape.png").exists()


async def test_a_link_out_of_the_root_is_not_written_through(tmp_path: Path) -> None:
    root, outside = tmp_path / "media", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (root / "s").symlink_to(outside)
    with pytest.raises(MediaError, match="leads out of the media root"):
        await DirectoryStore(root).put(PNG, "s/a.png", "image/png")
    assert list(outside.iterdir()) == []


async def test_with_a_base_url_the_urls_are_where_baton_serve_serves_the_file(
    tmp_path: Path,
) -> None:
    store = open_store(tmp_path / "media", base_url="http://media.example:8321/media/")
    url = await store.put(PNG, "s-1/painter-abc.png", "image/png")
    assert url == "http://media.example:8321/media/s-1/painter-abc.png"
    assert media_problem(url, media_root(tmp_path / "media")) is None  # http passes as it is
    relative = unquote(urlsplit(url).path).removeprefix("/media/")
    served = resolve_media((tmp_path / "media").resolve(), relative)  # GET /media/{path}
    assert served is not None and served.read_bytes() == PNG


async def test_a_store_that_cannot_write_says_where(tmp_path: Path) -> None:
    (tmp_path / "media").write_text("a file, not a folder")
    with pytest.raises(MediaError, match=r"cannot store s/a\.png under .*media"):
        await DirectoryStore(tmp_path / "media").put(PNG, "s/a.png", "image/png")
