"""The service's children as processes: each started once the children it needs are ready, the others at once,
restarted when they die, stopped cleanly (spec/mcp-binding.md HATP-MCP-41..44).

A child is a command (built when it starts, from the ports of the children ready before it and its own port) that
serves on 127.0.0.1 and prints one readiness line `<prefix> port=<n> ...` on stderr. The supervisor:
- starts each child once every child it needs (`ChildSpec.needs`, by default every child listed before it) is
  ready, and children that need nothing still starting side by side (the gateway and the tool servers at once, the
  coordinator that asks them after them): a cold start takes its longest chain, not the sum of every child's start;
  a child with a fixed port whose port is taken, or that exits or says nothing before it is ready, fails the
  start: what was started is stopped and StartFailed names the child and why (HATP-MCP-44);
- keeps each child's port across restarts (a port picked at the first start is asked for again), so the children
  that reach it find it where it was;
- restarts a child that dies after the wait its RestartPolicy says, on the clock it is given (a fake one in
  tests), and leaves it down (`failed`) once it died too often (HATP-MCP-43);
- appends each child's stderr to `logs/<name>.log` in its folder and writes `status.json` there on every change:
  the service's pid and state and, for each child, its state, pid, port, URL, restarts and last exit;
- on leaving (cancelled: SIGINT or SIGTERM in the CLI) stops the children in reverse order: stdin closed (each runs
  with --parent-watch, so a supervisor that is killed outright still takes them with it), SIGTERM, SIGKILL after a
  grace period. No process is left.

It also names the service's folder (`service_folder`: DIR/data/service, with `status.json`, `logs/` and the lock
`LOCK_FILE`) and the line `hatp serve` prints once every child serves (`SERVICE_READY`): what `hatp serve` writes
and `hatp connect` reads, so the bridge finds a service without importing the command that runs one.
"""

from __future__ import annotations

import enum
import json
import os
import signal
import socket
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from subprocess import DEVNULL, PIPE
from typing import Any, TextIO

import anyio
from anyio.abc import Process, TaskGroup, TaskStatus
from anyio.streams.buffered import BufferedByteReceiveStream

from hatp_mcp.errors import BrokenInvariant
from hatp_mcp.runtime.clock import Clock
from hatp_mcp.runtime.service.restart import RestartPolicy
from hatp_mcp.store.files import replace_file

__all__ = [
    "LOCK_FILE",
    "READY_PREFIX",
    "SERVICE_READY",
    "STATUS_FILE",
    "ChildSpec",
    "ChildState",
    "StartFailed",
    "Supervisor",
    "port_taken",
    "service_folder",
]

# The line a server process writes on stderr once it serves (`HATP_READY port=N pid=P`): how a parent knows.
READY_PREFIX = "HATP_READY"

STATUS_FILE = "status.json"
LOG_DIR = "logs"
# The line `hatp serve` writes on stdout once every child serves: what a bridge that started it waits for.
SERVICE_READY = "HATP_SERVICE_READY"
LOCK_FILE = "service.lock"  # held by the running service (store/data_lock.py): one service per organisation


def service_folder(root: Path) -> Path:
    """Where the service of the organisation at `root` keeps its lock, status.json and logs: DIR/data/service."""
    return root.absolute() / "data" / "service"


class StartFailed(RuntimeError):
    """A child could not be started: `child` names it, the message says why (and its log's last lines)."""

    def __init__(self, child: str, reason: str) -> None:
        super().__init__(f"{child}: {reason}")
        self.child = child
        self.reason = reason


class ChildState(enum.StrEnum):
    WAITING = "waiting"  # not started yet (a child it needs is still starting)
    STARTING = "starting"
    READY = "ready"
    BACKOFF = "backoff"  # died; waiting before it is started again
    FAILED = "failed"  # died too often; left down
    STOPPED = "stopped"


@dataclass(frozen=True)
class ChildSpec:
    """One child: `command(ports, port)` is its argv, given the ports of the children ready before it (by name)
    and the port it is to bind (0: any free one); `port` is its fixed port, 0 for one picked at its first start.
    `needs` names the children (listed before it) that must be ready before it starts; None: every one listed
    before it."""

    name: str
    command: Callable[[Mapping[str, int], int], list[str]]
    port: int = 0
    needs: tuple[str, ...] | None = None


@dataclass
class _Child:
    spec: ChildSpec
    state: ChildState = ChildState.WAITING
    port: int = 0
    process: Process | None = None
    restarts: int = 0
    deaths: list[datetime] = field(default_factory=list)
    last_exit: int | None = None
    lines: list[str] = field(default_factory=list)

    def status(self) -> dict[str, Any]:
        pid = self.process.pid if self.process is not None and self.process.returncode is None else None
        return {
            "state": str(self.state),
            "pid": pid,
            "port": self.port or None,
            "url": f"http://127.0.0.1:{self.port}/mcp" if self.port else None,
            "restarts": self.restarts,
            "lastExit": self.last_exit,
        }


def port_taken(port: int) -> bool:
    """Whether 127.0.0.1:`port` cannot be bound now (another process listens there)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


class Supervisor:
    """Runs `specs` as children (see the module docstring); `folder` holds status.json and logs/."""

    def __init__(
        self,
        specs: Sequence[ChildSpec],
        folder: Path,
        clock: Clock,
        ready_prefix: str,
        *,
        policy: RestartPolicy | None = None,
        ready_timeout: float = 60.0,
        stop_grace: float = 5.0,
        env: Mapping[str, str] | None = None,
    ) -> None:
        if len({s.name for s in specs}) != len(specs):
            raise ValueError("each child has its own name")
        self.needs: dict[str, tuple[str, ...]] = {}
        for i, s in enumerate(specs):
            before = [b.name for b in specs[:i]]
            needs = tuple(before) if s.needs is None else s.needs
            if not set(needs) <= set(before):  # a child listed before it: so no two children wait for each other
                raise ValueError(f"{s.name} needs {sorted(set(needs) - set(before))}: not children listed before it")
            self.needs[s.name] = needs
        self.children = {s.name: _Child(s, port=s.port) for s in specs}
        self.folder = folder
        self.clock = clock
        self.ready_prefix = ready_prefix
        self.policy = policy or RestartPolicy()
        self.ready_timeout = ready_timeout
        self.stop_grace = stop_grace
        self.env = dict(env) if env is not None else None
        self.state = "starting"
        self._stopping = False
        self._changed = anyio.Event()
        (folder / LOG_DIR).mkdir(parents=True, exist_ok=True)

    @property
    def status_file(self) -> Path:
        return self.folder / STATUS_FILE

    def log_file(self, name: str) -> Path:
        return self.folder / LOG_DIR / f"{name}.log"

    def status(self) -> dict[str, Any]:
        return {
            "pid": os.getpid(),
            "state": self.state,
            "children": {name: c.status() for name, c in self.children.items()},
        }

    def _changed_now(self) -> None:
        replace_file(self.status_file, json.dumps(self.status(), indent=2) + "\n")
        self._changed.set()
        self._changed = anyio.Event()

    async def wait_until(self, check: Callable[[Supervisor], bool]) -> None:
        """Until `check(self)` holds (re-checked on every change of state); the caller bounds the wait."""
        while not check(self):
            await self._changed.wait()

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Start every child in order, report started, keep them running until cancelled, then stop them all.

        Raises StartFailed (nothing is left running) when a child cannot be started the first time."""
        self._changed_now()
        try:
            async with anyio.create_task_group() as tg:
                async with anyio.create_task_group() as starting:
                    for child in self.children.values():
                        starting.start_soon(self._start_when_needs_ready, child, tg)
                self.state = "ready"
                self._changed_now()
                task_status.started()
                await anyio.sleep_forever()
        except BaseExceptionGroup as group:  # the task groups wrap the first start's failure: say it plainly
            found, _rest = group.split(StartFailed)
            failed: BaseException | None = found
            while isinstance(failed, BaseExceptionGroup):
                failed = failed.exceptions[0]
            if failed is not None:
                raise failed from None
            raise
        finally:
            with anyio.CancelScope(shield=True):
                await self._stop_all()

    async def _start_when_needs_ready(self, child: _Child, tg: TaskGroup) -> None:
        """Start `child` once every child it needs is ready; StartFailed when one of them is left down first (a
        need that fails its own start fails the whole start before this)."""
        needs = [self.children[n] for n in self.needs[child.spec.name]]
        await self.wait_until(lambda _s: all(n.state in (ChildState.READY, ChildState.FAILED) for n in needs))
        down = [n.spec.name for n in needs if n.state == ChildState.FAILED]
        if down:
            raise StartFailed(child.spec.name, f"it needs {', '.join(down)}, which died too often and is left down")
        await self._start(child, tg)

    async def _start(self, child: _Child, tg: TaskGroup) -> None:
        """Start `child` and wait until it is ready; then watch it. Raises StartFailed."""
        child.state = ChildState.STARTING
        self._changed_now()
        if child.port and port_taken(child.port):
            raise StartFailed(
                child.spec.name,
                f"127.0.0.1:{child.port} is taken by another process (another service, or a {child.spec.name} "
                "started by hand?); stop it or give this one another port in suite.json",
            )
        ports = {n: c.port for n, c in self.children.items() if c.state == ChildState.READY}
        argv = child.spec.command(ports, child.port)
        # a session of its own: a Ctrl-C at the terminal reaches the supervisor only, which stops the children in
        # order, instead of each child at once (which the supervisor would take for deaths to restart)
        kwargs: dict[str, Any] = {"stdin": PIPE, "stdout": DEVNULL, "stderr": PIPE, "start_new_session": True}
        if self.env is not None:
            kwargs["env"] = self.env
        process = await anyio.open_process(argv, **kwargs)
        child.process = process
        if process.stderr is None:
            raise BrokenInvariant(f"{child.spec.name} was started with its stderr piped and has none")
        stream = BufferedByteReceiveStream(process.stderr)
        log = self.log_file(child.spec.name).open("a")
        try:
            port = await self._ready(child, stream, log)
        except BaseException:
            await self._stop(child)
            log.close()
            raise
        child.port, child.state = port, ChildState.READY
        self._changed_now()
        tg.start_soon(self._watch, child, process, stream, log, tg)

    async def _ready(self, child: _Child, stream: BufferedByteReceiveStream, log: TextIO) -> int:
        name = child.spec.name
        try:
            with anyio.fail_after(self.ready_timeout):
                while True:
                    try:
                        line = (await stream.receive_until(b"\n", 1 << 20)).decode(errors="replace")
                    except (anyio.EndOfStream, anyio.IncompleteRead):
                        if child.process is None:
                            raise BrokenInvariant(f"{child.spec.name} has no process while it starts") from None
                        code = await child.process.wait()
                        raise StartFailed(
                            name, f"it exited ({code}) before it was ready: {' | '.join(child.lines[-3:])}"
                        ) from None
                    self._keep_line(child, line, log)
                    if line.startswith(self.ready_prefix):
                        fields = dict(p.split("=", 1) for p in line.split()[1:] if "=" in p)
                        return int(fields["port"])
        except TimeoutError:
            raise StartFailed(name, f"it was not ready within {self.ready_timeout:g}s; see its log") from None

    @staticmethod
    def _keep_line(child: _Child, line: str, log: TextIO) -> None:
        log.write(line + "\n")
        log.flush()
        child.lines.append(line)
        del child.lines[:-50]

    async def _watch(
        self, child: _Child, process: Process, stream: BufferedByteReceiveStream, log: TextIO, tg: TaskGroup
    ) -> None:
        """Drain the child's stderr into its log until it exits; then restart it as the policy says."""
        try:
            while True:
                try:
                    line = (await stream.receive_until(b"\n", 1 << 20)).decode(errors="replace")
                except (anyio.EndOfStream, anyio.IncompleteRead, anyio.ClosedResourceError, anyio.BrokenResourceError):
                    break
                self._keep_line(child, line, log)
            code = await process.wait()
        finally:
            log.close()
        if self._stopping:
            return
        await self._restart(child, code, tg)

    async def _restart(self, child: _Child, code: int, tg: TaskGroup) -> None:
        while True:
            now = self.clock.now()
            child.last_exit = code
            child.deaths.append(now)
            delay = self.policy.delay(child.deaths, now)
            if delay is None:
                child.state = ChildState.FAILED
                self._changed_now()
                return
            child.state = ChildState.BACKOFF
            self._changed_now()
            await self.clock.sleep_until(now + timedelta(seconds=delay))
            child.restarts += 1
            try:
                await self._start(child, tg)
                return
            except StartFailed:
                code = child.process.returncode if child.process and child.process.returncode is not None else -1

    async def _stop(self, child: _Child) -> None:
        process = child.process
        if process is None:
            return
        if process.returncode is None:
            if process.stdin is not None:
                with anyio.CancelScope(shield=True):
                    try:
                        await process.stdin.aclose()
                    except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                        pass
            try:
                process.send_signal(signal.SIGTERM)
            except ProcessLookupError:
                pass
        with anyio.move_on_after(self.stop_grace, shield=True):
            await process.wait()
        if process.returncode is None:
            process.kill()
            with anyio.fail_after(self.stop_grace, shield=True):
                await process.wait()

    async def _stop_all(self) -> None:
        self._stopping = True
        self.state = "stopping"
        self._changed_now()
        for child in reversed(list(self.children.values())):
            await self._stop(child)
            if child.state != ChildState.WAITING:
                child.state = ChildState.STOPPED
                child.last_exit = child.process.returncode if child.process is not None else None
        self.state = "stopped"
        self._changed_now()
