"""demo.people: a scripted person signs with their own test-only key and decides through the gateway's tools; a
person whose key it is not cannot be impersonated by naming them."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from mcp import Client

from demo.people import GatewayRefused, decide_as, inbox_key_args, key_file
from hatp_mcp.core.model.evidence import Approval
from hatp_mcp.runtime.clock import FakeClock
from tests.acme_org import h, human_key
from tests.mcp.gateway_fixture import make_gateway
from tests.mcp.test_gateway_tools import ask_plan, gateway_server

pytestmark = pytest.mark.anyio


async def test_scripted_people_decide_with_their_own_keys_and_the_approval_carries_their_proofs(
    tmp_path: Path, clock: FakeClock
) -> None:
    gw = make_gateway(tmp_path, clock)
    fake_org = tmp_path / "org"  # dana's key filed under frank's name: she tries to decide as frank
    key_file("frank", fake_org).parent.mkdir(parents=True)
    key_file("frank", fake_org).write_text(key_file("dana").read_text())
    with anyio.fail_after(10):
        async with Client(gateway_server(gw)) as client:
            await ask_plan(client, clock)
            await decide_as(client, "txn-acme-0001/finance", "bob", "approve", now=clock.now())
            done = await decide_as(client, "txn-acme-0001/finance", h("carol"), "approve", now=clock.now())
            with pytest.raises(GatewayRefused) as err:
                await decide_as(client, "txn-acme-0001/finance", "frank", "reject", now=clock.now(), org=fake_org)
    approval = Approval.model_validate(done["approval"])
    assert [d.proof.signature.kid for d in approval.decisions if d.proof and d.proof.signature] == [
        human_key("bob").kid,
        human_key("carol").kid,
    ]
    assert err.value.refusal["rule"] == "HATP-GW-20" and "HATP-GW-20" in str(err.value)


def test_inbox_key_args_name_the_person_and_their_key_file() -> None:
    assert inbox_key_args("bob") == ["--as", h("bob"), "--key", str(key_file("bob"))]
    assert key_file(h("bob")).exists()
