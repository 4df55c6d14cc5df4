"""`make demo-mcp`: the trip booked across seven MCP server processes, then the same trip with the hotel sold out.

Coordinator, gateway, directory, airline, hotel, calendar and payments each run as their own process
(demo/trip_suite.py). This process is the agent: it begins each trip on the coordinator over MCP
(`hatp/txn/begin`) and follows it with `hatp/txn/status`. The finance approver is a scripted person who decides
through the gateway's MCP tools, or, with `--interactive`, you in the terminal inbox (`hatp inbox --data ...`, the
exact command is printed). It prints a timeline per transaction (which server did what), writes each record and
verifies it offline with `hatp verify`. Every process is stopped on the way out, also on Ctrl-C: no orphans.
`open_suite` (the coordinator in this process over four stdio servers) is what bench/mcp_trip.py measures.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import tempfile
from collections.abc import Callable
from contextlib import AsyncExitStack
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
from mcp import Client
from mcp.client.stdio import stdio_client

from demo.trip_suite import ORG, Seven, human_key_file, open_seven
from demo.trip_world import AIRLINE, CALENDAR, HOTEL, PAYMENTS, trip_plan
from hatp_mcp.core.model.estimate import OperationBounds
from hatp_mcp.core.model.plan import Plan
from hatp_mcp.core.signing.keys import Keyring, PublicKeyEntry, SigningKey
from hatp_mcp.core.txn.machine import Config
from hatp_mcp.mcp.call import Signer
from hatp_mcp.mcp.launch import stdio_params
from hatp_mcp.mcp.participant_client import mcp_participant
from hatp_mcp.mcp.participant_estimate import AdvertisedBounds
from hatp_mcp.mcp.serve import quiet
from hatp_mcp.runtime.clock import SystemClock
from hatp_mcp.runtime.coordinator.driver import CoordinatorRuntime, default_validator
from hatp_mcp.runtime.coordinator.scripted_approver import SCRIPTED_GATEWAY, HumanScript, ScriptedApprover
from hatp_mcp.runtime.coordinator_trust import RequestSigner, write_trust_list
from hatp_mcp.runtime.interfaces import Participant
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


def timeline(record: dict[str, Any], started: datetime) -> list[str]:
    """One line per record event: seconds since start, which server, what happened."""
    servers = {b["branchId"]: b["participant"].split("//")[1].split(".")[0] for b in record["plan"]["branches"]}
    lines = []
    for event in record["events"]:
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
    stack: AsyncExitStack,
    data: Path,
    clock: SystemClock,
    wrap: Callable[[Participant], Participant] | None = None,
) -> tuple[dict[str, Client], CoordinatorRuntime, Keyring, Signer]:
    """Start the four tool servers as stdio children (stopped when `stack` closes) and a coordinator over them;
    returned with its request signer (every participant trusts that coordinator only, HATP-TRUST-10).
    `wrap`: what the coordinator calls instead of each MCP participant (bench/mcp_trip.py times the calls)."""
    coordinator = SigningKey.generate(["coordinator"])
    coordinator_id = Config().coordinator
    for name in SERVERS:  # each server acts for this coordinator only (HATP-TRUST-10)
        write_trust_list(data / name, {coordinator_id: coordinator.public_jwk()})
    sign = RequestSigner(coordinator, coordinator_id, clock).sign  # its auth on every state-changing request
    gateway = SigningKey.generate(["gateway"])
    ring = Keyring()
    ring.add_signer(coordinator)
    ring.add_signer(gateway, SCRIPTED_GATEWAY)  # HATP-SIG-6: the scripted gateway speaks as its id
    clients: dict[str, Client] = {}
    for name in SERVERS:  # entered in order, so the exit stack stops them in reverse (bounded by the caller)
        errlog = stack.enter_context((data / f"{name}.stderr").open("w"))
        # --demo-tools: bench/mcp_trip.py books the same four tools directly (<noun>_book) to compare
        transport = stdio_client(stdio_params(f"servers.{name}", data / name, ["--demo-tools"]), errlog=errlog)
        clients[name] = await stack.enter_async_context(Client(transport))
    participants: dict[str, Participant] = {}
    for name, uri in SERVERS.items():
        # each server's key, bound to it (HATP-SIG-6): the core counts it for that server's branches only
        own = Keyring([PublicKeyEntry.from_jwk(json.loads((data / name / "public.jwk.json").read_text()))]).bound_to(
            uri
        )
        for entry in own.entries():
            ring.add(entry)
        # verify=False: every answer goes to the coordinator core, which verifies it (HATP-TXN-2, HATP-SIG-6)
        participants[uri] = mcp_participant(uri, clients[name], own, timeout=10, verify=False, signer=sign)
        if wrap is not None:
            participants[uri] = wrap(participants[uri])
    approver = ScriptedApprover(gateway, clock, scripts={"finance": HumanScript("approve")})
    runtime = CoordinatorRuntime(
        key=coordinator,
        keyring=ring,
        participants=participants,
        approver=approver,
        log=SqliteTxnLog(data / "coordinator.db"),
        clock=clock,
        validator=default_validator(),
        bounds=_BoundsAsker({uri: clients[name] for name, uri in SERVERS.items()}),
    )
    return clients, runtime, ring, sign


class _BoundsAsker:
    """HATP-MODE-9: each branch's bounds from its server's hatp/txn/estimate, asked at begin, once per server and
    operation (`known`: what was already asked, with no call; a BoundsAsker for CoordinatorRuntime)."""

    def __init__(self, clients: dict[str, Client]) -> None:
        self._clients = clients
        self._advertised = {uri: AdvertisedBounds() for uri in clients}

    async def __call__(self, participant: str, plan: Plan, branch_id: str) -> OperationBounds:
        return await self._advertised[participant].get(self._clients[participant], plan, branch_id, 10)

    def known(self, participant: str, plan: Plan, branch_id: str) -> OperationBounds | None:
        return self._advertised[participant].known(self._clients[participant], plan, branch_id)


def _say(line: str) -> None:
    print(line, flush=True)  # flushed: the demo is often piped, and Ctrl-C must not lose the timeline


async def _verify(data: Path, txn_id: str, record: dict[str, Any], out: Callable[[str], None]) -> None:
    path = data / f"{txn_id}.record.json"
    path.write_text(json.dumps(record, indent=1))
    verified = await anyio.run_process(
        [
            *(sys.executable, "-m", "hatp_mcp.cli", "verify", str(path)),
            *("--keys", str(data / "keyring.json"), "--org", str(ORG)),
        ],
        check=False,
    )
    said = " ".join(verified.stdout.decode().split())
    out(f"  hatp verify {path.name}: {'ok' if verified.returncode == 0 else 'FAILED'} {said}")
    if verified.returncode != 0:
        raise RuntimeError(f"record did not verify: {said} {verified.stderr.decode()}")


async def _approver(suite: Seven, txn_id: str, interactive: bool, out: Callable[[str], None]) -> None:
    """The finance approver: scripted (through the gateway's MCP tools), or a person at the terminal inbox."""
    asked = await suite.asked(txn_id)
    finance = [v for v in asked["votes"] if v["branchId"] == "finance"]
    if "outcome" in asked or "decision" in asked or not finance or finance[0]["decision"] != "pending":
        return  # decided without the person (a participant said no)
    if interactive:
        shown = await suite.tool("gateway", "show_ask", {"ask_id": f"{txn_id}/finance"})
        inbox = f"{Path(sys.executable).parent / 'hatp'} inbox --data {suite.data / 'gateway'}"
        asked_words = "; ".join(shown.get("waitingForNames") or shown["waitingFor"])  # by name (HATP-GW-96)
        out(f"\n  the finance approver {asked_words} is asked. In another terminal, run:")
        out(f"    {inbox} show {txn_id}/finance")
        who = shown["waitingFor"][0]
        out(f"    {inbox} approve {txn_id}/finance --as {who} --key {human_key_file(who)}")
        out("  (or reject instead of approve). Waiting for the decision...")
        return
    who, decided = await suite.human_decides(txn_id, "approve")
    out(f"  {who} approves {txn_id}/finance in the gateway: {decided['state']}")


async def run_trip(data: Path, *, out: Callable[[str], None] = _say, interactive: bool = False) -> dict[str, str]:
    """Run both trips; return {txnId: outcome}. Raises on a failed verification."""
    outcomes: dict[str, str] = {}
    async with AsyncExitStack() as stack:
        suite = await open_seven(stack, data)
        out(f"started {len(suite.procs)} MCP server processes (HTTP on 127.0.0.1): {', '.join(suite.procs)}")
        (data / "keyring.json").write_text(json.dumps(suite.keyring().to_jwks()))
        stamp = datetime.now(UTC).strftime("%H%M%S%f")
        trips = [
            (f"txn-trip-{stamp}-ok", "2026-12-10", "14C", None),
            (f"txn-trip-{stamp}-soldout", "2026-12-17", "15A", "2026-12-17"),
        ]
        for txn_id, check_in, seat, sell_out in trips:
            if sell_out is not None:
                await suite.tool("hotel", "room_change", {"resource": f"Adlon/{sell_out}", "state": "taken"})
                out(f"\nthe hotel sells its last room for {sell_out} on another channel")
            started = datetime.now(UTC)
            begun = await suite.begin(plan_for(txn_id, started, check_in, seat))
            out(f"\n{txn_id}: begun on the coordinator ({begun['state']})")
            await _approver(suite, txn_id, interactive, out)
            done = await suite.outcome(txn_id)
            for line in timeline(done["record"], started):
                out(line)
            out(f"  => {done['outcome']}")
            await _verify(data, txn_id, done["record"], out)
            outcomes[txn_id] = done["outcome"]
    out("\nall server processes stopped")
    return outcomes


class Interrupted(Exception):
    """Ctrl-C arrived: the trips were cancelled and every server process stopped."""


async def _bounded(data: Path, interactive: bool) -> dict[str, str]:
    """run_trip, bounded, and stopped cleanly by ctrl-c. The SIGINT is taken here rather than left to asyncio, which
    turns it into a KeyboardInterrupt only when the cancelled trip ends in CancelledError: a server connection
    that breaks while its process is being stopped ends it in an exception group instead, and the interrupt was
    then reported as a crash (exit 1)."""
    interrupted = False
    outcomes: dict[str, str] = {}
    try:
        async with anyio.create_task_group() as tg:

            async def on_sigint() -> None:
                nonlocal interrupted
                with anyio.open_signal_receiver(signal.SIGINT) as signals:
                    async for _ in signals:
                        interrupted = True
                        tg.cancel_scope.cancel()
                        return

            tg.start_soon(on_sigint)
            with anyio.fail_after(3600 if interactive else 300):  # a person at the inbox may take a while
                outcomes = await run_trip(data, interactive=interactive)
            tg.cancel_scope.cancel()
    except BaseException:
        if interrupted:  # what broke while the servers were being stopped is part of the stop
            raise Interrupted from None
        raise
    if interrupted:
        raise Interrupted
    return outcomes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="demo.trip", description=__doc__)
    parser.add_argument("--data", help="keep server state and records here (default: a fresh temporary directory)")
    parser.add_argument("--interactive", action="store_true", help="you approve in the terminal inbox")
    args = parser.parse_args(argv)
    quiet()
    try:
        if args.data:
            Path(args.data).mkdir(parents=True, exist_ok=True)
            outcomes = anyio.run(_bounded, Path(args.data), args.interactive)
        else:
            with tempfile.TemporaryDirectory(prefix="hatp-demo-") as tmp:
                outcomes = anyio.run(_bounded, Path(tmp), args.interactive)
    except (KeyboardInterrupt, Interrupted):
        print("interrupted; every server process was stopped", file=sys.stderr)
        return 130
    return 0 if sorted(outcomes.values()) == ["ABORTED", "COMMITTED"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
