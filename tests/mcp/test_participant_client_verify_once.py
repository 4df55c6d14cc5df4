"""Verify once: what HATP-MCP-4 checks in mcp_participant, the coordinator core checks too (HATP-TXN-2, and whose
key signed through the keyring's party binding, HATP-SIG-6), so the coordinator's links pass verify=False."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import pytest
from mcp import Client

from demo.trip_world import AIRLINE, HOTEL, trip_plan
from hatp_mcp.core.model.messages import StatusRequest
from hatp_mcp.core.signing.keys import Keyring, SigningKey, sign_object
from hatp_mcp.core.txn.events import Decide, PrepareAnswer, Record, Start, TxnState
from hatp_mcp.core.txn.machine import Coordinator
from hatp_mcp.errors import HatpError
from hatp_mcp.mcp import server_links as links
from hatp_mcp.mcp.participant_client import McpParticipant, mcp_participant
from hatp_mcp.runtime.clock import FakeClock
from tests.coordinators import signer
from tests.core.txn.test_machine import KEYS, NOW, RING, answer
from tests.mcp.test_participant_client import prepare_req
from tests.mcp.toy import AIRLINE as TOY_AIRLINE
from tests.mcp.toy import Toy, toy_server

Edit = Callable[[dict[str, Any]], None]


def _set(field: str, value: Any) -> Edit:
    return lambda obj: obj.__setitem__(field, value)


def _tamper(obj: dict[str, Any]) -> None:
    obj["signature"] = {**obj["signature"], "sig": obj["signature"]["sig"][::-1]}


def _started() -> Coordinator:
    c = Coordinator.begin(trip_plan(NOW), NOW, RING)
    c.handle(Start(), NOW)
    return c


def _planted(c: Coordinator, which: str, edit: Edit, key: SigningKey, resign: bool) -> PrepareAnswer:
    good = answer(c.plan, "seat", AIRLINE, KEYS["airline"])
    vote, receipt = dict(good.vote), dict(good.receipt)
    target = vote if which == "vote" else receipt
    if resign:
        del target["signature"]
        edit(target)
        target.update(sign_object(target, key))
    else:
        edit(target)
    return PrepareAnswer(branch_id="seat", vote=vote, receipt=receipt)


# Each violation HATP-MCP-4 refuses in mcp_participant, planted in the vote and in the receipt.
VIOLATIONS: dict[str, tuple[Edit, str, bool]] = {
    "a broken signature": (_tamper, "airline", False),
    "a key outside the keyring": (lambda o: None, "stranger", True),
    "a key without the participant role": (lambda o: None, "gateway", True),
    "another txnId": (_set("txnId", "txn-other-0001"), "airline", True),
    "another branchId": (_set("branchId", "room"), "airline", True),
    "another planDigest": (_set("planDigest", "sha256:" + "0" * 64), "airline", True),
}
STRANGER = SigningKey.generate(["participant"], kid="stranger")


@pytest.mark.parametrize("which", ["vote", "receipt"])
@pytest.mark.parametrize("violation", sorted(VIOLATIONS))
def test_HATP_MCP_4_every_check_is_also_made_by_the_coordinator_core_as_HATP_TXN_2(which: str, violation: str) -> None:
    edit, signer, resign = VIOLATIONS[violation]
    key = STRANGER if signer == "stranger" else KEYS[signer]
    c = _started()
    out = c.handle(_planted(c, which, edit, key, resign), NOW)
    refused = [x for x in out if isinstance(x, Record) and x.event == "evidence.refused"]
    assert [r.body["rule"] for r in refused] == ["HATP-TXN-2"]
    assert not any(isinstance(x, Record) and x.evidence is not None for x in out)  # nothing counted or chained
    assert any(isinstance(x, Decide) and x.decision == "abort" for x in out)
    assert c.state is TxnState.ABORTING


@pytest.mark.parametrize("field", ["voter", "participant"])
def test_HATP_MCP_4_evidence_naming_another_participant_is_refused_by_the_core(field: str) -> None:
    c = _started()
    which = "vote" if field == "voter" else "receipt"
    out = c.handle(_planted(c, which, _set(field, HOTEL), KEYS["airline"], True), NOW)
    assert [x.body["rule"] for x in out if isinstance(x, Record) and x.event == "evidence.refused"] == ["HATP-TXN-2"]
    assert c.state is TxnState.ABORTING


def test_HATP_MCP_4_whose_key_signed_is_checked_by_the_core_as_HATP_SIG_6() -> None:
    # The hotel's own key signs a vote that names the airline: its keyring entry is bound to the hotel, so the
    # core refuses it, and the link need not check the signer itself
    c = _started()
    out = c.handle(answer(c.plan, "seat", AIRLINE, KEYS["hotel"]), NOW)
    refused = [x for x in out if isinstance(x, Record) and x.event == "evidence.refused"]
    assert [(r.body["rule"], r.body["code"]) for r in refused] == [("HATP-TXN-2", "KEY_NOT_THE_PARTICIPANTS")]
    assert "HATP-SIG-6" in refused[0].body["reason"]
    assert c._d.phase1.votes["seat"] != "yes" and c.state is TxnState.ABORTING


@pytest.mark.anyio
async def test_HATP_MCP_4_without_verify_the_answer_is_handed_on_for_the_core_to_check(clock: FakeClock) -> None:
    toy = Toy(clock)
    stranger = Keyring()
    stranger.add_signer(SigningKey.generate(["participant"]))
    with anyio.fail_after(10):
        async with Client(toy_server(toy)) as client:
            with pytest.raises(HatpError) as info:  # verify=True (the default): checked here
                await mcp_participant(TOY_AIRLINE, client, stranger, signer=toy.signer).prepare(prepare_req())
            # verify=False: nothing is checked twice; the coordinator core verifies it (HATP-TXN-2, HATP-SIG-6)
            result = await mcp_participant(TOY_AIRLINE, client, stranger, verify=False, signer=toy.signer).prepare(
                prepare_req()
            )
    assert (info.value.rule, info.value.code) == ("HATP-MCP-4", "SIGNATURE_INVALID")
    assert result.vote["decision"] == "yes"


@pytest.mark.anyio
async def test_HATP_MCP_4_a_status_receipt_is_fully_verified_even_without_verify(clock: FakeClock) -> None:
    toy = Toy(clock)
    with anyio.fail_after(10):
        async with Client(toy_server(toy)) as client:
            part = McpParticipant("mcp://impostor.example/hatp", client, toy.keyring, verify=False, signer=toy.signer)
            await part.prepare(prepare_req())  # the core would refuse the impostor; this caller skips it
            with pytest.raises(HatpError) as info:
                await part.status(StatusRequest(txn_id="txn-toy-0001", branch_id="seat"))
    assert (info.value.rule, info.value.code) == ("HATP-MCP-4", "EVIDENCE_MISMATCH")


@pytest.mark.anyio
async def test_the_coordinators_links_ask_mcp_participant_not_to_verify_again(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[bool, object]] = []

    class Recorder:
        def __init__(
            self, uri: str, client: object, keyring: Keyring, *, timeout: float | None, verify: bool, signer: object
        ) -> None:
            seen.append((verify, signer))

        async def prepare(self, req: object) -> str:
            return "answered"

    class FakeLink:
        async def client(self) -> object:
            return object()

    monkeypatch.setattr(links, "McpParticipant", Recorder)
    sign = signer(FakeClock())
    linked = links.LinkedParticipant("mcp://a", FakeLink(), Keyring(), signer=sign)  # type: ignore[arg-type]
    with anyio.fail_after(5):
        assert await linked.prepare(prepare_req()) == "answered"  # type: ignore[comparison-overlap]
    assert seen == [(False, sign)]  # and every request it sends carries the coordinator's auth (HATP-TRUST-11)
