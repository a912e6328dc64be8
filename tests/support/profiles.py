"""Profiles (TOML) the CLI and server tests load, with tools from :mod:`tests.support.tools`."""

from __future__ import annotations


def _profiles(*rows: tuple[str, str, str, str]) -> str:
    """A profiles file: one ``(name, description, instruction, tool)`` row per sub-agent."""
    return "".join(
        f"\n[profiles.{name}]\n"
        f'description = "{description}"\n'
        f'system_prompt = "[baton:subagent] {instruction}"\n'
        f'tools = ["{tool}"]\n'
        for name, description, instruction, tool in rows
    )


ARTISTS = _profiles(
    ("painter", "Paints pictures from a description and returns the image URLs.",
     "Paint the task with generate_image, then report.", "generate_image"),
    ("sketcher", "Sketches pictures from a description and returns the image URLs.",
     "Sketch the task with generate_image, then report.", "generate_image"),
    ("publisher", "Publishes a text; a human must approve each publication.",
     "Publish the task with publish, then report.", "tests.support.tools:publish"),
)  # fmt: skip
"""Two painters and a publisher whose every publication needs a human's approval."""

GALLERY = _profiles(
    ("painter", "Paints pictures from a description and returns the image URLs.",
     "Paint the task with generate_image, then report.", "generate_image"),
    ("publisher", "Publishes a text as a card in the gallery; a human must approve each.",
     "Publish the task with exhibit, then report.", "tests.support.tools:exhibit"),
    ("reviewer", "Reviews a document the user uploads.",
     "Ask for the document with request_file_upload, then review it.", "request_file_upload"),
    ("sleeper", "Works on a task for a long time.",
     "Work on the task with ponder.", "tests.support.tools:ponder"),
)  # fmt: skip
"""A painter, a publisher whose gated tool makes media (declined, its work is incomplete), a
reviewer who asks for a file, and an agent that works until it is stopped (offered alone:
``profiles = ["sleeper"]``)."""

SURVEYORS = _profiles(
    ("north", "Surveys the north; works until released.",
     "Survey with hold, then report.", "tests.support.tools:hold"),
    ("south", "Surveys the south; works until released.",
     "Survey with hold, then report.", "tests.support.tools:hold"),
    ("sleeper", "Works on a task for a long time.",
     "Work on the task with ponder.", "tests.support.tools:ponder"),
)  # fmt: skip
"""Agents that work until a test releases them (``hold``) or interrupts them (``ponder``)."""
