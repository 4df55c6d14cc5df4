"""TEST-ONLY coordinator identities: a coordinator's key, the trust lists that name it, and its request signer.

`COORDINATOR` is the id the coordinator core uses by default (Config.coordinator); `KEY` its signing key for the
test session. `trusted(clock)` is a receiver's trust list holding it (in memory), `signer(clock)` that coordinator's
RequestSigner.sign, and `trust_dirs(...)` writes DATA/trusted-coordinators.json for real server processes.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from hatp_mcp.core.model.messages import CommitRequest
from hatp_mcp.core.model.plan import Plan
from hatp_mcp.core.signing.canonical import digest
from hatp_mcp.core.signing.keys import Keyring, SigningKey, sign_object
from hatp_mcp.core.txn.record import RecordChain
from hatp_mcp.mcp.call import Signer
from hatp_mcp.runtime.clock import Clock
from hatp_mcp.runtime.coordinator_trust import TRUST_FILE, RequestSigner, TrustedCoordinators, write_trust_list
from hatp_mcp.store.files import load_or_create_key

__all__ = [
    "COORDINATOR",
    "KEY",
    "OTHER",
    "OTHER_KEY",
    "commit_request",
    "decision_event",
    "decision_for",
    "signer",
    "trust_coordinator_dirs",
    "trust_dirs",
    "trust_ring",
    "trusted",
    "trusting",
]

COORDINATOR = "coordinator://localhost"
KEY = SigningKey.generate(["coordinator"])
OTHER = "coordinator://other.example"  # a second trusted coordinator (HATP-TRUST-5: it cannot take over a txn)
OTHER_KEY = SigningKey.generate(["coordinator"])


def trust_ring(*pairs: tuple[str, SigningKey]) -> Keyring:
    ring = Keyring()
    for party, key in pairs or ((COORDINATOR, KEY),):
        ring.add_signer(key, party)
    return ring


def trusted(clock: Clock, *pairs: tuple[str, SigningKey]) -> TrustedCoordinators:
    return TrustedCoordinators(trust_ring(*pairs), clock)


def signer(clock: Clock, coordinator: str = COORDINATOR, key: SigningKey = KEY) -> Signer:
    return RequestSigner(key, coordinator, clock).sign


def trust_dirs(dirs: Iterable[Path], coordinator: str = COORDINATOR, key: SigningKey = KEY) -> None:
    """Each receiver's --data trusts `coordinator` (DATA/trusted-coordinators.json), before it starts."""
    for data in dirs:
        write_trust_list(data, {coordinator: key.public_jwk()})


def decision_for(
    plan: Plan,
    decision: str = "commit",
    *,
    at: str = "2026-11-29T10:00:00Z",
    key: SigningKey = KEY,
    author: str = COORDINATOR,
) -> dict[str, Any]:
    """The coordinator-signed `decision` record event a commit carries (HATP-TRUST-7), from a chain of its own."""
    chain = RecordChain(plan, key, author)
    chain.append("txn.begin", at)
    return chain.append("decision", at, {"decision": decision, "reason": "test"})


def trust_coordinator_dirs(
    receivers: Iterable[Path], coordinators: Iterable[Path], coordinator: str = COORDINATOR
) -> None:
    """Real processes: the keys of the coordinator servers that will run on `coordinators` (created now, as each
    server would on its first start), all speaking as `coordinator`, are trusted by every receiver's --data."""
    keys = [load_or_create_key(d, ["coordinator"]) for d in coordinators]
    ring = Keyring()
    for key in keys:
        ring.add_signer(key, coordinator)
    for data in receivers:
        data.mkdir(parents=True, exist_ok=True)
        (data / TRUST_FILE).write_text(json.dumps(ring.to_jwks()))


def decision_event(
    txn_id: str, plan_digest: str, decision: str = "commit", *, key: SigningKey = KEY, author: str = COORDINATOR
) -> dict[str, Any]:
    """A coordinator-signed `decision` record event naming this transaction and plan (HATP-TRUST-7)."""
    event = {
        "type": "hatp.event",
        "txnId": txn_id,
        "seq": 1,
        "planDigest": plan_digest,
        "event": "decision",
        "author": author,
        "at": "2026-11-29T10:00:00Z",
        "body": {"decision": decision, "reason": "test"},
    }
    return sign_object(event, key)


def commit_request(vote: Mapping[str, Any], **fields: Any) -> CommitRequest:
    """A CommitRequest carrying the test coordinator's decision to commit and the branch's yes `vote` it rests on
    (HATP-TRUST-7)."""
    decision = decision_event(fields["txn_id"], fields["plan_digest"])
    return CommitRequest(**fields, decision=decision, vote_digest=digest(vote))


def trusting(data: Path, coordinator: str = COORDINATOR, key: SigningKey = KEY) -> Path:
    """`data` (a server's --data) now trusts the test coordinator; returned for use in a launch."""
    trust_dirs([data], coordinator, key)
    return data
