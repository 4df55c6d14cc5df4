"""`hatp verify --org`: the humans' own proofs inside a record's approvals, checked offline against the cards."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hatp_mcp.cli import main
from hatp_mcp.core.evidence.keys import Keyring, SigningKey, sign_object
from hatp_mcp.core.txn.record import RecordChain, verify_record
from hatp_mcp.runtime.clock import FakeClock
from hatp_mcp.runtime.gateway import GatewayApprover
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
    assert json.loads(capsys.readouterr().out) == {"ok": True, "problems": [], "humanProofs": "checked"}
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
