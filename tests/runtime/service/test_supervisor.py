"""The supervisor over real (tiny) child processes and a fake clock: restarts wait on the clock, never sleep."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio
import pytest

from hatp_mcp.runtime.clock import FakeClock
from hatp_mcp.runtime.service.restart import RestartPolicy
from hatp_mcp.runtime.service.supervisor import ChildSpec, ChildState, StartFailed, Supervisor

READY = "HATP_READY"
# ready, then: exit at once ("die"), or serve until stdin ends ("stay"); "once": die the first time only (a marker
# file remembers); "early": exit before it is ready
SCRIPT = """
import os, sys
mode, marker = sys.argv[1], sys.argv[2]
if mode == "early":
    print("cannot start: no such thing", file=sys.stderr, flush=True); sys.exit(3)
print("HATP_READY port=4711 pid=%d" % os.getpid(), file=sys.stderr, flush=True)
if mode == "die" or (mode == "once" and not os.path.exists(marker)):
    open(marker, "w").close(); sys.exit(1)
sys.stdin.read()
"""


def spec(name: str, mode: str, marker: Path) -> ChildSpec:
    return ChildSpec(name, lambda _ports, _port: [sys.executable, "-c", SCRIPT, mode, str(marker)])


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True


def state(name: str, *states: ChildState) -> Callable[[Supervisor], bool]:
    return lambda s: s.children[name].state in states


@pytest.mark.anyio
async def test_HATP_MCP_43_a_child_that_dies_is_started_again_after_its_backoff_on_the_clock(tmp_path: Path) -> None:
    clock = FakeClock()
    sup = Supervisor([spec("hotel", "once", tmp_path / "died")], tmp_path, clock, READY)
    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            await tg.start(sup.run)
            await sup.wait_until(state("hotel", ChildState.BACKOFF))
            status = json.loads(sup.status_file.read_text())["children"]["hotel"]
            assert (status["state"], status["lastExit"], status["restarts"]) == ("backoff", 1, 0)
            assert clock.next_deadline() is not None  # waiting on the clock, not started again yet
            clock.advance(RestartPolicy().first_delay)
            await sup.wait_until(state("hotel", ChildState.READY))
            again = json.loads(sup.status_file.read_text())["children"]["hotel"]
            tg.cancel_scope.cancel()
    assert (again["state"], again["restarts"], again["port"]) == ("ready", 1, 4711)
    assert "HATP_READY" in sup.log_file("hotel").read_text()


@pytest.mark.anyio
async def test_HATP_MCP_43_a_child_that_keeps_dying_is_left_down_after_its_bounded_restarts(tmp_path: Path) -> None:
    clock = FakeClock()
    policy = RestartPolicy(first_delay=1, max_restarts=2)
    sup = Supervisor([spec("airline", "die", tmp_path / "x")], tmp_path, clock, READY, policy=policy)
    waits = []
    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            await tg.start(sup.run)
            while True:
                await sup.wait_until(state("airline", ChildState.BACKOFF, ChildState.FAILED))
                if sup.children["airline"].state == ChildState.FAILED:
                    break
                deadline = clock.next_deadline()
                assert deadline is not None
                waits.append((deadline - clock.now()).total_seconds())
                clock.set(deadline)
                await sup.wait_until(state("airline", ChildState.READY, ChildState.FAILED, ChildState.STARTING))
                await sup.wait_until(state("airline", ChildState.BACKOFF, ChildState.FAILED))
            tg.cancel_scope.cancel()
    assert waits == [1.0, 2.0]  # backoff doubles; the third death within the window leaves it down
    assert sup.children["airline"].restarts == 2


@pytest.mark.anyio
async def test_HATP_MCP_44_a_child_that_exits_before_it_is_ready_fails_the_start_and_nothing_is_left(
    tmp_path: Path,
) -> None:
    sup = Supervisor(
        [spec("gateway", "stay", tmp_path / "x"), spec("coordinator", "early", tmp_path / "x")],
        tmp_path,
        FakeClock(),
        READY,
    )
    with anyio.fail_after(30), pytest.raises(StartFailed) as failed:
        await sup.run()
    gateway = sup.children["gateway"].process
    assert failed.value.child == "coordinator" and "exited (3) before it was ready" in str(failed.value)
    assert "no such thing" in str(failed.value)
    assert gateway is not None and not alive(gateway.pid)


@pytest.mark.anyio
async def test_HATP_MCP_41_leaving_stops_every_child_and_the_status_says_so(tmp_path: Path) -> None:
    specs = [spec("a", "stay", tmp_path / "x"), spec("b", "stay", tmp_path / "x")]
    sup = Supervisor(specs, tmp_path, FakeClock(), READY)
    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            await tg.start(sup.run)
            pids = [c.process.pid for c in sup.children.values() if c.process is not None]
            tg.cancel_scope.cancel()
    status = json.loads(sup.status_file.read_text())
    assert len(pids) == 2 and not any(alive(p) for p in pids)
    assert status["state"] == "stopped" and {c["state"] for c in status["children"].values()} == {"stopped"}


# "wait": ready only once "open" (another child) opened the FIFO: a start one by one never gets past it
FIFO_SCRIPT = """
import os, sys
mode, fifo = sys.argv[1], sys.argv[2]
if mode == "wait":
    open(fifo).read()
else:
    with open(fifo, "w") as f:
        f.write("here")
print("HATP_READY port=%d pid=%d" % (4712 if mode == "wait" else 4713, os.getpid()), file=sys.stderr, flush=True)
sys.stdin.read()
"""


@pytest.mark.anyio
async def test_HATP_MCP_44_children_that_need_nothing_start_side_by_side_and_the_one_needing_them_after_them(
    tmp_path: Path,
) -> None:
    """The gateway is not ready until a tool server started beside it: one by one, the start would time out. The
    coordinator, which needs both, is given both ports: it starts only once both are ready."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    given: list[dict[str, int]] = []

    def coordinator(ports: Mapping[str, int], _port: int) -> list[str]:
        given.append(dict(ports))
        return [sys.executable, "-c", SCRIPT, "stay", str(tmp_path / "x")]

    specs = [
        ChildSpec("gateway", lambda _p, _port: [sys.executable, "-c", FIFO_SCRIPT, "wait", str(fifo)], needs=()),
        ChildSpec("hotel", lambda _p, _port: [sys.executable, "-c", FIFO_SCRIPT, "open", str(fifo)], needs=()),
        ChildSpec("coordinator", coordinator, needs=("gateway", "hotel")),
    ]
    sup = Supervisor(specs, tmp_path, FakeClock(), READY, ready_timeout=20)
    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            await tg.start(sup.run)
            states = {n: c.state for n, c in sup.children.items()}
            tg.cancel_scope.cancel()
    assert set(states.values()) == {ChildState.READY}
    assert given == [{"gateway": 4712, "hotel": 4713}]


def test_HATP_MCP_44_a_child_may_need_only_children_listed_before_it() -> None:
    specs = [
        ChildSpec("coordinator", lambda _p, _port: [], needs=("gateway",)),
        ChildSpec("gateway", lambda _p, _port: []),
    ]
    with pytest.raises(ValueError, match="coordinator needs"):
        Supervisor(specs, Path("/nonexistent-supervisor-folder"), FakeClock(), READY)


def test_HATP_MCP_43_the_restart_policy_doubles_its_wait_and_forgets_deaths_outside_its_window() -> None:
    t0 = datetime(2026, 12, 1, tzinfo=UTC)
    policy = RestartPolicy(first_delay=0.5, max_delay=4, max_restarts=5, window_seconds=60)
    deaths = [t0 + timedelta(seconds=i) for i in range(5)]
    assert [policy.delay(deaths[: i + 1], deaths[i]) for i in range(5)] == [0.5, 1.0, 2.0, 4.0, 4.0]
    assert policy.delay([*deaths, t0 + timedelta(seconds=5)], t0 + timedelta(seconds=5)) is None
    assert policy.delay([*deaths, t0 + timedelta(seconds=120)], t0 + timedelta(seconds=120)) == 0.5
