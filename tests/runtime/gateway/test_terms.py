"""GatewayApprover with terms (runtime/gateway/driver.py): an ask opened under terms notifies people with them, terms it
refuses make a signed no vote, and tighten re-signs the pending vote, persisted across a restart."""

from __future__ import annotations

from pathlib import Path

import pytest

from hatp_mcp.core.model.evidence import Vote
from hatp_mcp.core.model.terms import ApprovalTerms, HoldTerm
from hatp_mcp.runtime.clock import FakeClock
from hatp_mcp.runtime.gateway.driver import RecordingNotifier
from tests.core.gateway.test_terms import held_plan
from tests.mcp.gateway_fixture import make_gateway

pytestmark = pytest.mark.anyio

SEAT = HoldTerm(branch_id="seat", lease_expires_at="2026-11-29T10:15:00Z", hold_horizon="2026-11-29T12:00:00Z")
TERMS = ApprovalTerms(decide_by="2026-11-29T11:50:00Z", holds=[SEAT])


async def test_HATP_GW_31_an_ask_opened_under_terms_shows_them_to_the_first_person_asked(
    tmp_path: Path, clock: FakeClock
) -> None:
    gw = make_gateway(tmp_path, clock)
    answer = await gw.ask(held_plan(), "finance", TERMS)
    vote = Vote.model_validate(answer.vote)
    assert (vote.decision, vote.decide_by) == ("pending", "2026-11-29T11:50:00Z")
    assert isinstance(gw.notifier, RecordingNotifier)
    (_who, _contact, ask), *_ = gw.notifier.delivered
    assert ask.terms == TERMS and ask.screen is not None and ask.screen.holds == [SEAT]


async def test_HATP_GW_31_terms_the_gateway_refuses_at_the_ask_make_a_signed_no_vote(
    tmp_path: Path, clock: FakeClock
) -> None:
    gw = make_gateway(tmp_path, clock)
    late = ApprovalTerms(decide_by="2026-11-29T12:30:00Z", holds=[SEAT])  # after the seat's horizon
    answer = await gw.ask(held_plan(), "finance", late)
    assert (answer.vote["decision"], answer.vote["code"]) == ("no", "HATP-GW-31")
    assert gw.notifier.delivered == []  # type: ignore[attr-defined]
    # HATP-GW-97: signed into the vote, so the times in words without "(N min ago)", which would go stale
    assert answer.vote["reason"] == "the deadline 2026-11-29 12:30 UTC is after hold 'seat' ends (2026-11-29 12:00 UTC)"


async def test_HATP_GW_30_tighten_re_signs_the_vote_and_survives_a_restart(tmp_path: Path, clock: FakeClock) -> None:
    gw = make_gateway(tmp_path, clock)
    p = held_plan()
    await gw.ask(p, "finance")
    tightened = await gw.tighten(p.txn_id, "finance", TERMS)
    gw.store.close()
    again = make_gateway(tmp_path, clock)
    polled = await again.poll(p.txn_id, "finance")
    assert tightened.vote == polled.vote and polled.vote["decideBy"] == "2026-11-29T11:50:00Z"
    stored = again.store.get(f"{p.txn_id}/finance")
    assert stored is not None and stored.record is not None and stored.record.ask.terms == TERMS
    again.store.close()
