"""WorkerThreads: a job runs on one of the threads, off the event loop; its result or its exception comes back to
the awaiting coroutine; `count` threads run jobs at the same time, started once and reused; a caller that stopped
waiting leaves its job to finish and nothing breaks."""

from __future__ import annotations

import asyncio
import gc
import threading

import anyio
import pytest

from hatp_mcp.runtime.worker_threads import WorkerThreads

pytestmark = pytest.mark.anyio


class Boom(Exception):
    pass


def _raise() -> None:
    raise Boom("from the thread")


async def test_a_job_runs_off_the_loop_and_hands_back_its_result_or_its_exception() -> None:
    workers = WorkerThreads(2, "test-worker")
    loop_thread = threading.current_thread().name
    assert workers.started == 0  # nothing starts before the first job
    name = await workers.run(lambda: threading.current_thread().name)
    assert name.startswith("test-worker-") and name != loop_thread
    assert await workers.run(lambda a, b: a + b, 2, 3) == 5
    assert await workers.run(lambda: None) is None
    with pytest.raises(Boom, match="from the thread"):
        await workers.run(_raise)
    assert await workers.run(lambda: "still serving") == "still serving"  # a raise does not end the thread


async def test_count_threads_run_jobs_at_once_started_once_and_reused() -> None:
    workers = WorkerThreads(2, "test-pair")
    meet = threading.Barrier(2, timeout=10)  # broken (BrokenBarrierError) unless two jobs run at the same time
    names: list[str] = []

    def job() -> None:
        meet.wait()
        names.append(threading.current_thread().name)

    for _ in range(3):
        async with anyio.create_task_group() as tg:
            tg.start_soon(workers.run, job)
            tg.start_soon(workers.run, job)
        meet.reset()
    assert workers.started == 2
    assert sorted(set(names)) == ["test-pair-0", "test-pair-1"]


async def test_a_caller_that_stops_waiting_leaves_its_job_to_finish() -> None:
    workers = WorkerThreads(1, "test-cancel")
    loop_errors: list[dict[str, object]] = []
    asyncio.get_running_loop().set_exception_handler(lambda _loop, context: loop_errors.append(context))
    started, release, finished = threading.Event(), threading.Event(), threading.Event()

    def slow() -> str:
        started.set()
        release.wait(10)
        finished.set()
        return "done"

    with anyio.move_on_after(0) as scope:  # cancelled at its first wait: the job was queued already
        await workers.run(slow)
    assert scope.cancelled_caught
    assert await anyio.to_thread.run_sync(started.wait, 10)
    release.set()
    assert await workers.run(lambda: "next") == "next"  # the one thread finished `slow`, then took this one
    assert finished.is_set()
    assert loop_errors == []  # the late result was dropped, not set on the cancelled future


def test_a_worker_needs_a_thread() -> None:
    with pytest.raises(ValueError):
        WorkerThreads(0, "none")


async def test_the_threads_end_when_their_worker_threads_is_garbage() -> None:
    workers = WorkerThreads(2, "test-gone")
    async with anyio.create_task_group() as tg:  # both threads busy at once, so both have started
        meet = threading.Barrier(2, timeout=10)
        tg.start_soon(workers.run, meet.wait)
        tg.start_soon(workers.run, meet.wait)
    threads = [t for t in threading.enumerate() if t.name.startswith("test-gone-")]
    assert len(threads) == 2
    del workers
    gc.collect()
    for thread in threads:
        thread.join(timeout=10)
    assert not any(t.is_alive() for t in threads)
