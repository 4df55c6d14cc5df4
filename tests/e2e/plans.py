"""Trip plans for end-to-end runs, timed from the real clock (the server processes run on SystemClock)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from mcp import Client

from hatp_mcp.core.model.base import format_ts
from hatp_mcp.core.model.messages import PrepareRequest
from hatp_mcp.core.model.plan import Plan
from hatp_mcp.core.signing.keys import Keyring, PublicKeyEntry
from hatp_mcp.mcp.participant_client import mcp_participant
from hatp_mcp.runtime.clock import SystemClock
from hatp_mcp.runtime.interfaces import Participant
from tests.coordinators import COORDINATOR, signer
from tests.factories import trip_plan_json

__all__ = ["keyring_of", "live_plan", "participant", "prepare_for"]


def live_plan(txn_id: str, **changes: Any) -> Plan:
    now = datetime.now(UTC).replace(microsecond=0)
    data = trip_plan_json(txn_id)
    data["createdAt"] = format_ts(now)
    data["deadlines"] = {
        "decideBy": format_ts(now + timedelta(hours=2)),
        "commitBy": format_ts(now + timedelta(hours=3)),
    }
    data["mandate"]["expiresAt"] = format_ts(now + timedelta(days=2))
    data["approvals"][0]["decideBy"] = format_ts(now + timedelta(hours=1))
    for branch in data["branches"]:
        branch["args"].update(changes.get(branch["branchId"], {}))
    return Plan.model_validate(data)


def prepare_for(plan: Plan, branch_id: str) -> PrepareRequest:
    return PrepareRequest(
        txn_id=plan.txn_id, branch_id=branch_id, plan_digest=plan.digest(), plan=plan, coordinator=COORDINATOR
    )


def keyring_of(data: Path) -> Keyring:
    return Keyring([PublicKeyEntry.from_jwk(json.loads((data / "public.jwk.json").read_text()))])


def participant(uri: str, client: Client, keyring: Keyring, **kw: Any) -> Participant:
    """mcp_participant as the test coordinator sends: every state-changing request signed (HATP-TRUST-11)."""
    return mcp_participant(uri, client, keyring, signer=signer(SystemClock()), **kw)
