"""`make demo-mcp`: the trip booked across separate MCP server processes, then the same trip with the hotel sold out.

The airline, hotel, calendar and payments servers each run as their own stdio child (`python -m servers.<name>`,
state and keys under a data directory). This process is the agent's coordinator: it drives the transaction with
hatp_mcp.runtime.coordinator over `mcp_participant` clients. The finance approver is scripted (in this process,
until the gateway runs as its own MCP server). It prints a timeline per transaction, writes each record and
verifies it offline with `hatp verify`. Leaving the `async with` stops every child (stdin closed, then SIGTERM),
also on Ctrl-C: no orphans.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Callable
from contextlib import AsyncExitStack
from datetime import datetime
from pathlib import Path
from typing import Any

import anyio
from mcp import Client
from mcp.client.stdio import stdio_client

from demo.trip_world import AIRLINE, CALENDAR, HOTEL, PAYMENTS, trip_plan
from hatp_mcp.core.keys import Keyring, PublicKeyEntry, SigningKey
from hatp_mcp.core.model.plan import Plan
from hatp_mcp.mcp.launch import stdio_params
from hatp_mcp.mcp.participant_client import mcp_participant
from hatp_mcp.mcp.serve import quiet
from hatp_mcp.runtime.clock import SystemClock
from hatp_mcp.runtime.coordinator import CoordinatorRuntime, TxnResult, default_validator
from hatp_mcp.runtime.interfaces import Participant
from hatp_mcp.runtime.scripted_approver import HumanScript, ScriptedApprover
from hatp_mcp.store.txn_log import SqliteTxnLog

__all__ = ["SERVERS", "main", "open_suite", "plan_for", "run_trip", "timeline"]

SERVERS = {"airline": AIRLINE, "hotel": HOTEL, "calendar": CALENDAR, "payments": PAYMENTS}


def plan_for(txn_id: str, now: datetime, check_in: str, seat: str) -> Plan:
    data = trip_plan(now, txn_id).wire()
    args = {
        "seat": {"date": "2026-12-10", "seat": seat},
        "room": {"checkIn": check_in},
        "event": {"start": f"{check_in}T09:00:00Z"},
    }
    for branch in data["branches"]:
        branch["args"].update(args.get(branch["branchId"], {}))
    return Plan.model_validate(data)


def timeline(result: TxnResult, started: datetime) -> list[str]:
    """One line per record event: seconds since start, which server, what happened."""
    servers = {b["branchId"]: b["participant"].split("//")[1].split(".")[0] for b in result.record["plan"]["branches"]}
    lines = []
    for event in result.record["events"]:
        body: dict[str, Any] = event.get("body") or {}
        at = datetime.fromisoformat(event["at"].replace("Z", "+00:00"))
        branch = body.get("branchId") or body.get("requirementId")
        where = servers.get(branch, "gateway" if branch else "coordinator") if branch else "coordinator"
        evidence = event.get("evidence") if isinstance(event.get("evidence"), dict) else {}
        facts = {**{k: v for k, v in evidence.items() if k in ("decision", "outcome", "code")}, **body}
        detail = " ".join(
            f"{k}={facts[k]}" for k in ("branchId", "decision", "outcome", "code", "reason") if facts.get(k) is not None
        )
        lines.append(f"  +{(at - started).total_seconds():6.3f}s  {where:<11} {event['event']:<22} {detail}")
    return lines


async def open_suite(
    stack: AsyncExitStack, data: Path, clock: SystemClock
) -> tuple[dict[str, Client], CoordinatorRuntime, Keyring]:
    """Start the four tool servers as stdio children (stopped when `stack` closes) and a coordinator over them."""
    coordinator = SigningKey.generate(["coordinator"])
    gateway = SigningKey.generate(["gateway"])
    ring = Keyring()
    ring.add_signer(coordinator)
    ring.add_signer(gateway)
    clients: dict[str, Client] = {}
    for name in SERVERS:  # entered in order, so the exit stack stops them in reverse (bounded by the caller)
        errlog = stack.enter_context((data / f"{name}.stderr").open("w"))
        transport = stdio_client(stdio_params(f"servers.{name}", data / name), errlog=errlog)
        clients[name] = await stack.enter_async_context(Client(transport))
    participants: dict[str, Participant] = {}
    for name, uri in SERVERS.items():
        own = Keyring([PublicKeyEntry.from_jwk(json.loads((data / name / "public.jwk.json").read_text()))])
        for entry in own.to_jwks()["keys"]:
            ring.add(PublicKeyEntry.from_jwk(entry))
        participants[uri] = mcp_participant(uri, clients[name], own, timeout=10)
    approver = ScriptedApprover(gateway, clock, scripts={"finance": HumanScript("approve")})
    runtime = CoordinatorRuntime(
        key=coordinator,
        keyring=ring,
        participants=participants,
        approver=approver,
        log=SqliteTxnLog(data / "coordinator.db"),
        clock=clock,
        validator=default_validator(),
    )
    return clients, runtime, ring


async def run_trip(data: Path, *, out: Callable[[str], None] = print) -> dict[str, str]:
    """Run both trips; return {txnId: outcome}. Raises on a failed verification."""
    clock = SystemClock()
    outcomes: dict[str, str] = {}
    async with AsyncExitStack() as stack:
        clients, runtime, ring = await open_suite(stack, data, clock)
        out(f"started {len(clients)} MCP server processes (stdio): {', '.join(clients)}")
        (data / "keyring.json").write_text(json.dumps(ring.to_jwks()))
        stamp = clock.now().strftime("%H%M%S%f")
        trips = [
            (f"txn-trip-{stamp}-ok", "2026-12-10", "14C", None),
            (f"txn-trip-{stamp}-soldout", "2026-12-17", "15A", "2026-12-17"),
        ]
        for txn_id, check_in, seat, sell_out in trips:
            if sell_out is not None:
                await clients["hotel"].call_tool("room_change", {"resource": f"Adlon/{sell_out}", "state": "taken"})
                out(f"\nthe hotel sells its last room for {sell_out} on another channel")
            started = clock.now()
            with anyio.fail_after(60):
                result = await runtime.run(plan_for(txn_id, started, check_in, seat))
            out(f"\n{txn_id}")
            for line in timeline(result, started):
                out(line)
            out(f"  => {result.outcome.value}")
            path = data / f"{txn_id}.record.json"
            path.write_text(json.dumps(result.record, indent=1))
            verified = await anyio.run_process(
                [sys.executable, "-m", "hatp_mcp.cli", "verify", str(path), "--keys", str(data / "keyring.json")],
                check=False,
            )
            said = verified.stdout.decode().strip()
            out(f"  hatp verify {path.name}: {'ok' if verified.returncode == 0 else 'FAILED'} {said}")
            if verified.returncode != 0:
                raise RuntimeError(f"record did not verify: {said} {verified.stderr.decode()}")
            outcomes[txn_id] = result.outcome.value
    out("\nall server processes stopped")
    return outcomes


async def _bounded(data: Path) -> dict[str, str]:
    with anyio.fail_after(300):
        return await run_trip(data)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="demo.trip", description=__doc__)
    parser.add_argument("--data", help="keep server state and records here (default: a fresh temporary directory)")
    args = parser.parse_args(argv)
    quiet()
    try:
        if args.data:
            Path(args.data).mkdir(parents=True, exist_ok=True)
            outcomes = anyio.run(_bounded, Path(args.data))
        else:
            with tempfile.TemporaryDirectory(prefix="hatp-demo-") as tmp:
                outcomes = anyio.run(_bounded, Path(tmp))
    except KeyboardInterrupt:
        print("interrupted; every server process was stopped", file=sys.stderr)
        return 130
    return 0 if sorted(outcomes.values()) == ["ABORTED", "COMMITTED"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
