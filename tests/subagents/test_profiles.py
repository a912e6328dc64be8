"""Profiles from TOML and Python, their error messages, the demo profiles and the PNG encoder."""

from __future__ import annotations

from pathlib import Path

import pytest

from baton.engine import tool
from baton.subagents.errors import ProfileError
from baton.subagents.png import encode_png, picture_for
from baton.subagents.profiles import Profile, builtin_profiles, load_profiles
from tests.subagents.helpers import read_png

GOOD = """
[profiles.painter]
description = "Paints."
system_prompt = "You paint."
tools = ["generate_image", "tests.subagents.slowtools:slow_step"]
model = "gpt-test"

[profiles.painter.limits]
max_steps = 3
idle_timeout_s = 1.5
soft_max_rounds = 2
hard_max_rounds = 4
tool_timeout_s = 9
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "profiles.toml"
    path.write_text(text)
    return path


def test_toml_profile_is_loaded(tmp_path: Path) -> None:
    profiles = load_profiles(write(tmp_path, GOOD))
    painter = profiles["painter"]
    assert painter.tool_names == ("generate_image", "slow_step", "send_message")
    assert painter.model == "gpt-test" and painter.description == "Paints."
    assert painter.limits.max_steps == 3 and painter.limits.idle_timeout_s == 1.5
    loop = painter.limits.loop
    assert (loop.soft_max_rounds, loop.hard_max_rounds, loop.tool_timeout_s) == (2, 4, 9)


@pytest.mark.parametrize(
    ("text", "field", "says"),
    [
        (GOOD.replace('description = "Paints."', ""), "description", "Field required"),
        (GOOD.replace('"generate_image"', '"paint_fast"'), "tools[0]", "unknown tool 'paint_fast'"),
        (GOOD.replace("max_steps = 3", "max_steps = 0"), "limits.max_steps", "greater than"),
        (GOOD.replace("max_steps = 3", "max_stepz = 3"), "limits.max_stepz", "Extra inputs"),
        (GOOD.replace("hard_max_rounds = 4", "hard_max_rounds = 1"), "limits", "soft_max_rounds"),
        (GOOD.replace("slowtools:slow_step", "slowtools:nothing"), "tools[1]", "no attribute"),
        (GOOD.replace("model = ", "temperature = 1\nmodel = "), "temperature", "Extra inputs"),
        (GOOD.replace('"gpt-test"', "{ temperature = 5 }"), "model.temperature", "less than"),
        (GOOD.replace('"gpt-test"', "{ colour = 1 }"), "model.colour", "Extra inputs"),
        (GOOD.replace('"gpt-test"', "3"), "model", "a model name or a [profiles.<name>.model]"),
        (GOOD.replace("model = ", 'tool_choice = "named"\nmodel = '), "tool_choice", "'auto'"),
    ],
)
def test_bad_profile_names_file_profile_and_field(
    tmp_path: Path, text: str, field: str, says: str
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ProfileError) as caught:
        load_profiles(path)
    message = str(caught.value)
    assert f"file {path}" in message and "profile 'painter'" in message
    assert f"field {field!r}" in message and says in message
    assert "\n" not in message


def test_unreadable_and_invalid_files(tmp_path: Path) -> None:
    with pytest.raises(ProfileError, match="cannot read it"):
        load_profiles(tmp_path / "missing.toml")
    with pytest.raises(ProfileError, match="not valid TOML"):
        load_profiles(write(tmp_path, "[profiles.x\n"))
    with pytest.raises(ProfileError, match=r"no \[profiles.<name>\] table"):
        load_profiles(write(tmp_path, "# empty\n"))


def test_python_profile_always_can_report() -> None:
    @tool
    def shout(text: str) -> str:
        """Shout it."""
        return text.upper()

    made = Profile(name="loud", description="Shouts.", system_prompt="Shout.", tools=(shout,))
    assert made.tool_names == ("shout", "send_message")
    with pytest.raises(ProfileError, match="listed twice"):
        Profile(name="x", description="d", system_prompt="s", tools=(shout, shout))


def test_builtin_profiles_include_an_image_painter() -> None:
    profiles = builtin_profiles()
    assert {"painter", "writer", "helper"} <= set(profiles)
    assert "generate_image" in profiles["painter"].tool_names
    assert all(p.description for p in profiles.values())


def test_png_is_valid_and_deterministic(tmp_path: Path) -> None:
    path = tmp_path / "fox.png"
    path.write_bytes(picture_for("a fox"))
    width, height, raw = read_png(path)
    assert (width, height) == (64, 64)
    assert picture_for("a fox") == picture_for("a fox") != picture_for("a cat")
    assert len(set(raw)) > 3  # not a blank image
    with pytest.raises(ValueError, match="rows"):
        encode_png(2, 2, [b"\x00" * 6])
