"""Profiles (TOML) the CLI and server tests load, with tools from :mod:`tests.support.tools`."""

from __future__ import annotations

ARTISTS = """
[profiles.painter]
description = "Paints pictures from a description and returns the image URLs."
system_prompt = "[baton:subagent] Paint the task with generate_image, then report."
tools = ["generate_image"]

[profiles.sketcher]
description = "Sketches pictures from a description and returns the image URLs."
system_prompt = "[baton:subagent] Sketch the task with generate_image, then report."
tools = ["generate_image"]

[profiles.publisher]
description = "Publishes a text; a human must approve each publication."
system_prompt = "[baton:subagent] Publish the task with publish, then report."
tools = ["tests.support.tools:publish"]
"""
"""Two painters and a publisher whose every publication needs a human's approval."""

SURVEYORS = """
[profiles.north]
description = "Surveys the north; works until released."
system_prompt = "[baton:subagent] Survey with hold, then report."
tools = ["tests.support.tools:hold"]

[profiles.south]
description = "Surveys the south; works until released."
system_prompt = "[baton:subagent] Survey with hold, then report."
tools = ["tests.support.tools:hold"]

[profiles.sleeper]
description = "Works on a task for a long time."
system_prompt = "[baton:subagent] Work on the task with ponder."
tools = ["tests.support.tools:ponder"]
"""
"""Agents that work until a test releases them (``hold``) or interrupts them (``ponder``)."""
