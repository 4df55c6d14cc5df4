"""What a model reads of an ask, over real processes (coordinator, gateway and the four tool servers over HTTP):
an SDK client calls the gateway process's `show_ask` and `list_asks` while a trip waits for approval, and their
`text` names people by display name, says the payment cannot be undone and counts down to the deadline in UTC from
the gateway's clock, while the structured fields stay as the wire has them (HATP-GW-96)."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from typing import Any

import anyio
import pytest

from tests.acme_org import ORG_DIR
from tests.e2e.coordinator_suite import Agent, trip
from tests.e2e.test_coordinator_http import Suite

pytestmark = [pytest.mark.e2e, pytest.mark.anyio]

IN_N_MIN = re.compile(r"  decide by \d{4}-\d\d-\d\d \d\d:\d\d UTC \(in (\d+ h )?\d+ min\)")


@pytest.fixture(scope="module")
async def suite(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Suite]:
    data = tmp_path_factory.mktemp("ask-text")
    async with AsyncExitStack() as stack:
        s = Suite(data, stack)
        await s.start_trip()
        yield s


def display_name(address: str) -> str:
    """The display name on the person's card in the organisation the gateway serves."""
    card = json.loads((ORG_DIR / "cards" / f"{address.rsplit('/', 1)[1]}.json").read_text())
    return str(card["displayName"])


async def test_HATP_GW_96_a_model_reads_show_ask_and_list_asks_with_names_the_final_step_and_in_n_min(
    suite: Suite,
) -> None:
    txn = "txn-h-ask-text"
    plan = trip(txn, "2026-12-14", "17C")
    with anyio.fail_after(90):
        async with suite.coordinator("coordinator") as proc, proc.client() as client:
            agent = Agent(client)
            await agent.begin(plan)
            await agent.asked(txn)
            shown: dict[str, Any] = await suite.tool("gateway", "show_ask", {"ask_id": f"{txn}/finance"})
            listed: dict[str, Any] = await suite.tool("gateway", "list_asks", {})
    requester = plan.requester.principal
    text = shown["text"]
    first = text.splitlines()[0]
    assert first.startswith(f"Approve {shown['ask']['screen']['action']} requested by {display_name(requester)}, ")
    assert f"({requester})" in first  # the address beside the name, for a tool that takes one
    assert "  This payment cannot be undone once approved." in text
    assert IN_N_MIN.search(text), text
    asked = shown["waitingFor"][0]
    assert f"{display_name(asked)}, " in text and f"({asked})" in text  # who must act
    assert shown["decideBy"] not in text and shown["decideBy"].endswith("Z")  # the field stays wire
    row = next(a for a in listed["asks"] if a["askId"] == f"{txn}/finance")
    assert row["text"].splitlines()[0] == first and IN_N_MIN.search(row["text"])
    assert "cannot be undone" in row["text"] and row["waitingFor"] == shown["waitingFor"]
