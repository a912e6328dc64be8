"""The older flat calls (``bus.send`` ...) hand each call, arguments and all, to the part that
keeps it: the lead and the engine still call the bus that way."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from baton.bus.memory import MemoryBus
from baton.bus.messages import SpawnRequest, make_envelope
from baton.bus.parts.claims import SpawnQueue
from baton.bus.parts.retention import Leftovers
from baton.bus.spend import SpendLimits

ENVELOPE = make_envelope(session="s", sender="lead", recipient="a", type="task", content="x")
REQUEST = SpawnRequest(session="s", agent="a", profile="p")
QUEUE = SpawnQueue.of_session("s")
LIMITS = SpendLimits(max_model_calls=1)


def listener(request: SpawnRequest, receipt: str) -> None:
    """A spawn watcher that does nothing."""


class Recorder:
    """Stands in for a part: notes each call and returns its name."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []

    def __getattr__(self, method: str) -> Callable[..., str]:
        def call(*args: Any, **kwargs: Any) -> str:
            self.calls.append((method, args, kwargs))
            return method

        return call


CALLS: list[tuple[str, tuple[Any, ...], dict[str, Any], str, str, tuple[Any, ...], dict[str, Any]]]
CALLS = [  # flat name, its arguments; the part, its method and the arguments it gets
    ("send", (ENVELOPE,), {}, "inboxes", "send", (ENVELOPE,), {}),
    ("send_if_running", (ENVELOPE,), {}, "inboxes", "send_if_running", (ENVELOPE,), {}),
    ("send_raw", ("s", "a", "raw"), {}, "inboxes", "send_raw", ("s", "a", "raw"), {}),
    ("read_inbox", ("s", "a"), {"count": 5, "consumer": "c"}, "inboxes", "read", ("s", "a"),
     {"count": 5, "consumer": "c"}),
    ("wait", ("s", "a", 1.5), {}, "inboxes", "wait", ("s", "a", 1.5), {}),
    ("ack", ("s", "a", ["id"]), {"consumer": "c"}, "inboxes", "ack", ("s", "a", ["id"]),
     {"consumer": "c"}),
    ("release_inbox", ("s", "a"), {"consumer": "c"}, "inboxes", "hand_back", ("s", "a"),
     {"consumer": "c"}),
    ("release", ("s", "a"), {}, "inboxes", "forget", ("s", "a"), {}),
    ("emit", ("event",), {}, "log", "emit", ("event",), {}),
    ("emit_once", ("s", "a", []), {"mark": "m"}, "log", "emit_once", ("s", "a", []), {"mark": "m"}),
    ("events", ("s",), {"after": "1", "follow": False}, "log", "tail", ("s",),
     {"after": "1", "follow": False}),
    ("sessions", (), {}, "log", "sessions", (), {}),
    ("submit_spawn", (REQUEST,), {}, "spawns", "submit", (REQUEST,), {}),
    ("watch_spawns", ("s", listener), {}, "spawns", "watch", ("s", listener), {}),
    ("spawn_states", (["r"],), {}, "spawns", "states", (["r"],), {}),
    ("withdraw_spawn", (["r"],), {}, "spawns", "withdraw", (["r"],), {}),
    ("drop_spawn_queue", ("s",), {}, "spawns", "drop_queue", ("s",), {}),
    ("claim_spawn", (QUEUE,), {"timeout": 2.0}, "claims", "claim", (QUEUE,), {"timeout": 2.0}),
    ("renew_spawn", (["r"],), {}, "claims", "renew", (["r"],), {}),
    ("ack_spawn", (["r"],), {}, "claims", "ack", (["r"],), {}),
    ("release_spawn", (["r"],), {}, "claims", "release", (["r"],), {}),
    ("leave_spawn", (QUEUE,), {}, "claims", "leave", (QUEUE,), {}),
    ("announce_worker", ("p", "w", ["x"], 5.0), {}, "workers", "announce", ("p", "w", ["x"], 5.0),
     {}),
    ("pool_workers", ("p",), {}, "workers", "live", ("p",), {}),
    ("set_agent_state", ("s", "a", {"k": "v"}), {}, "records", "set_agent", ("s", "a", {"k": "v"}),
     {}),
    ("get_agent_state", ("s", "a"), {}, "records", "agent", ("s", "a"), {}),
    ("hold_lead", ("s", "h", 3.0, {"k": "v"}), {}, "records", "hold_lead",
     ("s", "h", 3.0, {"k": "v"}), {}),
    ("lead_record", ("s",), {}, "records", "lead", ("s",), {}),
    ("lead_lease", ("s",), {}, "records", "lead_lease", ("s",), {}),
    ("set_spend_limits", ("s", LIMITS), {}, "budget", "set_limits", ("s", LIMITS), {}),
    ("reserve_spend", ("s",), {}, "budget", "reserve", ("s",), {}),
    ("record_spend", ("s", 7), {}, "budget", "record", ("s", 7), {}),
    ("spend", ("s",), {}, "budget", "totals", ("s",), {}),
    ("retire_session", ("s", 9.0), {"agents": ["a"], "inboxes": ["b"], "unread": ["b"]},
     "retention", "retire", ("s", 9.0, Leftovers(["a"], ["b"], ["b"])), {}),
    ("session_expiry", ("s",), {}, "retention", "expiry", ("s",), {}),
    ("save_token_scopes", ("s", {"d": "read"}), {}, "store", "put", ("s", "tokens", {"d": "read"}),
     {}),
    ("token_scope", ("s", "d"), {}, "store", "get", ("s", "tokens", "d"), {}),
    ("dead_letters", (7,), {}, "letters", "recent", (7,), {}),
]  # fmt: skip


@pytest.mark.parametrize(("flat", "args", "kwargs", "part", "method", "passed", "named"), CALLS)
def test_a_flat_call_reaches_its_part(
    flat: str,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    part: str,
    method: str,
    passed: tuple[Any, ...],
    named: dict[str, Any],
) -> None:
    bus = MemoryBus()
    recorder = Recorder()
    setattr(bus, part, recorder)
    assert getattr(bus, flat)(*args, **kwargs) == method  # the part's own result, unwrapped
    assert recorder.calls == [(method, passed, named)]


def test_every_flat_call_is_checked() -> None:
    from baton.bus.flat import FlatCalls

    flat = {name for name in vars(FlatCalls) if callable(vars(FlatCalls)[name])}
    assert flat == {row[0] for row in CALLS}
