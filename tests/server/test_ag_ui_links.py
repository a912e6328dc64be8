"""``file://`` URLs as an AG-UI client gets them (baton.server.ag_ui.links): a file of the media
directory as the server's URL of it, any other as a marker naming no path, and where a text
streamed in pieces may still be inside one."""

from __future__ import annotations

import json

from baton.server.ag_ui.links import MARKER, Links, comparable, ready


def served(url: str) -> str:
    return url.replace("file:///m/", "http://h/media/", 1) + (
        "?token=s~abc" if "/m/" in url else ""
    )


def test_a_media_file_becomes_its_served_url_and_any_other_file_a_marker() -> None:
    links = Links(served)
    text = "See file:///m/s/a.png. And (file:///etc/passwd), https://x/y.png, FILE:///etc/x"
    assert links.text(text) == (
        f"See http://h/media/s/a.png?token=s~abc. And ({MARKER}), https://x/y.png, {MARKER}"
    )
    assert links.url("file:///srv/other.png") == MARKER
    assert links.url("https://bucket/x.png") == "https://bucket/x.png"


def test_frames_are_rewritten_inside_their_json_and_stay_json() -> None:
    links = Links(served)
    event = {"content": 'media: file:///m/s/a.png\nand "file:///home/me/x.png"', "n": 1}
    frame = f"data: {json.dumps(event)}\n\n".encode()
    rewritten = links.wire(frame)
    assert b"file://" not in rewritten
    value = json.loads(rewritten.decode().removeprefix("data: "))
    assert value["content"] == (f'media: http://h/media/s/a.png?token=s~abc\nand "{MARKER}"')
    assert links.wire(b"data: {}\n\n") == b"data: {}\n\n"


def test_a_piece_of_text_keeps_back_a_url_that_may_go_on() -> None:
    assert ready("done: file:///m/s/a") == len("done: ")
    assert ready("done: file:///m/s/a.png ") == len("done: file:///m/s/a.png ")
    assert ready("see fi") == len("see ")
    assert ready("see file:/") == len("see ")
    assert ready("plain text") == len("plain text")
    assert ready("") == 0


def test_links_compare_without_their_read_tokens() -> None:
    held = '{"url": "http://h/media/s/a.png?token=s~old"}'
    assert comparable(held) == comparable('{"url": "http://h/media/s/a.png?token=s~new"}')
    assert comparable(held) != comparable('{"url": "http://h/media/s/b.png?token=s~old"}')
