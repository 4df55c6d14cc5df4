"""The evidence core on its own: sign a trip's votes, chain them into a record, verify it, catch tampering.

Runs in one process with real keys and real signatures; the multi-process MCP demo builds on the same pieces.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from hatp_mcp.core.model.example_plan import trip_plan
from hatp_mcp.core.signing.keys import Keyring, SigningKey, sign_object
from hatp_mcp.core.txn.record import RecordChain, verify_record

T0 = datetime(2026, 11, 29, 10, tzinfo=UTC)  # the plan and every event below are dated from here


def main() -> int:
    plan = trip_plan(T0)
    keys = {
        "coordinator": SigningKey.generate(["coordinator"], kid="coordinator"),
        "airline": SigningKey.generate(["participant"], kid="airline"),
        "hotel": SigningKey.generate(["participant"], kid="hotel"),
        "calendar": SigningKey.generate(["participant"], kid="calendar"),
        "payments": SigningKey.generate(["participant"], kid="payments"),
        "gateway": SigningKey.generate(["gateway"], kid="gateway"),
    }
    ring = Keyring()
    for k in keys.values():
        ring.add_signer(k)
    chain = RecordChain(plan, keys["coordinator"], "coordinator://acme.com/demo")
    digest = chain.plan_digest
    print(f"plan {plan.txn_id}  digest {digest}")
    chain.append("txn.begin", "2026-11-29T10:00:00Z", {"mode": plan.mode})
    owners = {"seat": "airline", "room": "hotel", "event": "calendar", "pay": "payments"}
    t = 1
    for branch in plan.branches:
        who = owners.get(branch.branch_id, "airline")
        vote = sign_object(
            {
                "type": "hatp.vote",
                "txnId": plan.txn_id,
                "branchId": branch.branch_id,
                "planDigest": digest,
                "voter": branch.participant,
                "decision": "yes",
                "issuedAt": f"2026-11-29T10:00:{t:02d}Z",
            },
            keys[who],
        )
        chain.append("vote", f"2026-11-29T10:00:{t:02d}Z", {"branchId": branch.branch_id}, vote, branch.participant)
        print(f"  {branch.participant:<32} votes yes on {branch.branch_id} ({branch.tier}), signed by {who}")
        t += 1
    chain.close(f"2026-11-29T10:00:{t:02d}Z", "COMMITTED")
    record = chain.record()
    problems = verify_record(record, ring)
    print(f"record of {len(record['events'])} events verifies: {not problems}")
    with tempfile.TemporaryDirectory() as d:
        rec_path, ring_path = Path(d) / "record.json", Path(d) / "keys.json"
        rec_path.write_text(json.dumps(record, indent=2))
        ring_path.write_text(json.dumps(ring.to_jwks(), indent=2))
        ok = subprocess.run(
            [sys.executable, "-m", "hatp_mcp.cli", "verify", str(rec_path), "--keys", str(ring_path)],
            check=False,
            timeout=60,
        )
        record["events"][2]["body"]["branchId"] = "seat"  # tamper: claim the hotel voted on the seat
        rec_path.write_text(json.dumps(record, indent=2))
        print("after editing event 2:")
        bad = subprocess.run(
            [sys.executable, "-m", "hatp_mcp.cli", "verify", str(rec_path), "--keys", str(ring_path)],
            check=False,
            timeout=60,
        )
    if problems or ok.returncode != 0 or bad.returncode != 1:
        print("demo FAILED", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
