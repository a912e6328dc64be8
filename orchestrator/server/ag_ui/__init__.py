"""``baton serve`` speaks AG-UI 1.0 (docs/ag-ui.md), through the official ``ag-ui-protocol``
package's event models, run input and encoder.

One module a job: :mod:`.inputs` (the run input, checked before a stream opens), :mod:`.threads`
(a thread's sessions, and what is kept of each on the bus), :mod:`.plan` (what a run does
before it streams: start, follow up, answer, cancel), :mod:`.interrupts` (questions to a person
as interrupts, ``resume`` entries as answers), :mod:`.mapping` (a session's log as AG-UI events:
the run, its state, how questions end), :mod:`.texts`, :mod:`.tool_calls` and :mod:`.subagents`
(the rounds' text messages, the tool calls, each invocation's events: the mapping's parts),
:mod:`.invocations` (which delegation is which subagent invocation), :mod:`.holdings` (what a
client already has), :mod:`.state` (the session as AG-UI state), :mod:`.stream` (a run's
stream), :mod:`.wire` (frames and ``id:`` cursors), :mod:`.capabilities`, :mod:`.app` (the
routes, and the ASGI app a user mounts). The package is the ``ag-ui`` extra (part of
``server``): without it the server runs without these routes (:func:`routes_if_installed`).
"""

from __future__ import annotations

import importlib.util
import logging
from typing import TYPE_CHECKING

from baton.errors import install_hint

if TYPE_CHECKING:
    from starlette.routing import BaseRoute

log = logging.getLogger(__name__)


def routes_if_installed() -> list[BaseRoute]:
    """The AG-UI routes, or none when the ``ag-ui`` extra is not installed (said once in the
    log)."""
    if importlib.util.find_spec("ag_ui") is None:
        log.info("AG-UI endpoint off: %s for it", install_hint("ag-ui"))
        return []
    from baton.server.ag_ui.app import routes

    return routes()
