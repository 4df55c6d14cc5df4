"""The trip, in one process: seat hold, room hold, calendar event, card payment and a finance approval, through
the coordinator with in-memory participants and a scripted approver. Prints each run's timeline (COMMITTED, then
the hotel-sold-out run, ABORTED), writes both records and the keyring to a temp dir and verifies them offline.

`python -m demo.trip_inprocess`. The multi-process MCP demo is demo/trip.py.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import anyio

from demo.trip_world import build_world, trip_plan
from hatp_mcp.core.model.base import parse_ts
from hatp_mcp.core.signing.keys import Keyring
from hatp_mcp.core.txn.record import verify_record
from hatp_mcp.runtime.clock import SystemClock

__all__ = ["main", "timeline"]


def _what(e: dict[str, Any]) -> str:
    ev, body = e.get("evidence") or {}, e["body"]
    if ev.get("type") == "hatp.vote":
        extra = f" ({ev['code']})" if ev.get("code") else ""
        return f"{body['branchId']}: votes {ev['decision']}{extra}"
    if ev.get("type") == "hatp.receipt":
        bits = [f"{ev['branchId']} {ev['phase']} {ev['outcome']}"]
        if ev.get("reportedCost"):
            bits.append(f"cost {ev['reportedCost']['value']} {ev['reportedCost']['currency']}")
        if ev.get("leaseExpiresAt"):
            bits.append(f"held until {ev['leaseExpiresAt']}")
        if ev.get("undoToken"):
            bits.append(f"undo token {ev['undoToken']}")
        if ev.get("code"):
            bits.append(ev["code"])
        return ", ".join(bits)
    if ev.get("type") == "hatp.approval":
        who = ", ".join(d["approver"] for d in ev["decisions"])
        return f"{ev['requirementId']}: {ev['decision']} by {who} (authority {ev['routing']['checked']['status']})"
    if e["event"] == "decision":
        return f"{body['decision'].upper()}: {body['reason']}"
    if e["event"] == "record.closed":
        return f"{body['outcome']} after {body['eventCount']} events"
    return ", ".join(f"{k}={v}" for k, v in body.items() if k != "timing")


def timeline(record: dict[str, Any]) -> list[str]:
    """One readable line per record event: seconds since begin, who, what."""
    events = record["events"]
    t0 = parse_ts(events[0]["at"])
    out = []
    for e in events:
        dt = (parse_ts(e["at"]) - t0).total_seconds()
        author = e["author"].split("//")[-1].split("/")[0]
        out.append(f"  +{dt:7.3f}s  {e['seq']:>2}  {author:<22} {e['event']:<17} {_what(e)}")
    return out


async def _run() -> tuple[list[tuple[str, dict[str, Any], bool]], dict[str, Any]]:
    """Both runs: [(txnId, record, outcome as expected)], and the keyring (JWKS)."""
    clock = SystemClock()
    world = build_world(clock)
    runs = [("trip", "txn-trip-demo-1", False, "COMMITTED"), ("hotel sold out", "txn-trip-demo-2", True, "ABORTED")]
    out = []
    for title, txn, sold_out, expected in runs:
        world.room.sold_out = sold_out
        result = await world.coordinator().run(trip_plan(clock.now(), txn))
        print(f"== {title}: {txn}")
        print("\n".join(timeline(result.record)))
        print(f"   outcome: {result.outcome.value}")
        out.append((txn, result.record, result.outcome.value == expected))
    return out, world.keyring.to_jwks()


def main() -> int:
    runs, jwks = anyio.run(_run)
    ok = all(as_expected for _t, _r, as_expected in runs)
    out = Path(tempfile.mkdtemp(prefix="hatp-trip-"))  # kept, so `hatp verify` can check the records again
    (out / "keyring.json").write_text(json.dumps(jwks, indent=2))
    for txn, record, _ok in runs:
        (out / f"{txn}.record.json").write_text(json.dumps(record, indent=2))
    ring = Keyring.from_jwks(json.loads((out / "keyring.json").read_text()))
    for path in sorted(out.glob("*.record.json")):
        problems = verify_record(json.loads(path.read_text()), ring)
        mark = "✓" if not problems else "✗"
        print(f"{mark} verify {path.name}: {'holds' if not problems else [p.to_dict() for p in problems]}")
        ok = ok and not problems
    print(f"records and keyring are in {out}: `hatp verify {out}/<record> --keys {out}/keyring.json`")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
