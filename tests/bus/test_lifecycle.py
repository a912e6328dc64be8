"""The one lifecycle pattern (:class:`baton.bus.lifecycle.Service`): opened once, unwound once,
errors and cancellation passed on, and a task group on its stack behaving as in ``async with``."""

from __future__ import annotations

from contextlib import AsyncExitStack

import anyio
import pytest
from anyio.abc import TaskGroup

from baton.bus.lifecycle import LifecycleError, Phase, Service


class Recorder(Service):
    """Enters a task group with one background task and records every step, in order."""

    def __init__(self, *, fail_open: BaseException | None = None) -> None:
        super().__init__()
        self.log: list[str] = []
        self.fail_open = fail_open
        self.group: TaskGroup | None = None
        self.background_started = anyio.Event()
        self.exit_saw: list[type[BaseException] | None] = []

    async def _open(self, stack: AsyncExitStack) -> None:
        self.log.append("open")
        stack.push_async_callback(self._record, "resource closed")
        self.group = await stack.enter_async_context(anyio.create_task_group())
        self.group.start_soon(self._background)
        stack.push_async_exit(self._before_unwind)
        if self.fail_open is not None:
            raise self.fail_open

    async def _background(self) -> None:
        self.background_started.set()
        try:
            await anyio.sleep_forever()
        finally:
            self.log.append("background stopped")

    async def _before_unwind(self, exc_type: type[BaseException] | None, *_: object) -> None:
        self.exit_saw.append(exc_type)
        assert self.group is not None
        self.group.cancel_scope.cancel()  # stop the background task; the group absorbs it

    async def _record(self, what: str) -> None:
        self.log.append(what)


def phase_of(service: Service) -> Phase:
    """The phase read afresh (mypy would otherwise keep the first reading's narrowed type)."""
    return service.phase


async def test_open_then_close_unwinds_in_reverse_order() -> None:
    service = Recorder()
    assert phase_of(service) is Phase.NEW
    async with service as entered:
        assert entered is service
        assert phase_of(service) is Phase.OPEN
        with anyio.fail_after(5):
            await service.background_started.wait()
    assert phase_of(service) is Phase.CLOSED
    assert service.log == ["open", "background stopped", "resource closed"]
    assert service.exit_saw == [None]


async def test_a_service_opens_once() -> None:
    service = Recorder()
    async with service:
        with pytest.raises(LifecycleError, match="is open"):
            await service.__aenter__()
    with pytest.raises(LifecycleError, match="is closed"):
        async with service:
            pass
    assert service.log.count("open") == 1


async def test_close_runs_once() -> None:
    service = Recorder()
    await service.__aenter__()
    await service.aclose()
    await service.aclose()
    await service.__aexit__(None, None, None)
    assert service.log.count("resource closed") == 1
    assert service.phase is Phase.CLOSED


async def test_a_service_closed_before_it_opened_stays_closed() -> None:
    service = Recorder()
    await service.aclose()
    assert service.phase is Phase.CLOSED
    with pytest.raises(LifecycleError):
        await service.__aenter__()
    assert service.log == []


async def test_a_failed_open_unwinds_and_raises() -> None:
    service = Recorder(fail_open=ValueError("no such thing"))
    # The task group on the stack groups the error, exactly as a plain `async with` would.
    with pytest.raises(ExceptionGroup) as raised:
        async with service:
            pytest.fail("the body must not run")  # pragma: no cover
    assert raised.group_contains(ValueError, match="no such thing")
    assert service.phase is Phase.CLOSED
    assert service.log == ["open", "background stopped", "resource closed"]
    assert service.exit_saw == [ValueError]


async def test_an_error_in_the_body_reaches_the_stack_and_propagates() -> None:
    service = Recorder()
    with pytest.raises(ExceptionGroup) as raised:
        async with service:
            raise KeyError("boom")
    assert raised.group_contains(KeyError, match="boom")
    assert service.exit_saw == [KeyError]
    assert service.log[-1] == "resource closed"
    assert service.phase is Phase.CLOSED


async def test_an_error_passes_unchanged_without_a_task_group() -> None:
    class Plain(Service):
        def __init__(self) -> None:
            super().__init__()
            self.closed = 0

        async def _open(self, stack: AsyncExitStack) -> None:
            stack.callback(self._close)

        def _close(self) -> None:
            self.closed += 1

    service = Plain()
    with pytest.raises(KeyError, match="boom"):
        async with service:
            raise KeyError("boom")
    assert service.closed == 1


async def test_cancellation_of_the_body_propagates() -> None:
    service = Recorder()
    body_finished = False
    with anyio.CancelScope() as outer:
        async with service:
            outer.cancel()
            await anyio.sleep_forever()
            body_finished = True  # pragma: no cover
    assert outer.cancelled_caught  # the cancellation reached the scope that asked for it
    assert not body_finished
    assert service.phase is Phase.CLOSED
    assert service.log[-2:] == ["background stopped", "resource closed"]
    assert service.exit_saw == [anyio.get_cancelled_exc_class()]


async def test_cancellation_during_open_unwinds_and_propagates() -> None:
    class SlowOpen(Recorder):
        async def _open(self, stack: AsyncExitStack) -> None:
            await super()._open(stack)
            self.log.append("waiting")
            await anyio.sleep_forever()

    service = SlowOpen()
    with anyio.move_on_after(0.05) as scope:
        await service.__aenter__()
    assert scope.cancelled_caught
    assert service.phase is Phase.CLOSED
    assert service.log == ["open", "waiting", "background stopped", "resource closed"]
    with pytest.raises(LifecycleError):
        await service.__aenter__()
