"""Choose / form / text asks answered in the web inbox over real HTTP, with the software authenticator: the answer is
bound into the passkey challenge and checks offline against the card (HATP-GW-80); an answer that does not fit
the ask is refused with its rule before any challenge exists, so nothing signs it (HATP-ASK-2..4); an assertion
over one answer does not count as another. tests/web/test_questions_browser.py does it in Chromium."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from hatp_mcp.core.gateway.passkey import unb64u
from hatp_mcp.core.gateway.proof import HumanKeys, check_answer_proof
from hatp_mcp.core.model.gateway import Answer
from hatp_mcp.errors import HatpError
from hatp_mcp.runtime.clock import FakeClock
from tests.acme_org import h
from tests.web.browserless import Browserless, signed_in
from tests.web.inbox_fixture import Served, serve_inbox

pytestmark = pytest.mark.anyio

FORM = {
    "type": "object",
    "properties": {"nights": {"type": "integer", "minimum": 1}, "late": {"type": "boolean"}},
    "required": ["nights"],
}


@pytest.fixture
async def served(tmp_path: Path, clock: FakeClock) -> AsyncIterator[Served]:
    async with serve_inbox(tmp_path, clock) as s:
        options = [{"id": "adlon", "label": "Hotel Adlon"}, {"id": "ritz", "label": "The Ritz"}]
        await s.gateway.open_question(
            ask_id="q-hotel", kind="choose", address=h("bob"), question="Which hotel?", options=options
        )
        await s.gateway.open_question(
            ask_id="q-stay", kind="form", address=h("bob"), question="How long?", form_schema=FORM
        )
        await s.gateway.open_question(
            ask_id="q-diet", kind="text", address=h("bob"), question="Dietary needs?", max_length=20
        )
        yield s


async def answer(s: Served, b: Browserless, ask_id: str, value: Any) -> tuple[int, dict[str, Any]]:
    status, options = await b.post(f"/asks/{ask_id}/challenge", {"decision": "answer", "value": value})
    if status != 200:
        return status, options
    credential = s.bob.credential_json(unb64u(options["challenge"]), origin=s.origin)
    return await b.post(f"/asks/{ask_id}/decide", {"nonce": options["nonce"], "credential": credential})


def keys(s: Served) -> HumanKeys:
    return HumanKeys.from_cards(s.gateway.directory.cards(), s.inbox.rp)


@pytest.mark.parametrize(
    ("ask_id", "value"), [("q-hotel", "ritz"), ("q-stay", {"nights": 3, "late": True}), ("q-diet", "no nuts")]
)
async def test_HATP_GW_80_bob_answers_each_kind_with_his_passkey_and_the_answer_checks_offline_against_his_card(
    served: Served, ask_id: str, value: Any
) -> None:
    with anyio.fail_after(20):
        b = await signed_in(served)
        status, options = await b.post(f"/asks/{ask_id}/challenge", {"decision": "answer", "value": value})
        credential = served.bob.credential_json(unb64u(options["challenge"]), origin=served.origin)
        decided, result = await b.post(f"/asks/{ask_id}/decide", {"nonce": options["nonce"], "credential": credential})
        stored = await served.gateway.current(ask_id)
    assert status == 200 and options["payload"]["value"] == value and options["payload"]["decision"] == "answer"
    assert (decided, result) == (200, {"state": "answered"})
    assert stored.evidence is not None
    signed = Answer.model_validate(stored.evidence)
    assert signed.value == value and signed.answerer == h("bob") and signed.passkey is not None
    assert signed.proof is None and signed.passkey.value == value
    check_answer_proof(signed, keys(served))  # offline, against bob's Directory-signed card
    other = "adlon" if ask_id == "q-hotel" else {"nights": 9} if ask_id == "q-stay" else "anything"
    with pytest.raises(HatpError) as moved:  # the gateway's Answer altered to another value: the assertion says no
        check_answer_proof(signed.model_copy(update={"value": other}), keys(served))
    assert (moved.value.rule, moved.value.code) == ("HATP-GW-80", "PASSKEY_WRONG_ANSWER")
    with pytest.raises(HatpError) as unchecked:  # no relying party: refused, never counted unchecked
        check_answer_proof(signed, HumanKeys.from_cards(served.gateway.directory.cards()))
    assert unchecked.value.rule == "HATP-GW-70"


async def test_HATP_GW_80_an_assertion_over_one_answer_posted_with_another_answers_nonce_is_refused_and_changes_nothing(
    served: Served,
) -> None:
    with anyio.fail_after(20):
        b = await signed_in(served)
        _s, adlon = await b.post("/asks/q-hotel/challenge", {"decision": "answer", "value": "adlon"})
        _s, ritz = await b.post("/asks/q-hotel/challenge", {"decision": "answer", "value": "ritz"})
        signed_ritz = served.bob.credential_json(unb64u(ritz["challenge"]), origin=served.origin)
        status, refused = await b.post("/asks/q-hotel/decide", {"nonce": adlon["nonce"], "credential": signed_ritz})
        stored = served.gateway.store.get("q-hotel")
    assert (status, refused["rule"]) == (403, "HATP-GW-67") and "another challenge" in refused["error"]
    assert stored is not None and stored.record is not None and stored.record.state == "pending"


async def refused_before_signing(s: Served, ask_id: str, value: Any) -> tuple[int, dict[str, Any], int]:
    b = await signed_in(s)
    counted = s.inbox.state.sign_count(s.bob.credential_id)
    status, body = await b.post(f"/asks/{ask_id}/challenge", {"decision": "answer", "value": value})
    stored = s.gateway.store.get(ask_id)
    assert stored is not None and stored.record is not None and stored.record.state == "pending"
    assert s.inbox.state.sign_count(s.bob.credential_id) == counted  # nothing was signed
    assert "nonce" not in body and "challenge" not in body  # nothing to sign was handed out
    return status, body, counted


async def test_HATP_ASK_2_an_option_the_ask_did_not_offer_is_refused_before_any_challenge(served: Served) -> None:
    with anyio.fail_after(20):
        status, body, _c = await refused_before_signing(served, "q-hotel", "<script>x</script>")
    assert (status, body["rule"], body["path"]) == (400, "HATP-ASK-2", "$.value")
    assert "is not one of the options ['adlon', 'ritz']" in body["error"]


@pytest.mark.parametrize(
    ("value", "path", "says"),
    [
        ({"late": True}, "$.value", "'nights' is a required property"),
        ({"nights": "three"}, "$.value.nights", "'three' is not of type 'integer'"),
        ({"nights": 0}, "$.value.nights", "0 is less than the minimum of 1"),
        ("3 nights", "$.value", "a form answer is a JSON object of fields"),
    ],
)
async def test_HATP_ASK_3_a_form_answer_with_a_field_missing_or_of_the_wrong_type_is_refused_naming_the_field(
    served: Served, value: Any, path: str, says: str
) -> None:
    with anyio.fail_after(20):
        status, body, _c = await refused_before_signing(served, "q-stay", value)
    assert (status, body["rule"], body["path"]) == (400, "HATP-ASK-3", path) and says in body["error"]


@pytest.mark.parametrize("value", ["x" * 21, "   ", 42])
async def test_HATP_ASK_4_a_text_answer_too_long_blank_or_not_text_is_refused_before_any_challenge(
    served: Served, value: Any
) -> None:
    with anyio.fail_after(20):
        status, body, _c = await refused_before_signing(served, "q-diet", value)
    assert (status, body["rule"]) == (400, "HATP-ASK-4") and "at most 20 characters" in body["error"]


async def test_HATP_ASK_6_a_question_is_answered_or_declined_never_approved_in_the_inbox(served: Served) -> None:
    with anyio.fail_after(20):
        b = await signed_in(served)
        status, body = await b.post("/asks/q-hotel/challenge", {"decision": "approve"})
    assert (status, body["rule"]) == (400, "HATP-ASK-6")


async def test_HATP_ASK_5_a_question_declined_with_a_passkey_passes_on_and_carries_no_answer(served: Served) -> None:
    with anyio.fail_after(20):
        b = await signed_in(served)
        status, options = await b.post("/asks/q-diet/challenge", {"decision": "decline"})
        credential = served.bob.credential_json(unb64u(options["challenge"]), origin=served.origin)
        decided, result = await b.post("/asks/q-diet/decide", {"nonce": options["nonce"], "credential": credential})
        stored = await served.gateway.current("q-diet")
    assert status == 200 and "value" not in options["payload"]
    assert decided == 200 and stored.record is not None and stored.evidence is None
    seat = next(s for s in stored.record.seats if s.human == h("bob"))
    assert (seat.status, seat.rule) == ("excluded", "HATP-ASK-5"), stored.record.seats
    assert result == {"state": stored.record.state} and stored.record.state != "answered"
