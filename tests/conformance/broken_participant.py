"""TEST-ONLY: the payments participant built with `serve_hatp`, its runtime wrapped to break one rule on purpose.

`python -m tests.conformance.broken_participant --break MODE --data DIR --trusted-coordinators FILE` serves over
stdio. Modes (each a planted violation `hatp conformance participant` must name by rule id):
- `trust-anyone`: every state-changing request is admitted unproven (breaks HATP-TRUST-1..4, 5);
- `unsigned-yes`: a yes vote goes out without its signature (breaks HATP-PART-1);
- `other-digest`: the prepare's vote and receipt name another plan digest, re-signed (breaks HATP-PART-1);
- `commit-again`: a repeated commit is performed as new and answered with a fresh receipt (breaks HATP-PART-10);
- `quote-forever`: a quote's receipt states no validUntil, re-signed (breaks HATP-MODE-3);
- `renew-past-horizon`: a renewal's receipt puts the lease a day past the hold's horizon, re-signed (breaks
  HATP-PART-4);
- `compensate-hold`: compensating a committed hold is answered with a signed ok receipt (breaks HATP-PART-7);
- `no-head`: the record head a request names, or a commit's decision carries, is ignored: no answer signs one and
  a commit decided before its vote's head is carried out (breaks HATP-REC-19, HATP-REC-23).
"""

from __future__ import annotations

import argparse
import functools
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
from mcp.server import MCPServer

from hatp_mcp.core.model.base import format_ts, parse_ts
from hatp_mcp.core.model.messages import (
    AbortRequest,
    BranchResult,
    CommitRequest,
    CompensateRequest,
    PrepareRequest,
    PrepareResult,
    RenewRequest,
    StatusRequest,
    StatusResult,
)
from hatp_mcp.core.participant.coordinator_auth import Admitted
from hatp_mcp.core.signing.keys import SigningKey, sign_object
from hatp_mcp.mcp.extension import HatpSettings, OperationInfo
from hatp_mcp.mcp.participant_server import serve_hatp
from hatp_mcp.mcp.serve import quiet, serve
from hatp_mcp.runtime.clock import SystemClock
from hatp_mcp.runtime.coordinator_trust import TrustedCoordinators, open_trust
from hatp_mcp.runtime.participant.driver import ParticipantRuntime
from hatp_mcp.store.files import load_or_create_key
from servers import payments
from servers._participant import build

MODES = (
    "trust-anyone",
    "unsigned-yes",
    "other-digest",
    "commit-again",
    "quote-forever",
    "renew-past-horizon",
    "compensate-hold",
    "no-head",
)


class AdmitAnyone(TrustedCoordinators):
    """The broken check: every request is admitted, proven or not (HATP-TRUST-1..9 switched off)."""

    def admit(self, method: str, params: Mapping[str, Any], *, bind: bool = True) -> Admitted:
        return Admitted(
            coordinator="anyone",
            kid="none",
            txn_id=str(params.get("txnId")),
            branch_id=str(params.get("branchId")),
            plan_digest=str(params.get("planDigest")),
        )


class Broken:
    """The participant runtime with one misbehaviour (`mode`)."""

    def __init__(self, runtime: ParticipantRuntime, key: SigningKey, mode: str) -> None:
        self.runtime = runtime
        self.key = key
        self.mode = mode
        self.commits = 0

    def _resign(self, obj: Mapping[str, Any], **changes: Any) -> dict[str, Any]:
        body = {k: v for k, v in obj.items() if k != "signature"}
        return sign_object({**body, **changes}, self.key)

    async def prepare(self, req: PrepareRequest) -> PrepareResult:
        if self.mode == "no-head":
            req = req.model_copy(update={"record_head": None})
        result = await self.runtime.prepare(req)
        if self.mode == "quote-forever" and req.quote_only:
            receipt = {k: v for k, v in result.receipt.items() if k not in ("validUntil", "signature")}
            return result.model_copy(update={"receipt": sign_object(receipt, self.key)})
        if self.mode == "unsigned-yes" and result.vote.get("decision") == "yes":
            vote = {k: v for k, v in result.vote.items() if k != "signature"}
            return result.model_copy(update={"vote": vote})
        if self.mode == "other-digest":
            other = "sha256:" + "e" * 64
            return result.model_copy(
                update={
                    "vote": self._resign(result.vote, planDigest=other),
                    "receipt": self._resign(result.receipt, planDigest=other),
                }
            )
        return result

    async def commit(self, req: CommitRequest) -> BranchResult:
        if self.mode == "no-head":  # the decision was checked (HATP-TRUST-7), then its head ignored
            req = req.model_copy(update={"decision": None})
        result = await self.runtime.commit(req)
        if self.mode == "commit-again":
            self.commits += 1  # stands for the effect made again: a new answer each time
            issued = format_ts(datetime.now(UTC).replace(microsecond=0).replace(second=self.commits % 60))
            return result.model_copy(update={"receipt": self._resign(result.receipt, issuedAt=issued)})
        return result

    async def abort(self, req: AbortRequest) -> BranchResult:
        return await self.runtime.abort(req)

    async def compensate(self, req: CompensateRequest) -> BranchResult:
        result = await self.runtime.compensate(req)
        if self.mode == "compensate-hold":  # says it undid what cannot be undone
            receipt = {k: v for k, v in result.receipt.items() if k not in ("code", "reason", "signature")}
            return result.model_copy(update={"receipt": sign_object({**receipt, "outcome": "ok"}, self.key)})
        return result

    async def renew(self, req: RenewRequest) -> BranchResult:
        result = await self.runtime.renew(req)
        horizon = result.receipt.get("holdHorizon")
        if self.mode == "renew-past-horizon" and isinstance(horizon, str):
            past = format_ts(parse_ts(horizon) + timedelta(days=1))
            return result.model_copy(update={"receipt": self._resign(result.receipt, leaseExpiresAt=past)})
        return result

    async def status(self, req: StatusRequest) -> StatusResult:
        return await self.runtime.status(req)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="broken_participant")
    parser.add_argument("--break", dest="mode", choices=MODES, required=True)
    parser.add_argument("--data", required=True)
    parser.add_argument("--trusted-coordinators", required=True)
    args = parser.parse_args(argv)
    quiet()
    data = Path(args.data)
    _server, runtime, _inventory = build(payments.SPEC, data, trusted_coordinators=args.trusted_coordinators)
    key = load_or_create_key(data, ["participant"])
    clock = SystemClock()
    trust = (
        AdmitAnyone(None, clock) if args.mode == "trust-anyone" else open_trust(data, args.trusted_coordinators, clock)
    )
    server = MCPServer("hatp-broken-payments", version="0.0.1", log_level="WARNING")
    settings = HatpSettings(
        roles=["participant"],
        operations={o.name: OperationInfo(o.tier, 900 if o.tier == "hold" else None) for o in payments.SPEC.ops},
        keys=[key.public_jwk()],
    )
    serve_hatp(server, Broken(runtime, key, args.mode), settings, trust=trust)
    anyio.run(functools.partial(serve, server, "stdio"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
