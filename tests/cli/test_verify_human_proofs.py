"""`hatp verify --org`: the humans' own proofs inside a record's approvals, checked offline against the cards."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hatp_mcp.cli import main
from hatp_mcp.core.signing.keys import Keyring, SigningKey, sign_object
from hatp_mcp.core.txn.record import RecordChain, verify_record
from hatp_mcp.runtime.clock import FakeClock
from hatp_mcp.runtime.gateway.driver import GatewayApprover
from hatp_mcp.store.gateway_store import SqliteGatewayStore
from tests.acme_org import ORG_DIR, decide_as, directory, gateway_key, human_keys, keyring, plan

pytestmark = pytest.mark.anyio


async def _record_with_approval(
    tmp_path: Path, clock: FakeClock, alter: Callable[[dict[str, Any]], dict[str, Any]] | None = None
) -> tuple[dict[str, Any], Keyring]:
    """A closed record whose approval came from the real gateway: bob and carol decided with their own keys.
    `alter` may change the signed approval before it is chained (a planted violation)."""
    store = SqliteGatewayStore(tmp_path / "gw")
    gw = GatewayApprover(directory=directory(), key=gateway_key(), store=store, clock=clock)
    p = plan()
    await gw.ask(p, "finance")
    await decide_as(gw, "txn-acme-0001/finance", "bob", "approve")
    await decide_as(gw, "txn-acme-0001/finance", "carol", "approve")
    answer = await gw.poll(p.txn_id, "finance")
    store.close()
    assert answer.approval is not None
    coordinator = SigningKey.generate(["coordinator"], kid="coord")
    ring = keyring()
    ring.add_signer(coordinator)
    chain = RecordChain(p, coordinator, "coordinator://acme.com/c1")
    at = "2026-11-29T10:00:00Z"
    chain.append("txn.begin", at)
    chain.append("vote", at, {"branchId": "finance"}, answer.vote, author="gateway")
    approval = alter(answer.approval) if alter else answer.approval
    chain.append("approval", at, {"branchId": "finance"}, approval, author="gateway")
    chain.append("abort.requested", at, {"reason": "plans changed", "by": p.requester.agent})  # HATP-REC-14
    chain.append("decision", at, {"decision": "abort", "reason": "ABORT_REQUESTED: plans changed"})
    chain.close(at, "ABORTED")
    return chain.record(), ring


def _write(tmp_path: Path, name: str, value: Any) -> str:
    path = tmp_path / name
    path.write_text(json.dumps(value))
    return str(path)


async def test_a_record_whose_approval_carries_the_peoples_proofs_verifies_with_the_org(
    tmp_path: Path, clock: FakeClock, capsys: pytest.CaptureFixture[str]
) -> None:
    record, ring = await _record_with_approval(tmp_path, clock)
    assert verify_record(record, ring, humans=human_keys()) == []
    rec, keys = _write(tmp_path, "r.json", record), _write(tmp_path, "k.json", ring.to_jwks())
    assert main(["verify", rec, "--keys", keys, "--org", str(ORG_DIR), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["ok"], out["problems"], out["humanProofs"], out["humanDecisions"]) == (True, [], "checked", 2)
    assert out["outcome"] == "ABORTED" and "asked to abort" in out["grounds"][0]
    assert main(["verify", rec, "--keys", keys]) == 0
    assert "proofs were not checked" in capsys.readouterr().out  # an absent check is never shown as a pass


def _drop_carols_proof(approval: dict[str, Any]) -> dict[str, Any]:
    # a gateway that re-signs the approval without the person's proof still cannot make it count
    body = copy.deepcopy({k: v for k, v in approval.items() if k != "signature"})
    del body["decisions"][1]["proof"]
    return sign_object(body, gateway_key())


async def test_an_approval_whose_decision_lost_its_proof_is_reported_HATP_GW_27(
    tmp_path: Path, clock: FakeClock, capsys: pytest.CaptureFixture[str]
) -> None:
    bad, ring = await _record_with_approval(tmp_path, clock, _drop_carols_proof)
    problems = verify_record(bad, ring, humans=human_keys())
    assert [(p.index, p.rule) for p in problems] == [(2, "HATP-GW-27")]
    assert "carol" in problems[0].reason
    assert verify_record(bad, ring) == []  # without the cards the proofs are simply not checked
    rec, keys = _write(tmp_path, "bad.json", bad), _write(tmp_path, "k.json", ring.to_jwks())
    assert main(["verify", rec, "--keys", keys, "--org", str(ORG_DIR), "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["problems"][0]["rule"] == "HATP-GW-27" and out["humanProofs"] == "checked"


async def _committed(tmp_path: Path, clock: FakeClock, stand_in: str | None = None) -> tuple[dict[str, Any], Keyring]:
    """A COMMITTED record of the one-payment acme plan, its approval from the real gateway (bob and carol).
    `stand_in`: a holder of the gateway's key swaps carol's decision for that person's own valid proof."""
    from tests.acme_org import GATEWAY_ID, signed_for

    store = SqliteGatewayStore(tmp_path / f"gw-{stand_in}")
    gw = GatewayApprover(directory=directory(), key=gateway_key(), store=store, clock=clock)
    p = plan()
    await gw.ask(p, "finance")
    await decide_as(gw, "txn-acme-0001/finance", "bob", "approve")
    await decide_as(gw, "txn-acme-0001/finance", "carol", "approve")
    answer = await gw.poll(p.txn_id, "finance")
    approval = answer.approval
    assert approval is not None
    if stand_in is not None:
        body = copy.deepcopy({k: v for k, v in approval.items() if k != "signature"})
        them = signed_for(store, "txn-acme-0001/finance", stand_in, "approve", clock.now())
        body["decisions"][1] = {**body["decisions"][1], "approver": them["human"], "proof": them}
        approval = sign_object(body, gateway_key())
    store.close()
    coordinator = SigningKey.generate(["coordinator"], kid="coord")
    payments = SigningKey.generate(["participant"], kid="payments-1")
    org = keyring()
    ring = Keyring(e.with_party(GATEWAY_ID) if "gateway" in e.roles else e for e in org.entries())
    ring.add_signer(coordinator)
    ring.add_signer(payments, "mcp://payments.example/hatp")
    chain = RecordChain(p, coordinator, "coordinator://acme.com/c1")
    at = "2026-11-29T10:00:00Z"
    d = chain.plan_digest

    def signed(kind: str, phase: str | None = None) -> dict[str, Any]:
        party = {"voter" if kind == "hatp.vote" else "participant": "mcp://payments.example/hatp"}
        more = {"decision": "yes"} if phase is None else {"phase": phase, "outcome": "ok"}
        body = {"type": kind, "txnId": p.txn_id, "branchId": "pay0", "planDigest": d, **party, **more}
        return sign_object({**body, "issuedAt": at}, payments)

    chain.append("txn.begin", at)
    chain.append("vote", at, {"branchId": "pay0"}, signed("hatp.vote"), author="mcp://payments.example/hatp")
    chain.append("receipt", at, {"branchId": "pay0"}, signed("hatp.receipt", "prepare"))
    chain.append("vote", at, {"branchId": "finance"}, answer.vote, author=GATEWAY_ID)
    chain.append("approval", at, {"requirementId": "finance"}, approval, author=GATEWAY_ID)
    chain.append("decision", at, {"decision": "commit"})
    chain.append("commit", at, {"branchId": "pay0"}, signed("hatp.receipt", "commit"))
    chain.close(at, "COMMITTED")
    return chain.record(), ring


async def test_HATP_REC_11_with_the_org_an_approver_without_authority_over_the_amount_proves_no_commit(
    tmp_path: Path, clock: FakeClock, capsys: pytest.CaptureFixture[str]
) -> None:
    good, ring = await _committed(tmp_path, clock)
    assert verify_record(good, ring, humans=human_keys()) == []
    # alice really signed, but her card allows $10,000 and the plan moves $25,000: the gateway's key cannot fix that
    bad, ring = await _committed(tmp_path, clock, stand_in="alice")
    assert verify_record(bad, ring) == []  # without the cards the people are the gateway's word
    problems = verify_record(bad, ring, humans=human_keys())
    assert [(p.index, p.rule) for p in problems] == [(5, "HATP-REC-11")]
    assert "HATP-TXN-20" in problems[0].reason and "alice" in problems[0].reason and "HATP-GW-45" in problems[0].reason
    rec, keys = _write(tmp_path, "bad.json", bad), _write(tmp_path, "k.json", ring.to_jwks())
    assert main(["verify", rec, "--keys", keys, "--org", str(ORG_DIR)]) == 1
    assert "HATP-REC-11" in capsys.readouterr().out
