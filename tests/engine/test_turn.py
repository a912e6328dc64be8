"""Per-turn state: the verdict table, repeat fingerprints, declines, the interaction budget."""

from __future__ import annotations

import threading

import anyio
import pytest

from baton.engine import AgentTurn, LoopLimits, Verdict
from baton.engine.turn import IDLE_MARGIN_S, fingerprint, normalise_text, repeat_fingerprint


def rounds_until(turn: AgentTurn, n: int) -> list[Verdict]:
    return [turn.begin_round() for _ in range(n)]


def test_verdict_continue_up_to_the_soft_limit() -> None:
    verdicts = rounds_until(AgentTurn(), 16)
    assert verdicts == [Verdict.CONTINUE] * 16


def test_verdict_wrap_up_past_the_soft_limit() -> None:
    verdicts = rounds_until(AgentTurn(), 18)
    assert verdicts[16:] == [Verdict.WRAP_UP, Verdict.WRAP_UP]


def test_verdict_hard_stop_past_the_hard_limit() -> None:
    verdicts = rounds_until(AgentTurn(), 19)
    assert verdicts[18] == Verdict.HARD_STOP


def test_verdict_cancelled_wins_over_the_limits() -> None:
    released: list[str] = []
    turn = AgentTurn(
        LoopLimits(soft_max_rounds=1, hard_max_rounds=2), on_cancel=lambda: released.append("x")
    )
    assert turn.begin_round() is Verdict.CONTINUE
    turn.cancel()
    turn.cancel()  # idempotent: the hook runs once
    assert turn.cancelled
    assert turn.begin_round() is Verdict.CANCELLED
    assert released == ["x"]


async def test_a_turn_cancelled_before_it_starts_gets_a_cancelled_scope() -> None:
    turn = AgentTurn()
    turn.cancel()
    with turn.scope:
        await anyio.sleep(10)  # returns at once: the scope is already cancelled
    assert turn.scope.cancelled_caught


def test_custom_limits_and_their_validation() -> None:
    turn = AgentTurn(LoopLimits(soft_max_rounds=0, hard_max_rounds=0))
    assert turn.begin_round() is Verdict.HARD_STOP
    with pytest.raises(ValueError, match="soft_max_rounds"):
        LoopLimits(soft_max_rounds=5, hard_max_rounds=4)
    with pytest.raises(ValueError):
        LoopLimits(max_repeats=0)


def test_human_waits_are_clamped_below_the_stream_idle_timeout() -> None:
    limits = LoopLimits()
    assert (limits.approval_wait_s, limits.upload_wait_s, limits.image_wait_s) == (120, 180, 180)
    long = LoopLimits(approval_timeout_s=900, upload_timeout_s=400, stream_idle_timeout_s=100)
    assert long.approval_wait_s == long.upload_wait_s == 100 - IDLE_MARGIN_S < 100


def test_fingerprint_is_canonical_json() -> None:
    assert fingerprint("f", '{"a": 1, "b": [1, 2]}') == fingerprint("f", '{"b":[1,2],"a":1}')
    assert fingerprint("f", "") == fingerprint("f", "{}")
    assert fingerprint("f", '{"a": 1}') != fingerprint("g", '{"a": 1}')
    assert fingerprint("f", '{"a": 1}') != fingerprint("f", '{"a": 2}')
    assert fingerprint("f", "{broken") == fingerprint("f", " {broken ")


def test_fingerprint_ignores_case_spacing_and_surrounding_punctuation_of_strings() -> None:
    base = fingerprint("send", '{"to": "painter", "content": "Paint a fox"}')
    assert base == fingerprint("send", '{"content": "  paint  A FOX. ", "to": "Painter"}')
    assert base == fingerprint("send", '{"to": "painter", "content": "\u201cPaint a fox!\u201d"}')
    assert base != fingerprint("send", '{"to": "painter", "content": "Paint a cat"}')
    assert base != fingerprint("send", '{"to": "painter-2", "content": "Paint a fox"}')
    nested = fingerprint("f", '{"items": ["A", {"k": "B."}]}')
    assert nested == fingerprint("f", '{"items": ["a", {"k": "b"}]}')
    assert fingerprint("f", '{"n": 1}') != fingerprint("f", '{"n": "1"}')


def test_repeat_keys_are_normalised_and_kept_apart_from_argument_fingerprints() -> None:
    assert repeat_fingerprint("send", "Paint a fox.") == repeat_fingerprint("send", "paint a FOX")
    assert repeat_fingerprint("send", "{}") != fingerprint("send", "{}")
    assert normalise_text("  Hello,   World!! ") == "hello, world"


def test_declines_last_the_turn_and_the_interaction_budget_refills_per_round() -> None:
    turn = AgentTurn(LoopLimits(interactions_per_round=1))
    turn.begin_round()
    assert turn.take_interaction() and not turn.take_interaction()
    turn.decline("upload")
    turn.begin_round()
    assert turn.take_interaction()
    assert turn.is_declined("upload") and turn.declined == frozenset({"upload"})


def test_call_counting_is_safe_across_threads() -> None:
    turn = AgentTurn()

    def hammer() -> None:
        for _ in range(2000):
            turn.count_call("k")

    threads = [threading.Thread(target=hammer) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert turn.count_call("k") == 8001
