"""A long-lived coordinator's connections to other MCP servers, each re-opened after it is lost.

A `Target` says how to reach a server: a stdio child (`python -m <module> --data DIR`, or a command an operator's
file names, started with exactly the environment the file gives it, HATP-PXY-50; spawned by this process) or a
streamable HTTP URL. A `Link` keeps one `mcp.Client` open in its own task, so a transport that tears its
client down (a killed HTTP server, a dead stdio child) ends that task, not the caller's; after a lost connection
the next call opens a new client (a stdio child is started again on the same --data). `LinkedParticipant` is the
Participant Protocol over a link (mcp_participant per call with verify=False: the coordinator core verifies each
answer, HATP-TXN-2, including that the signing key is bound to this participant, HATP-SIG-6; the keys it is given
come bound from mcp.pins). This module decides nothing about transactions and never retries a call itself.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO, TypeVar

import anyio
from anyio.abc import TaskGroup, TaskStatus
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from hatp_mcp.core.model.estimate import Estimate, OperationBounds
from hatp_mcp.core.model.messages import (
    AbortRequest,
    BranchResult,
    CommitRequest,
    CompensateRequest,
    LockAcquireRequest,
    LockReleaseRequest,
    LockResult,
    PrepareRequest,
    PrepareResult,
    RenewRequest,
    StatusRequest,
    StatusResult,
)
from hatp_mcp.core.model.plan import Plan
from hatp_mcp.core.model.terms import ApprovalTerms
from hatp_mcp.core.signing.keys import Keyring, PublicKeyEntry
from hatp_mcp.errors import BrokenInvariant, TransportFailed
from hatp_mcp.mcp.call import Signer
from hatp_mcp.mcp.errors import cause
from hatp_mcp.mcp.extension import read_advertisement
from hatp_mcp.mcp.gateway_client import McpApprover
from hatp_mcp.mcp.launch import stdio_params
from hatp_mcp.mcp.participant_client import McpParticipant
from hatp_mcp.mcp.participant_estimate import AdvertisedBounds
from hatp_mcp.runtime.interfaces import ApproverAnswer

__all__ = [
    "Link",
    "LinkedApprover",
    "LinkedParticipant",
    "Target",
    "advertised_keyring",
    "bounds_over_links",
    "open_links",
]

R = TypeVar("R")
LOST = ("CONNECTION_CLOSED", "UNREACHABLE")


@dataclass(frozen=True)
class Target:
    """How to reach one server. `parse` reads `http://host:port/mcp` or `stdio:MODULE[:DATA_DIR]`, or an object
    `{"url": ...}` / `{"module": ..., "data": ..., "args": [...]}`. Raises ValueError for anything else."""

    url: str | None = None
    module: str | None = None
    data: str | None = None
    args: tuple[str, ...] = ()
    # a stdio server given as a command (hatp_mcp.mcp.proxy_upstream.stdio_parameters: its env exactly the file's)
    command: StdioServerParameters | None = field(default=None, compare=False)

    @classmethod
    def parse(cls, value: str | Mapping[str, Any]) -> Target:
        if isinstance(value, Mapping):
            args = value.get("args", [])
            if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
                raise ValueError(f"args must be a list of strings: {value!r}")
            if isinstance(value.get("url"), str):
                return cls(url=value["url"])
            if isinstance(value.get("module"), str):
                data = value.get("data")
                return cls(module=value["module"], data=str(data) if data is not None else None, args=tuple(args))
        elif value.startswith(("http://", "https://")):
            return cls(url=value)
        elif value.startswith("stdio:") and value[6:]:
            module, _, data = value[6:].partition(":")
            return cls(module=module, data=data or None)
        raise ValueError(f"not a server target (http://... or stdio:MODULE[:DATA]): {value!r}")

    def describe(self) -> str:
        if self.command is not None:
            return f"the command {self.command.command}"
        return self.url or f"stdio:{self.module}" + (f":{self.data}" if self.data else "")


def _file_name(name: str) -> str:
    """`mcp://airline.example/hatp` -> `airline.example_hatp`: a server's name as a file name."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name.split("://", 1)[-1]).strip("_") or "server"


class Link:
    """One server over MCP. `client()` opens (or re-opens) the connection; `lost(client)` drops a broken one."""

    def __init__(self, name: str, target: Target, tg: TaskGroup, errlog_dir: Path | None = None) -> None:
        self.name = name
        self.target = target
        self._tg = tg
        self._errlog_dir = errlog_dir
        self._client: Client | None = None
        self._close: anyio.Event | None = None
        self._lock = anyio.Lock()
        self.connects = 0  # how many times a connection was opened (tests: a reconnect happened)

    async def client(self) -> Client:
        """Raises TransportFailed (UNREACHABLE) when the server cannot be reached."""
        async with self._lock:
            if self._client is None:
                try:
                    self._client, self._close = await self._tg.start(self._hold)
                except Exception as exc:  # the SDK raises groups of transport errors at open
                    raise TransportFailed(
                        "HATP-MCP-6",
                        f"{self.name} is down: cannot reach {self.target.describe()} ({cause(exc)}); nothing was sent "
                        f"to it. Start it (hatp serve runs it and restarts it), then try again",
                        code="UNREACHABLE",
                    ) from exc
                self.connects += 1
            return self._client

    @property
    def current(self) -> Client | None:
        """The open connection, None when there is none (`client()` would open one)."""
        return self._client

    def lost(self, client: Client) -> None:
        """The connection of `client` is gone: close it; the next `client()` opens a new one."""
        if self._client is client and self._close is not None:
            self._close.set()
            self._client = None

    async def _hold(self, *, task_status: TaskStatus[tuple[Client, anyio.Event]]) -> None:
        close = anyio.Event()
        started = False
        try:
            async with AsyncExitStack() as stack:
                if self.target.url is not None:
                    client = await stack.enter_async_context(Client(self.target.url))
                else:
                    errlog: TextIO = sys.stderr
                    if self._errlog_dir is not None:
                        errlog = stack.enter_context((self._errlog_dir / f"{_file_name(self.name)}.stderr").open("a"))
                    if self.target.command is not None:  # exactly the environment its file names (HATP-PXY-50)
                        params = self.target.command
                    elif self.target.module is not None:
                        params = stdio_params(self.target.module, self.target.data, self.target.args)
                    else:
                        raise BrokenInvariant("a server link names neither a url, a module nor a command")
                    client = await stack.enter_async_context(Client(stdio_client(params, errlog=errlog)))
                started = True
                task_status.started((client, close))
                await close.wait()
        except Exception:
            if not started:
                raise
            # a torn-down connection ends here, not in the caller; the caller sees TransportFailed
        finally:
            if self._close is close:
                self._client = None

    def close(self) -> None:
        if self._close is not None:
            self._close.set()
        self._client = None


@asynccontextmanager
async def open_links(targets: Mapping[str, Target], errlog_dir: Path | None = None) -> AsyncIterator[dict[str, Link]]:
    """Links to every target (not yet connected); leaving closes them all (stdio children are stopped)."""
    async with anyio.create_task_group() as tg:
        links = {name: Link(name, t, tg, errlog_dir) for name, t in targets.items()}
        try:
            yield links
        finally:
            for link in links.values():
                link.close()


async def advertised_keyring(link: Link, role: str) -> Keyring:
    """The public keys a server advertises (HATP-MCP-1) that carry `role`.

    Raises HatpError HATP-MCP-1 when it advertises no HATP, TransportFailed when it cannot be reached."""
    client = await link.client()
    hatp = read_advertisement(client.server_capabilities, link.name)
    ring = Keyring()
    for jwk in hatp.get("keys", []):
        entry = PublicKeyEntry.from_jwk(json.loads(json.dumps(jwk)))
        if role in entry.roles:
            ring.add(entry)
    return ring


class LinkedParticipant:
    """The Participant Protocol over a Link: each call on the current connection, a lost one dropped."""

    def __init__(
        self, uri: str, link: Link, keyring: Keyring, *, timeout: float | None = 30.0, signer: Signer | None = None
    ) -> None:
        self.uri = uri
        self.link = link
        self.keyring = keyring
        self.timeout = timeout
        self.signer = signer  # the coordinator's auth on every state-changing request (HATP-TRUST-11)
        self._bounds = AdvertisedBounds()  # asked once per connection and operation

    async def _on(self, fn: Callable[[McpParticipant], Awaitable[R]]) -> R:
        client = await self.link.client()
        try:
            # verify=False: every vote and receipt goes to the coordinator core, which verifies the signature, that the
            # key is bound to this participant (HATP-SIG-6) and the txnId/branchId/planDigest/voter (HATP-TXN-2)
            participant = McpParticipant(
                self.uri, client, self.keyring, timeout=self.timeout, verify=False, signer=self.signer
            )
            return await fn(participant)
        except TransportFailed as exc:
            if exc.code in LOST:
                self.link.lost(client)
            raise

    async def prepare(self, req: PrepareRequest) -> PrepareResult:
        return await self._on(lambda p: p.prepare(req))

    async def commit(self, req: CommitRequest) -> BranchResult:
        return await self._on(lambda p: p.commit(req))

    async def abort(self, req: AbortRequest) -> BranchResult:
        return await self._on(lambda p: p.abort(req))

    async def compensate(self, req: CompensateRequest) -> BranchResult:
        return await self._on(lambda p: p.compensate(req))

    async def renew(self, req: RenewRequest) -> BranchResult:
        return await self._on(lambda p: p.renew(req))

    async def status(self, req: StatusRequest) -> StatusResult:
        return await self._on(lambda p: p.status(req))

    async def acquire_lock(self, req: LockAcquireRequest) -> LockResult:
        return await self._on(lambda p: p.acquire_lock(req))

    async def release_lock(self, req: LockReleaseRequest) -> LockResult:
        return await self._on(lambda p: p.release_lock(req))

    async def bounds(self, plan: Plan, branch_id: str) -> OperationBounds:
        """The participant's bounds for one branch (hatp/txn/estimate, HATP-MCP-19); raises like participant_bounds.

        Asked once per connection and operation, then answered for this branch from what was advertised."""
        client = await self.link.client()
        try:
            return await self._bounds.get(client, plan, branch_id, self.timeout)
        except TransportFailed as exc:
            if exc.code in LOST:
                self.link.lost(client)
            raise

    def known_bounds(self, plan: Plan, branch_id: str) -> OperationBounds | None:
        """What `bounds` would answer from this connection's advertisement, with no call; None when nothing is
        held for it (no connection open, or not asked on it yet). Raises KeyError for a branch the plan lacks."""
        client = self.link.current
        return None if client is None else self._bounds.known(client, plan, branch_id)


class _LinkBounds:
    """A BoundsAsker for CoordinatorRuntime(bounds=...) (HATP-MODE-9): each branch's bounds from its participant's
    link; `known`: what a link already holds, with no call. A participant without a link raises KeyError, which
    the runtime counts as no bounds (refused)."""

    def __init__(self, participants: Mapping[str, LinkedParticipant]) -> None:
        self._participants = participants

    async def __call__(self, participant: str, plan: Plan, branch_id: str) -> OperationBounds:
        return await self._participants[participant].bounds(plan, branch_id)

    def known(self, participant: str, plan: Plan, branch_id: str) -> OperationBounds | None:
        return self._participants[participant].known_bounds(plan, branch_id)


def bounds_over_links(
    participants: Mapping[str, LinkedParticipant],
) -> Callable[[str, Plan, str], Awaitable[OperationBounds]]:
    """A BoundsAsker over `participants`' links (see _LinkBounds)."""
    return _LinkBounds(participants)


class LinkedApprover:
    """The Approver Protocol over a Link to a Human Gateway server (mcp_approver's checks, HATP-MCP-11)."""

    def __init__(
        self,
        link: Link,
        keyring: Keyring,
        *,
        timeout: float | None = 30.0,
        gateway_id: str | None = None,
        coordinator: str = "hatp-coordinator",
        signer: Signer | None = None,
    ) -> None:
        self.link = link
        self._signer = signer
        self._keyring = keyring
        self._timeout = timeout
        self._gateway_id = gateway_id
        self._coordinator = coordinator
        self._current: tuple[Client, McpApprover] | None = None

    async def _on(self, fn: Callable[[McpApprover], Awaitable[R]]) -> R:
        client = await self.link.client()
        if self._current is None or self._current[0] is not client:  # a new connection: a new approver
            approver = McpApprover(
                client,
                self._keyring,
                timeout=self._timeout,
                gateway_id=self._gateway_id,
                coordinator=self._coordinator,
                signer=self._signer,
            )
            self._current = (client, approver)
        approver = self._current[1]
        try:
            return await fn(approver)
        except TransportFailed as exc:
            if exc.code in LOST:
                self.link.lost(client)
            raise

    async def ask(self, plan: Plan, requirement_id: str, terms: ApprovalTerms | None = None) -> ApproverAnswer:
        return await self._on(lambda a: a.ask(plan, requirement_id, terms))

    async def poll(self, txn_id: str, requirement_id: str) -> ApproverAnswer:
        return await self._on(lambda a: a.poll(txn_id, requirement_id))

    async def wait(self, txn_id: str, requirement_id: str, seconds: float) -> ApproverAnswer:
        return await self._on(lambda a: a.wait(txn_id, requirement_id, seconds))

    async def withdraw(self, txn_id: str, requirement_id: str) -> None:
        await self._on(lambda a: a.withdraw(txn_id, requirement_id))

    async def estimate(self, plan: Plan, requirement_id: str) -> Estimate:
        return await self._on(lambda a: a.estimate(plan, requirement_id))

    async def tighten(self, txn_id: str, requirement_id: str, terms: ApprovalTerms) -> ApproverAnswer:
        return await self._on(lambda a: a.tighten(txn_id, requirement_id, terms))
