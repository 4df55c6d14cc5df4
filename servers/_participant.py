"""The body every tool server shares: arguments, --data (key, SQLite), --store (the participant state on SQLite or
PostgreSQL), the participant wrapper, tools, serving.

A tool server is an `MCPServer` with HATP via `serve_hatp` on hatp_mcp.runtime.participant.driver.ParticipantRuntime
and one ordinary tool, `<noun>_status` (look a resource up). An agent meets only the protocol: the tools that act
outside any transaction (`<noun>_book`) or change test state (`<noun>_change`) are offered only to a server
started with `--demo-tools`, as the demos, benches and tests that need them do (spec/mcp-binding.md HATP-MCP-31).
A resource argument is checked against the server's resource format before anything is read or written. Each
server module only says which operations it offers; this module holds no HATP rules.
"""

from __future__ import annotations

import argparse
import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

import anyio
from mcp.server import MCPServer
from pydantic import Field

from hatp_mcp.core.model.base import parse_ts
from hatp_mcp.errors import HatpError
from hatp_mcp.mcp.errors import agent_tool_sync
from hatp_mcp.mcp.extension import HatpSettings, OperationInfo
from hatp_mcp.mcp.hatp_server import HatpServer
from hatp_mcp.mcp.participant_server import serve_hatp
from hatp_mcp.mcp.serve import add_server_arguments, add_trust_argument, log, quiet, serve
from hatp_mcp.runtime.clock import Clock, FakeClock, SystemClock
from hatp_mcp.runtime.coordinator_trust import open_trust
from hatp_mcp.runtime.participant.driver import Operation, ParticipantRuntime
from hatp_mcp.store.participant_state import SqliteParticipantStore
from hatp_mcp.store.txn_bindings import SqliteTxnBindings, TxnBindings
from hatp_mcp.store.url import StoreUrl, open_participant_store, open_txn_bindings
from servers._inventory import Inventory
from servers._keys import load_or_create_key
from servers._operations import FinalOp, KeyFn, ResourceKey, _InventoryOp

__all__ = ["MAX_HOLD_SECONDS", "MAX_LEASE_SECONDS", "OpSpec", "ToolServer", "build", "main"]

MAX_LEASE_SECONDS = 900
MAX_HOLD_SECONDS = 24 * 3600
# The longest one call (prepare, commit, ...) takes here: one local SQLite write, generously bounded. Stated in
# hatp/txn/estimate so a coordinator can check the plan's timing against it (HATP-MODE-9).
MAX_CALL_SECONDS = 5

Resource = Annotated[
    str, Field(min_length=1, max_length=300, description="The resource, named as the server's format says.")
]
Holder = Annotated[str, Field(min_length=1, max_length=200, description="Who books it.")]
State = Annotated[
    Literal["free", "held", "taken", "gone"],
    Field(description="Its new state: free, held, taken, or gone (e.g. a blocked card)."),
]


@dataclass(frozen=True)
class OpSpec:
    name: str  # e.g. seat.hold
    tier: str  # hold | compensate | final
    op: Callable[[Inventory, KeyFn], Operation]
    key: ResourceKey


@dataclass(frozen=True)
class ToolServer:
    name: str  # airline
    uri: str  # mcp://airline.example/hatp
    noun: str  # seat (tool names: seat_status, seat_book, seat_change)
    ops: Sequence[OpSpec]


def build(
    spec: ToolServer,
    data: Path,
    *,
    effects_apart: bool = False,
    trusted_coordinators: str | None = None,
    store_url: StoreUrl | None = None,
    demo_tools: bool = False,
    serve_locks: bool = False,
    clock: Clock | None = None,
) -> tuple[MCPServer, ParticipantRuntime, Inventory]:
    """Open the key and state under `data` and build the MCP server (HATP plus ordinary tools).

    The inventory lives in the participant store's database (state.db), so each hold and commit is kept with its
    answer by one transaction (HATP-PART-13); `effects_apart` keeps it in inventory.db instead, as an outside
    system's would be (commits then write their intent first, HATP-PART-10/11). With the state elsewhere
    (`store_url`, e.g. PostgreSQL) the inventory is always apart, in inventory.db. `trusted_coordinators`: the
    `--trusted-coordinators [ID=]FILE` flag (default DATA/trusted-coordinators.json; none: every state-changing
    request is refused, HATP-TRUST-6). `demo_tools` offers the `<noun>_book` and `<noun>_change` tools too
    (HATP-MCP-31); `serve_locks` serves hatp/lock/*, proven like hatp/txn/* (HATP-MCP-51, HATP-LOCK-4). `clock`:
    the system clock unless given (tests pin one). Raises OSError, ValueError or HatpError (HATP-STORE-1/3)."""
    url = store_url or StoreUrl.sqlite(data / "state.db")
    apart = effects_apart or url.backend != "sqlite"
    if not apart and (data / "inventory.db").exists():  # fail closed: never two inventories
        raise ValueError(
            f"{data / 'inventory.db'} holds an inventory apart from state.db (an older layout, or --effects-apart):"
            " start with --effects-apart, or move it away"
        )
    key = load_or_create_key(data, ["participant"])
    clock = clock if clock is not None else SystemClock()
    store = open_participant_store(url)
    shared = store.database if isinstance(store, SqliteParticipantStore) and not apart else None
    # HATP-TRUST-10; the txnId bindings live with the state (HATP-TRUST-5). In a SQLite state.db each binding is
    # written by the transaction that keeps the request's state, when every effect is kept there too (deferred: no
    # sync of its own); with effects apart, before them.
    bindings: TxnBindings
    if isinstance(store, SqliteParticipantStore):
        bindings = SqliteTxnBindings(store.database, defer=shared is not None)
    else:
        bindings = open_txn_bindings(url)
    trust = open_trust(data, trusted_coordinators, clock, bindings)
    if trust.keyring is None:
        log(f"{spec.name}: WARNING no trusted coordinator; every state-changing request is refused (HATP-TRUST-6)")
    inventory = Inventory(data / "inventory.db" if shared is None else shared)
    operations: dict[str, Operation] = {o.name: o.op(inventory, o.key) for o in spec.ops}
    runtime = ParticipantRuntime(
        spec.uri,
        key,
        operations,
        store,
        clock,
        max_lease_seconds=MAX_LEASE_SECONDS,
        max_horizon_seconds=MAX_HOLD_SECONDS,
    )
    server = HatpServer(f"hatp-{spec.name}", version="0.1.0", log_level="WARNING")
    noun = spec.noun
    formats = " or ".join(dict.fromkeys(o.key.format for o in spec.ops))

    def checked(resource: str) -> str:
        """HATP-MCP-31: a resource named in this server's format, or a refusal saying which format that is."""
        if any(o.key.fits(resource) for o in spec.ops):
            return resource
        raise HatpError(
            "HATP-MCP-31",
            f"{resource!r} is not a {noun} of the {spec.name}: a {noun} is named {formats}",
            path="$.resource",
            fix=f"name the {noun} as {formats}, the values of the plan's args joined by '/'",
            code="BAD_RESOURCE",
        )

    def status(resource: Resource) -> dict[str, object]:
        item = inventory.get(checked(resource))
        return {"resource": resource, "version": item.version, "state": item.state, "holder": item.holder}

    def book(resource: Resource, holder: Holder) -> dict[str, object]:
        item = inventory.get(checked(resource))
        if item.state != "free":
            return {"booked": False, "reason": f"{resource} is {item.state}"}
        inventory.outside_change(resource, "taken", holder)
        return {"booked": True, "resource": resource}

    def change(resource: Resource, state: State = "free") -> dict[str, object]:
        """A change made outside any transaction (another sale, a new price): the version moves."""
        item = inventory.outside_change(checked(resource), state if state != "free" else None)
        return {"resource": resource, "version": item.version, "state": item.state}

    def add(fn: Callable[..., dict[str, object]], name: str, description: str) -> None:
        server.add_tool(agent_tool_sync(fn), name=name, description=description)

    add(status, f"{noun}_status", f"Look up a {noun} ({formats}): its state and version.")
    if demo_tools:  # an agent meets only the protocol unless the operator asks for these (HATP-MCP-31)
        add(book, f"{noun}_book", f"DEMO-ONLY: book a {noun} ({formats}) directly, without a transaction.")
        add(change, f"{noun}_change", f"TEST-ONLY: change a {noun} ({formats}) outside any transaction.")
    settings = HatpSettings(
        roles=["participant"],
        operations={
            o.name: OperationInfo(
                o.tier,
                MAX_LEASE_SECONDS if o.tier == "hold" else None,
                MAX_HOLD_SECONDS if o.tier == "hold" else None,
                MAX_CALL_SECONDS,
            )
            for o in spec.ops
        },
        keys=[key.public_jwk()],
    )
    serve_hatp(server, runtime, settings, trust=trust, serve_locks=serve_locks)
    return server, runtime, inventory


def default_data(name: str) -> Path:
    return Path.home() / ".hatp" / name


def main(spec: ToolServer, argv: Sequence[str] | None = None) -> int:
    """`python -m servers.<name> --transport stdio|http [--port N] [--data DIR]`."""
    parser = argparse.ArgumentParser(prog=f"servers.{spec.name}", description=f"the {spec.name} MCP server (HATP)")
    add_server_arguments(parser)
    parser.add_argument(
        "--commit-delay", type=float, default=0.0, help="fault injection: a final commit takes this long"
    )
    parser.add_argument(
        "--crash-after-effect",
        action="store_true",
        help="TEST-ONLY fault injection: die (SIGKILL) right after a commit's effect, before its state is saved",
    )
    parser.add_argument(
        "--crash-after-hold",
        action="store_true",
        help="TEST-ONLY fault injection: die (SIGKILL) right after a prepare's hold, before its transaction commits",
    )
    parser.add_argument(
        "--effects-apart",
        action="store_true",
        help="TEST-ONLY: keep the inventory in a database of its own, as an outside system's (HATP-PART-10/11)",
    )
    add_trust_argument(parser)
    parser.add_argument(
        "--store",
        help="the participant state: sqlite:PATH (default: sqlite:DATA/state.db, holding the inventory too) or"
        " postgresql://USER@HOST:PORT/DB (one database per server; the inventory stays in DATA/inventory.db)",
    )
    parser.add_argument(
        "--demo-tools",
        action="store_true",
        help="DEMO/TEST-ONLY: also offer <noun>_book (outside any transaction) and <noun>_change (test state)",
    )
    parser.add_argument(
        "--serve-locks",
        action="store_true",
        help="also serve hatp/lock/{acquire,renew,release}, the fencing-token locks a trusted coordinator takes for"
        " the branches whose plan names `locks` (HATP-MCP-51, HATP-LOCK-4); off unless asked",
    )
    parser.add_argument("--now", default=None, help="TEST-ONLY: pin a fake clock at this RFC 3339 UTC time")
    args = parser.parse_args(argv)
    quiet()
    data = Path(args.data).resolve() if args.data else default_data(spec.name)
    try:
        # a slow final step stands for a slow outside API: its effects are not in the store's transaction
        server, _runtime, _inventory = build(
            spec,
            data,
            effects_apart=args.effects_apart or args.commit_delay > 0,
            trusted_coordinators=args.trusted_coordinators,
            store_url=StoreUrl.parse(args.store) if args.store else None,
            demo_tools=args.demo_tools,
            serve_locks=args.serve_locks,
            clock=FakeClock(parse_ts(args.now)) if args.now else None,
        )
        FinalOp.delay_seconds = args.commit_delay
        _InventoryOp.crash_after_effect = args.crash_after_effect
        _InventoryOp.crash_after_hold = args.crash_after_hold
    except (OSError, ValueError, HatpError) as exc:  # HatpError: HATP-STORE-1/3
        log(f"{spec.name}: cannot start: {exc}")
        return 2
    anyio.run(functools.partial(serve, server, args.transport, args.port, parent_watch=args.parent_watch))
    return 0
