"""A coordinator's view of the cards follows the Directory (HATP-GW-82): FreshCardsApprover looks at the cards again
before it hands on each answer of the gateway, and the coordinator's HumanKeys (shared by its running transactions'
configuration) then holds the re-signed card, in place; a card signed by another key takes the person's keys away."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest

from hatp_mcp.core.gateway.directory import Directory
from hatp_mcp.core.gateway.proof import HumanKeys
from hatp_mcp.core.model.estimate import Estimate
from hatp_mcp.core.model.plan import Plan
from hatp_mcp.core.model.terms import ApprovalTerms
from hatp_mcp.core.signing.keys import sign_object
from hatp_mcp.runtime.card_watch import CardWatch
from hatp_mcp.runtime.coordinator.fresh_cards_approver import FreshCardsApprover
from hatp_mcp.runtime.interfaces import ApproverAnswer
from hatp_mcp.runtime.org import load_human_keys
from tests.acme_org import ORG_DIR, directory_key, gateway_key, h
from tests.passkey_authenticator import SoftAuthenticator

pytestmark = pytest.mark.anyio

ANSWER = ApproverAnswer(vote={"decision": "yes"}, approval={"type": "hatp.approval"})


class Gateway:
    """The gateway's side as the coordinator sees it: answers, and a hook run when it answers (the operator)."""

    def __init__(self) -> None:
        self.on_answer: list[Any] = []

    async def _answer(self) -> ApproverAnswer:
        for step in self.on_answer:
            step()
        self.on_answer.clear()
        return ANSWER

    async def ask(self, plan: Plan, requirement_id: str, terms: ApprovalTerms | None = None) -> ApproverAnswer:
        return await self._answer()

    async def poll(self, txn_id: str, requirement_id: str) -> ApproverAnswer:
        return await self._answer()

    async def wait(self, txn_id: str, requirement_id: str, seconds: float) -> ApproverAnswer:
        return await self._answer()

    async def tighten(self, txn_id: str, requirement_id: str, terms: ApprovalTerms) -> ApproverAnswer:
        return await self._answer()

    async def withdraw(self, txn_id: str, requirement_id: str) -> None:
        return None

    async def estimate(self, plan: Plan, requirement_id: str) -> Estimate:
        raise AssertionError("not used")


def _resign(org: Path, name: str, key: dict[str, str], signer: Any) -> None:
    path = org / "cards" / f"{name}.json"
    card = {k: v for k, v in json.loads(path.read_text()).items() if k != "signature"}
    card["keys"] = [*card["keys"], key]
    path.write_text(json.dumps(sign_object(card, signer)))


def _passkeys(humans: HumanKeys, name: str) -> list[str]:
    card = humans.cards.get(h(name))
    return [k.id for k in card.keys if k.type == "passkey"] if card is not None else []


async def test_HATP_GW_82_the_coordinators_cards_are_fresh_when_the_gateways_answer_is_handed_on(
    tmp_path: Path,
) -> None:
    org = tmp_path / "org"
    shutil.copytree(ORG_DIR, org)
    humans = load_human_keys(org)
    held = humans  # what every running transaction's Config holds

    def use(d: Directory) -> None:
        humans.use_cards(d.cards())

    gateway = Gateway()
    approver = FreshCardsApprover(gateway, CardWatch(org, use).refresh)
    erin = SoftAuthenticator(h("erin")).card_key()
    gateway.on_answer.append(lambda: _resign(org, "erin", erin, directory_key()))  # approved while the ask waited
    answered = await approver.wait("txn-1", "finance", 5)
    assert answered is ANSWER and held is humans and _passkeys(held, "erin")[-1] == erin["id"]
    gateway.on_answer.append(lambda: _resign(org, "bob", erin, gateway_key()))  # not the Directory's key
    await approver.poll("txn-1", "finance")
    assert h("bob") not in held.cards and held.keyring_for(h("bob")) is None  # bob's card no longer counts
    with pytest.raises(TypeError):  # keys someone else owns are not changed behind their back
        HumanKeys(by_human=MappingProxyType({}), cards={}).use_cards([])
